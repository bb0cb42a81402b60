#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs a command as if the package were installed: the users and groups of
# systemd/sysusers.conf exist (as systemd-sysusers makes them at install),
# without touching this host. Where they are missing, the command runs in a
# private mount namespace whose /etc/passwd and /etc/group are copies with
# them added. Needs root for that; otherwise runs the command as it is.
# Usage: with_sysusers.sh SRCDIR COMMAND [ARG...]
set -eu
src=$1
shift
if getent group rma >/dev/null && getent passwd rmad >/dev/null; then
	exec "$@"
fi
if [ "$(id -u)" -ne 0 ] || ! command -v systemd-sysusers >/dev/null ||
	! command -v unshare >/dev/null; then
	exec "$@"
fi
root=$(mktemp -d /tmp/rmad-sysusers.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc"
cp /etc/passwd /etc/group "$root/etc/"
[ -f /etc/shadow ] && cp /etc/shadow "$root/etc/" || true
[ -f /etc/gshadow ] && cp /etc/gshadow "$root/etc/" || true
systemd-sysusers --root="$root" "$src/systemd/sysusers.conf" >/dev/null 2>&1
unshare -m sh -c '
	root=$1; shift
	mount --bind "$root/etc/passwd" /etc/passwd &&
	mount --bind "$root/etc/group" /etc/group && exec "$@"' sh "$root" "$@"

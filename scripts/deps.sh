#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installs what rmad needs to build and test, from Debian 12 packages.
# Idempotent: installs only what is missing; needs root (or sudo) for that.
# systemd-container: systemd-nspawn, for tests/service/nspawn.sh.
# python3-venv, python3-mesonpy: pip install ./python without an index
# (tests/package/pip_install.sh); lintian: tests/package/debian.sh.
set -eu

PACKAGES="gcc pkg-config meson ninja-build libucx-dev ucx-utils \
libevent-dev libprotobuf-c-dev protobuf-c-compiler check libsystemd-dev \
libinih-dev libsodium-dev iproute2 procps systemd systemd-container clang \
libclang-rt-14-dev python3-dev python3-pytest python3-numpy python3-venv \
python3-mesonpy lintian"

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "deps: run as root: apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing

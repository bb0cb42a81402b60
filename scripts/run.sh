#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Builds rmad and runs it in the foreground with the defaults (no config
# file): client socket $XDG_RUNTIME_DIR/rmad.sock or /tmp/rmad-UID/rmad.sock,
# daemons listen on 127.0.0.1:13337. Extra arguments go to rmad.
set -eu
cd "$(dirname "$0")/.."
./scripts/build.sh >&2
exec ./build/daemon/rmad "$@"

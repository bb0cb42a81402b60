#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installs dependencies and builds into build/ (reconfiguring if needed).
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
if [ ! -f build/build.ninja ]; then
	meson setup build "$@"
fi
ninja -C build

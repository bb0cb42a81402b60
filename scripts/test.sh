#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Builds everything and runs the whole test suite.
set -eu
cd "$(dirname "$0")/.."
./scripts/build.sh
meson test -C build --print-errorlogs "$@"

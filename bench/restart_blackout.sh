#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Blackout of a hand-over (rmad --take-over) under load, as a remote
# initiator sees it: the longest gap between two completed, flushed and
# verified puts around each of ROUNDS take-overs (default 20). Runs the
# restart suite's load case; prints each round and the distribution.
# Usage: bench/restart_blackout.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-20}
export RMAD_BIN=$BUILD/daemon/rmad RMAD_RESTART_ROUNDS=$ROUNDS
export CK_RUN_CASE=take-over UCX_WARN_UNUSED_ENV_VARS=n
export CK_RUN_SUITE=restart CK_DEFAULT_TIMEOUT=900
"$BUILD/tests/test_restart" 2>&1 | grep -E 'blackout|Checks'

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Blackout of a hand-over (rmad --take-over) under load, ROUNDS take-overs
# (default 20) of one daemon (A) while three clients put 4 KiB back to
# back (remote completion, each put checked in the target's mapping):
#   remote (target restarted)    a client of another daemon B, into A's
#                                region: the target was taken over;
#   local (target restarted)     a client of A, into A's region through
#                                A: it re-attaches, A is also the target;
#   local (initiator restarted)  a client of A, into B's region: the
#                                initiating daemon was taken over.
# For each: the time from the old process's exit to the first put
# completed after it (by the new process), and the longest gap between
# two completed puts around the take-over (which also counts the old
# process's drain). Runs the restart suite's load case
# (tests/test_restart.c, test_blackout_under_load): every round per
# series, then min/median/p90/max per series, then one JSON line.
# Usage: bench/restart_blackout.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-20}
export RMAD_BIN=$BUILD/daemon/rmad RMAD_RESTART_ROUNDS=$ROUNDS
export CK_RUN_CASE=take-over UCX_WARN_UNUSED_ENV_VARS=n
export CK_RUN_SUITE=restart CK_DEFAULT_TIMEOUT=900
OUT=$(mktemp /tmp/rmad-blackout.XXXXXX)
trap 'rm -f "$OUT"' EXIT
rc=0
"$BUILD/tests/test_restart" >"$OUT" 2>&1 || rc=$?
grep -E '^blackout (round|over)|Checks' "$OUT" || true
sed -n 's/^blackout json: //p' "$OUT"
if [ "$rc" -ne 0 ]; then
	grep -E 'fail|Fail|FAIL' "$OUT" >&2 || true
	exit "$rc"
fi

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# UCX's own log lines come out through rmad's logger (HH:MM:SS.mmm rmad
# LEVEL: ucx: ...) on stderr, nothing in UCX's format on stdout; a listen
# port in use is said plainly and rmad exits non-zero.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}"

# An unknown UCX_ variable makes UCX warn while rmad starts.
mkfifo "$T/ready"
UCX_WARN_UNUSED_ENV_VARS=y UCX_RMAD_TEST_UNUSED=1 "$RMAD_BIN" \
	--socket "$T/a.sock" --listen 127.0.0.1:0 --ready-fd 3 \
	3>"$T/ready" >"$T/out" 2>"$T/err" &
pid=$!
PIDS+=("$pid")
timeout 20 head -c 6 "$T/ready" >/dev/null || fail "not ready: $(cat "$T/err")"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} rmad warn: ucx: .*UCX_RMAD_TEST_UNUSED' "$T/err" ||
	fail "no UCX warning in rmad's format: $(cat "$T/err")"
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/err" | head -n 1)
[ -n "$port" ] || fail "no listen port: $(cat "$T/err")"

# A second rmad on the same port.
rc=0
timeout 20 "$RMAD_BIN" --socket "$T/b.sock" --listen "127.0.0.1:$port" \
	>"$T/out2" 2>"$T/err2" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "rmad on a taken port exited $rc"
grep -q "already in use" "$T/err2" || fail "port in use not said: $(cat "$T/err2")"
grep -qi "device is busy" "$T/err2" && fail "UCX's 'Device is busy' shown: $(cat "$T/err2")"
kill -TERM "$pid"
wait "$pid" || fail "first rmad exited $?"
for f in "$T/out" "$T/out2"; do
	[ ! -s "$f" ] || fail "rmad wrote to stdout: $(cat "$f")"
done
grep -v '^[0-9]\{2\}:[0-9]\{2\}:[0-9]\{2\}\.[0-9]\{3\} rmad [a-z]*: ' "$T/err" "$T/err2" &&
	fail "lines not in rmad's format"
echo ok

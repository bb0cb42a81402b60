#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rmactl top against real daemons with traffic (rmactl bench in a loop):
# on a terminal (a pty from script(1)) it clears and redraws, shows the
# peer with nonzero ops/s, quits on q and on SIGINT; --json gives one
# parsed object per refresh; --count ends it; usage and exit codes.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}" "${RMACTL_BIN:?}"
command -v script >/dev/null || skip "no script(1) for a pty"
ctl() { "$RMACTL_BIN" --socket "$T/b.sock" "$@"; }

rc=0
ctl top --count 0 2>/dev/null || rc=$?
[ "$rc" -eq 64 ] || fail "top --count 0 exited $rc"
rc=0
ctl top --interval soon 2>/dev/null || rc=$?
[ "$rc" -eq 64 ] || fail "top --interval soon exited $rc"
rc=0
ctl top --count 1 2>"$T/err" || rc=$?
[ "$rc" -eq 69 ] || fail "top without a daemon exited $rc"
"$RMACTL_BIN" top --help | grep -q '^usage: rmactl .*top' || fail "top --help"

start_daemon a
start_daemon b
"$RMACTL_BIN" --socket "$T/a.sock" expose --size 1M --descriptor-out "$T/desc" &
PIDS+=($!)
wait_until 10 test -s "$T/desc" || fail "no descriptor"

# Traffic from b to a for as long as the test runs.
(
	while ctl bench --peer "127.0.0.1:$a_PORT" --descriptor "$T/desc" \
		--op put --size 4K --count 20000 >/dev/null 2>"$T/bench.err"; do
		:
	done
) &
PIDS+=($!)
wait_until 20 sh -c "'$RMACTL_BIN' --socket '$T/b.sock' peers | grep -q ' up '" ||
	fail "bench did not bring the peer up: $(cat "$T/bench.err")"

# On a terminal: three refreshes, each clearing the screen, then exit 0.
rc=0
timeout 30 script -qec "'$RMACTL_BIN' --socket '$T/b.sock' top --interval 0.3 --count 3" \
	/dev/null >"$T/screen" </dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "top --count 3 on a pty exited $rc: $(cat -v "$T/screen")"
[ "$(grep -o $'\033\\[2J' "$T/screen" | wc -l)" -eq 3 ] ||
	fail "want 3 redraws: $(cat -v "$T/screen")"
tr -d '\r' <"$T/screen" >"$T/screen.txt"
grep -Eq "^ +[0-9]+  127\\.0\\.0\\.1:$a_PORT +up +out +[1-9][0-9.]*k? " "$T/screen.txt" ||
	fail "no peer with nonzero ops/s: $(cat -v "$T/screen")"
grep -Eq '^ops/s [1-9][0-9.]*k? ' "$T/screen.txt" || fail "no total ops/s: $(cat -v "$T/screen")"

# --json: one object per refresh
timeout 30 "$RMACTL_BIN" --socket "$T/b.sock" top --json --interval 0.3 --count 2 \
	>"$T/top.json" || fail "top --json"
[ "$(wc -l <"$T/top.json")" -eq 2 ] || fail "want 2 lines: $(cat "$T/top.json")"
json_ok "$T/top.json"
if command -v python3 >/dev/null 2>&1; then
	python3 - "$T/top.json" "127.0.0.1:$a_PORT" <<'PY' || fail "top --json: $(cat "$T/top.json")"
import json, sys
busy_client = False
for line in open(sys.argv[1]):
    j = json.loads(line)
    assert j["ops_per_s"] > 0 and j["bytes_per_s"] > 0, j
    assert isinstance(j["in_flight"], str)
    p = [p for p in j["peers"] if p["address"] == sys.argv[2]]
    assert p and p[0]["state"] == "up" and p[0]["ops_per_s"] > 0, j["peers"]
    # A bench client lives for a moment: its rate shows only in a
    # refresh it spans from end to end.
    busy_client |= any(c["ops_per_s"] > 0 for c in j["clients"])
    # the daemon's latency histogram: puts were completed meanwhile
    lat = {l["kind"]: l for l in j["latency"]}
    assert "put" in lat and lat["put"]["p50_us"] > 0 and \
        lat["put"]["p99_us"] >= lat["put"]["p50_us"], j["latency"]
assert busy_client, "no client with ops/s > 0 in any refresh"
PY
else
	grep -q "\"address\": \"127.0.0.1:$a_PORT\", \"state\": \"up\"" "$T/top.json" ||
		fail "top --json peer: $(cat "$T/top.json")"
fi

# q on the terminal quits (keys reach the pty through script's stdin).
mkfifo "$T/keys"
exec 7<>"$T/keys"
script -qec "'$RMACTL_BIN' --socket '$T/b.sock' top --interval 0.2" /dev/null \
	<"$T/keys" >"$T/q.screen" &
Q=$!
PIDS+=("$Q")
wait_until 20 grep -q 'q quits' "$T/q.screen" || fail "top did not draw: $(cat -v "$T/q.screen")"
printf q >&7
wait_until 10 sh -c "! kill -0 $Q 2>/dev/null" || fail "top did not quit on q"
rc=0
wait "$Q" || rc=$?
[ "$rc" -eq 0 ] || fail "top quit on q with $rc"
exec 7>&-

# SIGINT ends it with 0 too, after a complete line.
"$RMACTL_BIN" --socket "$T/b.sock" top --json --interval 0.2 >"$T/int.json" &
I=$!
PIDS+=("$I")
wait_until 20 test -s "$T/int.json" || fail "top --json printed nothing"
kill -INT "$I"
rc=0
wait "$I" || rc=$?
[ "$rc" -eq 0 ] || fail "top exited $rc on SIGINT"
json_ok "$T/int.json"
echo ok

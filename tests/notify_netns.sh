#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Notifications between two hosts for real: one network namespace each,
# joined by a veth pair whose both ends live in them (the host's own
# networking is never touched), one rmad per host. The owner (`rmactl
# expose --notifications`) is on host 1; the initiator (`rmactl put
# --notify`, `rmactl bench --op put-notify`) on host 2. Checks that the
# lines arrive in order with the right fields and that the bytes are there;
# then the owner is killed in the middle of a stream of notifying puts:
# the stream ends with a clear error (the region went with its owner,
# rma.h: rma_put_notify), no put hangs, and both daemons still serve.
# Root only; exit 77 (skip) otherwise. Every rmactl runs under
# `timeout 30`; every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
PORT=13338
SKIP_MSG="notify-netns: skipped: needs root and network namespaces"

. "$(dirname "$0")/netns_lib.sh"
netns_require

SUF=$(netns_suffix)
NS=("" rmadt-notify1-$SUF rmadt-notify2-$SUF)
T=$(mktemp -d /tmp/rmad-notify-netns.XXXXXX)
PIDS=()

cleanup() {
	[ ${#PIDS[@]} -eq 0 ] || kill_wait "${PIDS[@]}"
	netns_del_all
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP

fail() {
	echo "notify-netns: FAIL: $*" >&2
	netns_show_logs "$T"/*.log "$T"/*.err
	exit 1
}

# ---- the network ----------------------------------------------------------

netns_add "${NS[1]}"
netns_add "${NS[2]}"
netns_cable "${NS[1]}" "${NS[2]}" 10.232.0

# ---- daemons --------------------------------------------------------------

addr() { echo "10.232.0.$1:$PORT"; }
sock() { echo "$T/h$1.sock"; }
ctl() { # host, rmactl arguments (rmactl itself runs in the root namespace:
	# the Unix socket is a path)
	local h=$1; shift
	timeout 30 "$RMACTL" --socket "$(sock "$h")" "$@"
}

for h in 1 2; do
	mkfifo "$T/h$h.ready"
	ip netns exec "${NS[$h]}" "$RMAD" --listen "$(addr "$h")" \
		--socket "$(sock "$h")" --ready-fd 3 --log-level warn \
		--connect-timeout 2 --peer-allow 10.232.0.0/24 3>"$T/h$h.ready" 2>>"$T/h$h.log" &
	PIDS+=($!)
	timeout 10 head -c 6 "$T/h$h.ready" 2>/dev/null | grep -q ready ||
		fail "rmad on host $h not ready"
done
ID2=$(ctl 2 status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon_id"])') ||
	fail "no daemon id from host 2"
[ -n "$ID2" ] || fail "empty daemon id from host 2"

start_owner() { # name: expose on host 1, its lines in $T/name.lines
	rm -f "$T/$1.desc"
	"$RMACTL" --socket "$(sock 1)" expose --size 1M --notifications \
		--descriptor-out "$T/$1.desc" >"$T/$1.lines" 2>"$T/$1.err" &
	OWNER=$!
	PIDS+=($OWNER)
	wait_until 10 test -s "$T/$1.desc" || fail "expose on host 1 gave no descriptor"
}

nlines() { wc -l <"$1" | tr -d ' '; }
has_lines() { [ "$(nlines "$1")" -ge "$2" ]; }

# ---- ordered lines with their fields --------------------------------------

start_owner order
N=20
for i in $(seq 1 $N); do
	# a distinct length, offset and value for each
	head -c $((i * 7)) /dev/urandom >"$T/data.$i"
	ctl 2 put --peer "$(addr 1)" --descriptor "$T/order.desc" \
		--offset $((i * 1000)) --notify $((i * 1000003)) "$T/data.$i" \
		2>>"$T/put.err" || fail "put --notify $i from host 2 failed"
done
wait_until 20 has_lines "$T/order.lines" $N ||
	fail "$(nlines "$T/order.lines") of $N notification lines arrived"
i=0
while read -r off len val id rest; do
	i=$((i + 1))
	[ "$off $len $val" = "$((i * 1000)) $((i * 7)) $((i * 1000003))" ] ||
		fail "line $i is \"$off $len $val\": expected $((i * 1000)) $((i * 7)) $((i * 1000003))"
	[ "$id" = "$ID2" ] || fail "line $i names daemon \"$id\", not host 2's $ID2"
	[ -z "$rest" ] || fail "line $i has more fields than documented: $rest"
done <"$T/order.lines"
[ "$i" -eq $N ] || fail "$i lines, expected $N"
# the bytes were in the region when each line came: read them back
for i in 1 7 $N; do
	ctl 2 get --peer "$(addr 1)" --descriptor "$T/order.desc" \
		--offset $((i * 1000)) --length $((i * 7)) --out "$T/back.$i" \
		2>>"$T/put.err" || fail "get $i from host 2 failed"
	cmp -s "$T/data.$i" "$T/back.$i" || fail "bytes of put $i not in the region"
done

# A stream: bench's values are its operation numbers, in issue order.
ctl 2 bench --peer "$(addr 1)" --descriptor "$T/order.desc" --op put-notify \
	--size 8 --count 2000 --warmup 0 --window 16 --json >"$T/bench.json" 2>"$T/bench.err" ||
	fail "bench --op put-notify from host 2 failed"
M=$((N + 2000))
wait_until 20 has_lines "$T/order.lines" $M ||
	fail "$(nlines "$T/order.lines") of $M notification lines arrived"
tail -n +$((N + 1)) "$T/order.lines" | awk -v id="$ID2" '
	$2 != 8 || $4 != id { print "bad line " NR ": " $0; bad = 1; exit }
	NR > 1 && $3 <= prev { print "value " $3 " after " prev; bad = 1; exit }
	{ prev = $3 }
	END { exit bad }' >"$T/stream.err" || fail "stream: $(cat "$T/stream.err")"
kill -TERM "$OWNER"
wait "$OWNER" 2>/dev/null || true

# ---- an owner that dies in the middle of a stream -------------------------

start_owner die
ctl 2 bench --peer "$(addr 1)" --descriptor "$T/die.desc" --op put-notify \
	--size 8 --count 100000000 --window 16 --timeout 20 \
	>"$T/die-bench.out" 2>"$T/die-bench.err" &
BENCH=$!
PIDS+=($BENCH)
wait_until 20 has_lines "$T/die.lines" 100 || fail "no notifications before the kill"
kill -KILL "$OWNER"
wait "$OWNER" 2>/dev/null || true
rc=0
wait "$BENCH" || rc=$?
# rma.h: the region went with its owner, so the puts after it fail with
# RMA_ERR_STALE_DESCRIPTOR (rmactl: EX_DATAERR, 65), or RMA_ERR_NO_REGION
# while it goes; never a hang (timeout's 124) or success.
case $rc in
65) ;;
*) fail "bench after the owner died: exit $rc: $(tail -1 "$T/die-bench.err")" ;;
esac
grep -q -i -E 'stale|no such region|no region|freed' "$T/die-bench.err" ||
	fail "the error does not say the region went: $(tail -1 "$T/die-bench.err")"
echo "notify-netns: owner killed after $(nlines "$T/die.lines") lines; the stream ended: $(tail -1 "$T/die-bench.err")"
# a put alone now: the same clear error, nothing written anywhere
echo hi >"$T/hi"
rc=0
ctl 2 put --peer "$(addr 1)" --descriptor "$T/die.desc" --notify 1 "$T/hi" \
	2>"$T/late.err" || rc=$?
[ "$rc" -eq 65 ] || fail "a put to the dead owner's region: exit $rc: $(cat "$T/late.err")"

# both daemons still serve: a new owner gets its notification
start_owner after
ctl 2 put --peer "$(addr 1)" --descriptor "$T/after.desc" --notify 42 "$T/hi" \
	2>>"$T/put.err" || fail "put to a new owner failed"
wait_until 10 has_lines "$T/after.lines" 1 || fail "the new owner got nothing"
read -r off len val id <"$T/after.lines"
[ "$off $len $val $id" = "0 3 42 $ID2" ] || fail "new owner's line: $off $len $val $id"
echo "notify-netns: ok"

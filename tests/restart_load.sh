#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 17: restart without losing anything, under load, between two hosts.
# Two network namespaces joined by a veth pair (10.234.0.1 and .2), rmad A
# and rmad B, one in each; tests/restart_load.c runs RESTART_LOAD_CLIENTS
# (3) clients on each host, each putting and getting back, without pause,
# its own slots of the other host's regions. While they run, B is taken
# over (rmad --take-over, a new process) RESTART_LOAD_ROUNDS times (3),
# then A as often, then B twice back to back; after each, every client
# must complete operations again. Then: every slot of every region holds its writer's last
# completed put (in the owner's mapping, through fresh imports of the
# same descriptor files, and through rmactl with those files), every
# operation either completed or failed with a retriable status and then
# completed on retry (both counted; anything else fails the test), each
# daemon kept its identity and counts its restarts, no region is orphaned.
# Root only; exit 77 (skip) otherwise. Every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
LOAD=${RESTART_LOAD_BIN:?}
ROUNDS=${RESTART_LOAD_ROUNDS:-3}
CLIENTS=${RESTART_LOAD_CLIENTS:-3}
PORT=13337
NET=10.234.0
SKIP_MSG="restart_load: skipped: needs root and network namespaces"
START=$SECONDS

. "$(dirname "$0")/netns_lib.sh"
netns_require

SUF=$(netns_suffix)
NS=("" "rload-a-$SUF" "rload-b-$SUF")
NAME=("" A B)
T=$(mktemp -d /tmp/rmad-rload.XXXXXX)
declare -A DPID # host -> rmad pid
LOAD_PID=""

cleanup() {
	local pids=()
	[ -z "$LOAD_PID" ] || pids+=("$LOAD_PID")
	for p in "${DPID[@]}"; do pids+=("$p"); done
	[ ${#pids[@]} -eq 0 ] || kill_wait "${pids[@]}"
	netns_del_all
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP

fail() {
	echo "restart_load: FAIL: $*" >&2
	[ ! -e "$T/progress" ] || echo "progress: $(cat "$T/progress")" >&2
	netns_show_logs "$T"/h*.log "$T"/load.out
	exit 1
}

# ---- the network: two hosts, one cable ----------------------------------

netns_add "${NS[1]}"
netns_add "${NS[2]}"
netns_cable "${NS[1]}" "${NS[2]}" "$NET"

# ---- daemons ------------------------------------------------------------

addr() { echo "$NET.$1:$PORT"; }
sock() { echo "$T/h$1.sock"; }

# Starts rmad on host h (extra flags after it) and waits for "ready"; the
# pid goes to NEW_PID. A take-over is ready only once its predecessor is
# gone.
spawn_daemon() {
	local h=$1 fifo="$T/h$1.ready.$RANDOM"; shift
	mkfifo "$fifo"
	ip netns exec "${NS[$h]}" "$RMAD" --listen "$(addr "$h")" \
		--socket "$(sock "$h")" --ready-fd 3 --log-level ${RESTART_LOAD_LOG:-warn} \
		--connect-timeout 2 --peer-allow "$NET.0/24" "$@" \
		3>"$fifo" 2>>"$T/h$h.log" &
	NEW_PID=$!
	if ! timeout 15 head -c 6 "$fifo" 2>/dev/null | grep -q ready; then
		rm -f "$fifo"
		return 1
	fi
	rm -f "$fifo"
}

gone() { ! alive "$1"; }

# Reaps a child once it is gone (deadline 10 s); its exit status goes to
# RC. (Not in $(...): only this shell can wait for its children.)
reap() { # pid
	RC=0
	wait_until 10 gone "$1" || return 1
	wait "$1" 2>/dev/null || RC=$?
}

# The load's DIR/progress: "MARK MIN TOTAL ...", MIN the fewest
# operations any client completed since it read MARK from DIR/mark.
MARK=0
progress_since() { # mark, count
	local m n _
	read -r m n _ 2>/dev/null <"$T/progress" || return 1
	[ "$m" = "$1" ] && [ "$n" -ge "$2" ]
}
set_mark() {
	MARK=$((MARK + 1))
	echo "$MARK" >"$T/mark.tmp"
	mv "$T/mark.tmp" "$T/mark"
}

take_over() { # host
	local h=$1 old=${DPID[$1]} t0=$EPOCHREALTIME t1
	spawn_daemon "$h" --take-over ||
		fail "rmad --take-over on host ${NAME[$h]} not ready within 15 s"
	DPID[$h]=$NEW_PID
	reap "$old" || fail "old rmad on host ${NAME[$h]} did not exit"
	[ "$RC" -eq 0 ] || fail "old rmad on host ${NAME[$h]} exited $RC after the hand-over"
	t1=$EPOCHREALTIME
	# every client, A's and B's, completes operations again (on the new
	# process: the old one is gone)
	set_mark
	wait_until 20 progress_since "$MARK" 100 ||
		fail "the clients did not all get going again after taking over ${NAME[$h]}"
	alive "$LOAD_PID" || fail "the load ended during the take-over of ${NAME[$h]}"
	echo "restart_load: ${NAME[$h]} taken over (successor ready in" \
		"$(((${t1/./} - ${t0/./}) / 1000)) ms), every client going again"
}

for h in 1 2; do
	spawn_daemon "$h" || fail "rmad on host ${NAME[$h]} not ready"
	DPID[$h]=$NEW_PID
done
ID_A=$(timeout 20 "$RMACTL" --socket "$(sock 1)" status | sed -n 's/^daemon *\([^ ]*\) .*/\1/p')
ID_B=$(timeout 20 "$RMACTL" --socket "$(sock 2)" status | sed -n 's/^daemon *\([^ ]*\) .*/\1/p')

# ---- the load, and the take-overs ----------------------------------------

"$LOAD" "$T" "$(sock 1)" "$(addr 1)" "$(sock 2)" "$(addr 2)" "$CLIENTS" 75 \
	>"$T/load.out" 2>&1 &
LOAD_PID=$!
set_mark
wait_until 20 progress_since "$MARK" 100 || fail "the load did not start"

for h in 2 1; do # B (the target of A's clients) first, then A
	for r in $(seq "$ROUNDS"); do take_over "$h"; done
done
# Then B twice back to back: the second comes while B's clients may
# still be re-attaching to the first successor.
old=${DPID[2]}
spawn_daemon 2 --take-over || fail "rmad --take-over on host B not ready within 15 s"
DPID[2]=$NEW_PID
reap "$old" || fail "old rmad on host B did not exit"
take_over 2

kill -USR1 "$LOAD_PID"
wait_until 30 test -e "$T/verified" ||
	{ alive "$LOAD_PID" || wait "$LOAD_PID" || true; fail "the load's checks did not finish"; }

# ---- the same descriptor files, through rmactl ----------------------------

for h in 1 2; do
	o=$((3 - h))
	for ((i = 0; i < CLIENTS; i++)); do
		hn=$(tr AB ab <<<"${NAME[$h]}")
		len=$(stat -c %s "$T/expect.$hn.$i")
		timeout 20 "$RMACTL" --socket "$(sock "$o")" get --peer "$(addr "$h")" \
			--descriptor "$T/desc.$hn.$i" --length "$len" \
			--out "$T/got.$hn.$i" || fail "rmactl get of region ${NAME[$h]}$i"
		cmp -s "$T/expect.$hn.$i" "$T/got.$hn.$i" ||
			fail "region ${NAME[$h]}$i read through rmactl differs"
	done
done
echo "restart_load: all $((2 * CLIENTS)) descriptor files read through rmactl: same bytes"

# Same identity, the restarts counted, every region re-attached.
for h in 1 2; do
	timeout 20 "$RMACTL" --socket "$(sock "$h")" status >"$T/status$h" ||
		fail "rmactl status on ${NAME[$h]}"
	id=$(sed -n 's/^daemon *\([^ ]*\) .*/\1/p' "$T/status$h")
	want=$ID_A restarts=$ROUNDS
	[ "$h" -eq 1 ] || want=$ID_B restarts=$((ROUNDS + 2))
	[ -n "$id" ] && [ "$id" = "$want" ] || fail "${NAME[$h]}'s identity changed: $want -> $id"
	grep -q "^restarts *$restarts kept .*orphans now 0)" "$T/status$h" ||
		fail "${NAME[$h]}: $(grep '^restarts' "$T/status$h")"
done

kill -USR2 "$LOAD_PID"
reap "$LOAD_PID" || fail "the load did not exit"
LOAD_PID=""
cat "$T/load.out"
[ "$RC" -eq 0 ] || fail "the load found errors (exit $RC)"
grep -q "restart_load: .* 0 other errors; 0 wrong gets; 0 of [1-9][0-9]* slots wrong" \
	"$T/load.out" || fail "the load's summary is missing"

for h in 1 2; do
	kill -TERM "${DPID[$h]}"
	reap "${DPID[$h]}" || fail "rmad ${NAME[$h]} did not exit on SIGTERM"
	unset "DPID[$h]"
	[ "$RC" -eq 0 ] || fail "rmad ${NAME[$h]} exited $RC on SIGTERM"
done
echo "restart_load: $ROUNDS take-overs of B, then of A, then 2 of B back to back, under load: nothing lost" \
	"($((SECONDS - START)) s)"

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 11: a put that failed must never land after a later put to the same
# bytes completed. Two hosts (network namespaces behind a bridge in a third
# one), rmad on each with --op-timeout 3, host 2 exposes a region, host 1
# puts into it with rmactl. In every run:
#   - host 1 puts 4 KiB (the daemons connect);
#   - host 2's port on the bridge goes down;
#   - host 1 puts 64 KiB of 'A' at offset 0: it must fail (its data sits
#     queued in host 1's kernel, on the old TCP connection);
#   - 5 s after the link went down it comes back (the scenario's own timing);
#   - host 1 puts 64 KiB of 'B' at offset 0, retried until it completes;
#   - for 6 s the bytes are read (on host 2 and from host 1): once B has
#     completed, no read may ever show an 'A' again.
# Variants: (a) the link comes back alone; (b) host 1's daemon is SIGKILLed
# while A is queued in its kernel and started again after the link is up;
# (c) host 2's daemon is SIGKILLed while the link is down and started again:
# a put with the old descriptor must fail as stale and land nowhere, and the
# new region must never see A; (d) as (a), but host 1's daemon runs two
# workers, A goes through worker 1 and B through worker 0 (each worker has
# its own connection to host 2, so a newer connection of one must retire
# the other's dead one too); (e) as (d), but host 1's daemon is taken over
# (rmad --take-over) while A is queued in its kernel: the old process gives
# A up as it exits, and the new one's first connection (worker 0's, for B)
# must close at host 2 the old process's connections of every worker, whose
# epochs all lie below the new process's first. (a) and (b) run
# $PARTITION_RUNS times (3), (c), (d) and (e) once (PARTITION_VARIANTS picks
# some); every run prints what happened, the verdict comes at the end.
# Root only; exit 77 (skip) otherwise. Every rmactl runs under `timeout 20`;
# every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
RUNS=${PARTITION_RUNS:-3}
VARIANTS=${PARTITION_VARIANTS:-a b c d e} # a subset, for a quick look
PORT=13337
NET=10.232.0
OP_TIMEOUT=3
DOWN_S=${PARTITION_DOWN_S:-5} # the link stays down this long (s)
OBSERVE_S=6  # reads after B completed, for a late retransmission of A
PUT_B_S=20   # deadline for B (or the old-descriptor put) to complete
SKIP_MSG="partition: skipped: needs root, network namespaces and ss"

. "$(dirname "$0")/netns_lib.sh"
netns_require ss
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "partition: bad PARTITION_RUNS" >&2; exit 1; }

PFX=rpart-$$
T=$(mktemp -d /tmp/rmad-partition.XXXXXX)
declare -A DPID # host -> rmad pid
declare -A XPID # host -> rmactl expose pid
declare -A DFLAGS # host -> extra rmad flags of this run
BR="" H=()
RUN_DIR=""

net_down() {
	local ns pids=()
	for p in "${DPID[@]}" "${XPID[@]}"; do pids+=("$p"); done
	[ ${#pids[@]} -eq 0 ] || kill_wait "${pids[@]}"
	DPID=() XPID=()
	netns_del_all
}

cleanup() {
	net_down
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP

fail() {
	echo "partition: FAIL: $*" >&2
	if [ -n "$RUN_DIR" ]; then
		netns_show_logs "$RUN_DIR"/h*.log
	fi
	exit 1
}

now_ms() { local t=$EPOCHREALTIME; echo $((${t/./} / 1000)); }

# ---- the network: fresh namespaces for every run --------------------------
# (a run leaves orphaned TCP sockets behind in host 1's kernel: deleting the
# namespaces is what ends them)

net_up() { # run name
	BR=$PFX-$1-br
	H=("" "$PFX-$1-h1" "$PFX-$1-h2")
	netns_bridge "$BR" "$NET" "${H[1]}" "${H[2]}"
}

# Host 2's port on the bridge: down cuts host 2 off (host 1's own link
# stays up, as with a switch port or a cable on the far side).
host2_link() { # up|down
	ip -n "$BR" link set veth2 "$1"
	if [ "$1" = up ]; then
		wait_until 10 netns_link_up "${H[2]}" eth0 || fail "eth0 of host 2 not back up"
		wait_until 10 netns_link_up "$BR" veth2 || fail "veth2 not back up"
	else
		wait_until 10 eval '! netns_link_up "${H[2]}" eth0' || fail "eth0 of host 2 still up"
	fi
}

# TCP sockets of host 1 towards host 2 as STATE:SEND-Q, and the largest
# Send-Q: the data a dead connection may still deliver.
h1_sockets() {
	ip netns exec "${H[1]}" ss -tnH dst "$NET.2" 2>/dev/null |
		awk '{ printf "%s%s:%s", n++ ? " " : "", $1, $3 } END { if (!n) printf "none" }'
}
h1_max_sendq() {
	ip netns exec "${H[1]}" ss -tnH dst "$NET.2" 2>/dev/null |
		awk 'BEGIN { m = 0 } $3 > m { m = $3 } END { print m }'
}

# Host 1's closed sockets that host 2 sent data to: Linux answers with a
# reset and drops what was still queued (TcpExtTCPAbortOnData), which is
# what decides whether a queued A can still arrive.
h1_aborts() {
	ip netns exec "${H[1]}" nstat -asz TcpExtTCPAbortOnData 2>/dev/null |
		awk '$1 == "TcpExtTCPAbortOnData" { print $2; n = 1 } END { if (!n) print "?" }'
}

# ---- daemons, regions, rmactl ---------------------------------------------

addr() { echo "$NET.$1:$PORT"; }
sock() { echo "$RUN_DIR/h$1.sock"; }

start_daemon() { # host
	local h=$1
	# DFLAGS: words, split on purpose
	# shellcheck disable=SC2086
	netns_start_rmad "$RUN_DIR" "$h" "${H[$h]}" "$(addr "$h")" "$(sock "$h")" \
		--log-level info --connect-timeout 2 --op-timeout "$OP_TIMEOUT" \
		--peer-allow "$NET.0/24" ${DFLAGS[$h]:-}
}

kill_daemon() { # host: SIGKILL, and reap it
	local h=$1 pid=${DPID[$1]} deadline=$((SECONDS + 10))
	kill -KILL "$pid"
	while alive "$pid" && [ $SECONDS -lt $deadline ]; do
		sleep 0.05 # poll interval; bounded by the deadline above
	done
	alive "$pid" && fail "rmad on host $h survived SIGKILL"
	{ wait "$pid"; } 2>/dev/null || true
	unset "DPID[$h]"
}

expose() { # host, descriptor file: the rmactl stays, holding the region
	rm -f "$2"
	"$RMACTL" --socket "$(sock "$1")" expose --size 1M --descriptor-out "$2" \
		2>>"$RUN_DIR/h$1.log" &
	XPID[$1]=$!
	wait_until 10 test -s "$2" || fail "no descriptor from host $1"
}

# rmactl on a host, under a deadline: a hang is a failure, never a wait.
# Sets RC (exit code) and ERR (its one error line).
rmactl() { # host, then the command
	local h=$1
	shift
	RC=0
	timeout 20 "$RMACTL" --socket "$(sock "$h")" "$@" 2>"$RUN_DIR/err" || RC=$?
	ERR=$(tr '\n' ' ' <"$RUN_DIR/err")
	[ "$RC" -ne 124 ] || fail "rmactl on host $h hung (timeout 20 s): $*"
}

put() { # host, descriptor, file, offset
	rmactl "$1" put --peer "$(addr 2)" --descriptor "$2" --offset "$4" \
		--timeout 10 "$3"
}

# The next client of a host's daemon goes to worker W (of two): clients
# go to the workers in turn, and status counts the clients accepted,
# itself included, so another status call moves the turn by one.
pin_worker() { # host, worker
	local i n
	for i in 1 2 3; do
		n=$(timeout 20 "$RMACTL" --socket "$(sock "$1")" status --json |
			python3 -c 'import json, sys; print(json.load(sys.stdin)["counters"]["clients_accepted"])') ||
			fail "status of host $1 failed"
		[ $((n % 2)) -ne "$2" ] || return 0
	done
	fail "could not pin the next client of host $1 to worker $2"
}

# Puts until one completes or the deadline passes; sets TRIES. With
# PIN_B set, every try goes through that worker of host 1.
put_until_ok() { # host, descriptor, file, offset
	local deadline=$((SECONDS + PUT_B_S))
	TRIES=0
	while :; do
		TRIES=$((TRIES + 1))
		[ -z "${PIN_B:-}" ] || pin_worker "$1" "$PIN_B"
		put "$@"
		[ "$RC" -ne 0 ] || return 0
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2 # retry interval; bounded by the deadline above
	done
}

# rmad --take-over on host 1 (ready once the old process is gone, its
# drain given up on what it had in flight), and the old one reaped. The
# old pid stays in XPID until then, for net_down to kill on a failure.
take_over_1() {
	local old=${DPID[1]} flags=${DFLAGS[1]:-} rc=0
	XPID[old1]=$old
	DFLAGS[1]="$flags --take-over"
	NETNS_START_ONCE=1 start_daemon 1
	DFLAGS[1]=$flags
	wait_until 10 eval '! alive "$old"' || fail "the old rmad of host 1 did not exit after the take-over"
	wait "$old" 2>/dev/null || rc=$?
	unset "XPID[old1]"
	[ "$rc" -eq 0 ] || fail "the old rmad of host 1 exited $rc after the take-over"
}

# 64 KiB at offset 0 of host 2's region, read on host 2 (a local copy,
# independent of the network) or from host 1 (over the new connection).
# Sets RC, ERR and WHAT: B (all B), A (any A byte), or other.
read_back() { # reading host, descriptor
	rmactl "$1" get --peer "$(addr 2)" --descriptor "$2" --length 64K \
		--timeout 5 --out "$RUN_DIR/got"
	WHAT=""
	[ "$RC" -eq 0 ] || return 0
	if cmp -s "$RUN_DIR/got" "$T/B"; then
		WHAT=B
	elif [ "$(tr -dc A <"$RUN_DIR/got" | wc -c)" -gt 0 ]; then
		WHAT=A
	else
		WHAT=other
	fi
}

# Host 2's connections from host 1 that are up.
inbound_up() {
	timeout 20 "$RMACTL" --socket "$(sock 2)" status --json |
		python3 -c '
import json, sys
peers = json.load(sys.stdin).get("peers", [])
print(sum(1 for p in peers if p.get("inbound") and p.get("state") == "up"
          and p.get("listen_address") == sys.argv[1]))' "$(addr 1)" ||
		fail "status of host 2 failed"
}

# Reads for OBSERVE_S seconds after B completed. Sets OBS (a summary) and
# SEEN_A (0/1); any read that is neither B nor A is corruption: fail.
observe() { # descriptor on host 2, bytes B was put at (ms)
	local desc=$1 t_b=$2 end=$(($(now_ms) + OBSERVE_S * 1000)) n=0 errs=0
	local first_a="" h
	SEEN_A=0
	while [ "$(now_ms)" -lt $end ]; do
		for h in 2 1; do
			read_back "$h" "$desc"
			n=$((n + 1))
			if [ "$RC" -ne 0 ]; then
				errs=$((errs + 1))
				continue
			fi
			case $WHAT in
			A)
				SEEN_A=1
				[ -n "$first_a" ] || first_a="A first read $(($(now_ms) - t_b)) ms after B completed (via host $h)"
				;;
			other) fail "read via host $h is neither A nor B: corrupt bytes" ;;
			esac
		done
	done
	# The last word after the window, from host 1, must succeed.
	read_back 1 "$desc"
	[ "$RC" -eq 0 ] || fail "final get from host 1 failed: exit $RC: $ERR"
	[ "$WHAT" = B ] || SEEN_A=1
	OBS="$n reads over ${OBSERVE_S} s ($errs failed), final read $WHAT; "
	if [ $SEEN_A -eq 1 ]; then
		OBS+="STALE: ${first_a:-A in the final read}"
	else
		OBS+="never A"
	fi
}

# ---- one run ----------------------------------------------------------------

head -c 4096 /dev/zero | tr '\0' 'I' >"$T/I"
head -c 65536 /dev/zero | tr '\0' 'A' >"$T/A"
head -c 65536 /dev/zero | tr '\0' 'B' >"$T/B"
head -c 65536 /dev/zero | tr '\0' 'C' >"$T/C"

declare -A STALE_RUNS TOTAL_RUNS
FAILED=0

# Sleeps until DOWN_S after the link went down, then brings it up.
link_back() { # t_down (ms)
	local left=$(($1 + DOWN_S * 1000 - $(now_ms)))
	# the scenario's own timing, not a wait for readiness
	[ $left -le 0 ] || sleep "$((left / 1000)).$(printf %03d $((left % 1000)))"
	host2_link up
}

run() { # variant a|b|c, run number
	local v=$1 k=$2 t_down t0 a_rc a_err a_ms sendq socks b_ms extra=""
	RUN_DIR=$T/$v$k
	mkdir -p "$RUN_DIR"
	net_up "$v$k"
	DFLAGS=() PIN_B=""
	local two=0 # host 1 runs two workers
	[ "$v" != d ] && [ "$v" != e ] || two=1
	[ $two -eq 0 ] || DFLAGS[1]="--workers 2"
	start_daemon 1
	start_daemon 2
	expose 2 "$RUN_DIR/desc"
	[ $two -eq 0 ] || pin_worker 1 0
	put 1 "$RUN_DIR/desc" "$T/I" 128K
	[ "$RC" -eq 0 ] || fail "[$v$k] first put (link up) failed: exit $RC: $ERR"
	if [ $two -eq 1 ]; then # both workers connected; A goes through 1
		pin_worker 1 1
		put 1 "$RUN_DIR/desc" "$T/I" 132K
		[ "$RC" -eq 0 ] || fail "[$v$k] first put of worker 1 failed: exit $RC: $ERR"
		pin_worker 1 1
		PIN_B=0
	fi

	host2_link down
	t_down=$(now_ms)
	t0=$t_down
	case $v in
	a | c | d)
		put 1 "$RUN_DIR/desc" "$T/A" 0
		a_rc=$RC a_err=$ERR a_ms=$(($(now_ms) - t0))
		socks=$(h1_sockets)
		;;
	b | e)
		# A in flight; host 1's daemon dies (b) or is taken over (e)
		# once A is in its kernel.
		timeout 20 "$RMACTL" --socket "$(sock 1)" put --peer "$(addr 2)" \
			--descriptor "$RUN_DIR/desc" --offset 0 --timeout 10 "$T/A" \
			2>"$RUN_DIR/err.a" &
		local apid=$! deadline=$((SECONDS + 2))
		sendq=0
		while [ $SECONDS -le $deadline ]; do
			sendq=$(h1_max_sendq)
			[ "$sendq" -lt 65536 ] || break
			sleep 0.02 # poll interval; bounded by the deadline above
		done
		if [ "$v" = b ]; then
			extra="host 1 killed with send-q $sendq; "
			kill_daemon 1
		else
			extra="host 1 taken over with send-q $sendq; "
			take_over_1
		fi
		a_rc=0
		wait "$apid" || a_rc=$?
		a_err=$(tr '\n' ' ' <"$RUN_DIR/err.a") a_ms=$(($(now_ms) - t0))
		socks=$(h1_sockets)
		;;
	esac
	[ "$a_rc" -ne 0 ] || fail "[$v$k] put A completed while host 2 was cut off: the scenario did not happen"
	if [ "$v" = c ]; then
		kill -KILL "${XPID[2]}" 2>/dev/null || true
		{ wait "${XPID[2]}"; } 2>/dev/null || true
		unset "XPID[2]"
		kill_daemon 2
	fi
	link_back "$t_down"
	# (started after the link is up: UCX 1.13 leaves out a device without
	# carrier at start, and would refuse every connection on it)
	[ "$v" != b ] || start_daemon 1
	if [ "$v" = c ]; then
		start_daemon 2
		expose 2 "$RUN_DIR/desc.new"
	fi

	if [ "$v" = c ]; then
		# The old descriptor: stale, once host 1 reaches the new daemon.
		local deadline=$((SECONDS + PUT_B_S)) tries=0
		while :; do
			tries=$((tries + 1))
			put 1 "$RUN_DIR/desc" "$T/C" 0
			[ "$RC" -eq 68 ] || [ "$RC" -eq 75 ] || break
			[ $SECONDS -lt $deadline ] || break
			sleep 0.2 # retry interval; bounded by the deadline above
		done
		[ "$RC" -ne 0 ] || fail "[c$k] put with the old descriptor completed on the restarted daemon"
		[ "$RC" -eq 65 ] && [[ "$ERR" == *stale* ]] ||
			fail "[c$k] put with the old descriptor: exit $RC after $tries tries, want 65 (stale): $ERR"
		extra="old descriptor: exit $RC after $tries tries ($ERR); "
		RUN_DIR_DESC=$RUN_DIR/desc.new
	else
		RUN_DIR_DESC=$RUN_DIR/desc
	fi

	put_until_ok 1 "$RUN_DIR_DESC" "$T/B" 0 ||
		fail "[$v$k] put B never completed within $PUT_B_S s after the link came back: last exit $RC: $ERR"
	b_ms=$(now_ms)
	if [ $two -eq 1 ]; then
		# d: worker 1's failure retired worker 0's connection too, and
		# B's new one carried the mark; e: B's connection, the new
		# process's first, carried its floor. Either way host 2 closed
		# worker 1's dead connection before it served B, so B's is the
		# only one up (whether or not A's bytes ever come).
		local up
		up=$(inbound_up)
		[ "$up" -eq 1 ] ||
			fail "[$v$k] host 2 holds $up connections of host 1 up after B completed, want 1 (B's): worker 1's dead connection was not retired"
		extra+="host 2's connections of host 1 up after B: $up; "
	fi
	observe "$RUN_DIR_DESC" "$b_ms"
	if [ "$v" = c ]; then
		# nothing of C either: the old descriptor's put landed nowhere
		[ "$(tr -dc C <"$RUN_DIR/got" | wc -c)" -eq 0 ] ||
			fail "[c$k] the old descriptor's bytes are in the new region"
	fi
	echo "partition: [$v$k] put A: exit $a_rc after $a_ms ms ($a_err); ${extra}host 1 sockets to host 2 after A: $socks; put B completed after $TRIES tries, $((b_ms - t_down)) ms after the link went down; $OBS; host 1 sockets to host 2 at the end: $(h1_sockets), reset by data from host 2: $(h1_aborts)"
	TOTAL_RUNS[$v]=$((${TOTAL_RUNS[$v]:-0} + 1))
	if [ $SEEN_A -eq 1 ]; then
		STALE_RUNS[$v]=$((${STALE_RUNS[$v]:-0} + 1))
		FAILED=1
		for f in "$RUN_DIR"/h*.log; do
			grep -Ei 'warn|error' "$f" | tail -5 | sed "s|^|partition: [$v$k] ${f##*/}: |"
		done
	fi
	net_down
}

for v in $VARIANTS; do
	case $v in
	a | b) for k in $(seq 1 "$RUNS"); do run "$v" "$k"; done ;;
	c | d | e) run "$v" 1 ;;
	*) echo "partition: bad PARTITION_VARIANTS: $VARIANTS" >&2; exit 1 ;;
	esac
done

RUN_DIR=""
for v in "${!TOTAL_RUNS[@]}"; do
	echo "partition: variant $v: A read after B had completed in ${STALE_RUNS[$v]:-0} of ${TOTAL_RUNS[$v]} runs"
done
[ $FAILED -eq 0 ] || fail "a put that failed landed after a later put completed (issue 11)"
echo "partition: all checks passed"

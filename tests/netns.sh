#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Three hosts for real: one network namespace each, joined by a bridge that
# lives in a fourth namespace (the host's own networking is never touched),
# addresses 10.231.0.1-3/24, one rmad per host. rmactl (in the root
# namespace: the Unix sockets are paths) moves files all to all, then host
# 3's daemon is killed and restarted, then host 2's is restarted with a
# peer_allow that leaves host 1 out (host 2 can still connect out to host
# 1: UCX's tcp may then connect back to host 2's own sockets, and the
# guard in ucx_accept.c lets in a daemon host 2 connected to). Root only; exit 77 (skip) otherwise.
# Every rmactl runs under `timeout 20`; every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
PORT=13337
SKIP_MSG="netns: skipped: needs root and network namespaces"

. "$(dirname "$0")/netns_lib.sh"
netns_require

SUF=$(netns_suffix)
BR=rmadt-br-$SUF
NS=("" rmadt-h1-$SUF rmadt-h2-$SUF rmadt-h3-$SUF)
T=$(mktemp -d /tmp/rmad-netns.XXXXXX)
declare -A DPID  # host -> rmad pid
EXPOSE_PIDS=()

cleanup() {
	local pids=() p
	for p in "${DPID[@]}" "${EXPOSE_PIDS[@]}"; do pids+=("$p"); done
	[ ${#pids[@]} -eq 0 ] || kill_wait "${pids[@]}"
	netns_del_all
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP

fail() {
	echo "netns: FAIL: $*" >&2
	netns_show_logs "$T"/h*.log
	exit 1
}

# ---- the network ----------------------------------------------------------

netns_bridge "$BR" 10.231.0 "${NS[1]}" "${NS[2]}" "${NS[3]}"

# ---- daemons and regions --------------------------------------------------

addr() { echo "10.231.0.$1:$PORT"; }
sock() { echo "$T/h$1.sock"; }

start_daemon() { # host, then extra flags
	local h=$1
	shift
	netns_start_rmad "$T" "$h" "${NS[$h]}" "$(addr "$h")" "$(sock "$h")" \
		--log-level warn --connect-timeout 2 "$@"
}

stop_daemon() { # host, signal
	local h=$1 pid=${DPID[$1]} deadline=$((SECONDS + 10)) gone=0 rc=0
	kill "-$2" "$pid"
	# (bash reports a job killed by a signal on stderr: not news here)
	{
		while alive "$pid" && [ $SECONDS -lt $deadline ]; do
			sleep 0.05 # poll interval; bounded by the deadline above
		done
		alive "$pid" || gone=1
		[ $gone -eq 0 ] || wait "$pid" || rc=$?
	} 2>/dev/null
	[ $gone -eq 1 ] || fail "rmad on host $h did not exit"
	unset "DPID[$h]"
	# SIGTERM drains and exits 0
	[ "$2" != TERM ] || [ $rc -eq 0 ] || fail "rmad on host $h exit $rc on SIGTERM"
}

expose() { # host, descriptor file
	rm -f "$2"
	"$RMACTL" --socket "$(sock "$1")" expose --size 1M --descriptor-out "$2" \
		2>>"$T/h$1.log" &
	EXPOSE_PIDS+=($!)
	wait_until 10 test -s "$2" || fail "no descriptor from host $1"
}

# rmactl under a deadline: a hang is a failure, never a wait.
rmactl() { # host, then the command
	local h=$1 rc=0; shift
	timeout 20 "$RMACTL" --socket "$(sock "$h")" "$@" || rc=$?
	[ "$rc" -ne 124 ] || fail "rmactl on host $h hung (timeout 20 s): $*"
	return "$rc"
}

# Put a file into host j's region from host i, get it back, compare.
transfer() { # from, to, descriptor, offset, size
	local i=$1 j=$2 desc=$3 off=$4 size=$5 f="$T/data.$1.$2"
	head -c "$size" /dev/urandom >"$f"
	rmactl "$i" put --peer "$(addr "$j")" --descriptor "$desc" \
		--offset "$off" "$f" || fail "put $i -> $j"
	rmactl "$i" get --peer "$(addr "$j")" --descriptor "$desc" \
		--offset "$off" --length "$size" --out "$f.back" ||
		fail "get $i <- $j"
	cmp -s "$f" "$f.back" || fail "bytes differ $i -> $j"
}

# A failure is one line and one of the wanted exit codes, quickly.
expect_fail() { # wanted codes ("68 75"), host, then the command
	local want=$1 h=$2 rc=0 t0=$EPOCHREALTIME; shift 2
	rmactl "$h" "$@" >/dev/null 2>"$T/err" || rc=$?
	case " $want " in
	*" $rc "*) ;;
	*) fail "host $h: exit $rc, want one of $want: $* ($(cat "$T/err"))" ;;
	esac
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "want one error line: $(cat "$T/err")"
	echo "netns: host $h: exit $rc after $(elapsed_ms "$t0") ms: $(cat "$T/err")"
}

elapsed_ms() { # since an $EPOCHREALTIME
	local now=$EPOCHREALTIME
	echo $(((${now/./} - ${1/./}) / 1000))
}

for i in 1 2 3; do
	start_daemon "$i" --peer-allow 10.231.0.0/24
	expose "$i" "$T/desc$i"
done

# ---- all to all -----------------------------------------------------------

k=0
for i in 1 2 3; do
	for j in 1 2 3; do
		transfer "$i" "$j" "$T/desc$j" $((k * 110000 + 7)) $((50000 + 1111 * k))
		k=$((k + 1))
	done
done
echo "netns: all-to-all puts and gets between 3 namespaces: ok"

# ---- atomics and a read-only descriptor between hosts --------------------

# every host fetch-adds 1 to the last word of host 1's region (untouched
# by the transfers above; host 1
# through its own daemon), 5 times each: the old values are 0..14, each
# once, and the word ends at 15
: >"$T/olds"
for n in 1 2 3 4 5; do
	for i in 1 2 3; do
		rmactl "$i" atomic --peer "$(addr 1)" --descriptor "$T/desc1" \
			--offset 1048568 --op fetch-add --value 1 >>"$T/olds" ||
			fail "atomic $i -> 1"
	done
done
[ "$(sort -n "$T/olds" | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 " ] ||
	fail "fetch-add old values: $(tr '\n' ' ' <"$T/olds")"
[ "$(rmactl 2 atomic --peer "$(addr 1)" --descriptor "$T/desc1" --offset 1048568 \
	--op fetch-add --value 0)" = 15 ] || fail "counter is not 15"
rm -f "$T/ro2" "$T/full2"
"$RMACTL" --socket "$(sock 2)" expose --size 4K --descriptor-out "$T/full2" \
	--read-only-descriptor-out "$T/ro2" 2>>"$T/h2.log" &
EXPOSE_PIDS+=($!)
wait_until 10 test -s "$T/full2" || fail "no descriptors from host 2"
rmactl 1 get --peer "$(addr 2)" --descriptor "$T/ro2" --length 8 \
	--out "$T/ro.back" || fail "get through a read-only descriptor"
expect_fail 77 1 put --peer "$(addr 2)" --descriptor "$T/ro2" "$T/ro.back"
expect_fail 77 3 atomic --peer "$(addr 2)" --descriptor "$T/ro2" --offset 0 \
	--op swap --value 1
echo "netns: atomics and a read-only descriptor between namespaces: ok"

# ---- host 3 killed --------------------------------------------------------

stop_daemon 3 KILL
for i in 1 2; do
	expect_fail "68 75" "$i" put --peer "$(addr 3)" --descriptor "$T/desc3" \
		"$T/data.1.1"
done
transfer 1 2 "$T/desc2" 900000 4096
transfer 2 1 "$T/desc1" 900000 4096
rmactl 1 status --json >"$T/status1.json" || fail "status on host 1"
peer_state() { # json file, address
	if command -v python3 >/dev/null; then
		python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join(p.get("state", "") for p in j.get("peers", [])
               if p.get("address") == sys.argv[2] and not p.get("inbound")))
' "$1" "$2"
	else
		grep -A3 "\"address\": \"$2\"" "$1" | sed -n 's/.*"state": "\(.*\)".*/\1/p'
	fi
}
state=$(peer_state "$T/status1.json" "$(addr 3)")
case "$state" in
down) ;;
*) fail "host 1 shows peer $(addr 3) as '$state', want down" ;;
esac
echo "netns: host 3 killed: puts to it fail at once, 1<->2 fine, status says down"

# ---- host 3 back ----------------------------------------------------------

start_daemon 3 --peer-allow 10.231.0.0/24
expect_fail 65 1 put --peer "$(addr 3)" --descriptor "$T/desc3" "$T/data.1.1"
grep -q "stale" "$T/err" || fail "old descriptor of host 3: $(cat "$T/err")"
expose 3 "$T/desc3b"
transfer 1 3 "$T/desc3b" 0 70000
transfer 2 3 "$T/desc3b" 100000 70001
echo "netns: host 3 restarted: traffic from 1 and 2 resumes, old descriptor stale"

# ---- peer_allow -------------------------------------------------------------

stop_daemon 2 TERM
start_daemon 2 --peer-allow 10.231.0.3/32
expose 2 "$T/desc2b"
expect_fail 68 1 put --peer "$(addr 2)" --descriptor "$T/desc2b" "$T/data.1.1"
transfer 3 2 "$T/desc2b" 0 60000
transfer 2 1 "$T/desc1" 200000 50000
echo "netns: host 2 allows only host 3: host 1 refused, host 3 served, host 2 reaches host 1"
for i in 1 2 3; do stop_daemon "$i" TERM; done
echo "netns: all checks passed"

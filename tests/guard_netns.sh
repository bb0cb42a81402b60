#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 23, finding 2: a client's connect must not open UCX's sockets to
# the host it names. Three hosts on a bridge (network namespaces): rmad D
# on 10.234.0.3 with peer_allow 10.234.0.1/32; H1 (10.234.0.1, inside
# peer_allow) where nothing listens; H2 (10.234.0.2, outside) where a
# plain socket accepts and says nothing. (UCX's tcp connects from the
# lower interface address to the higher one, and the guard refuses the
# other direction outright: D has the highest address, so that what
# refuses here is the guard's entries for D's endpoints.) A client of D connects to each
# (rmactl wait --peer, which fails); once D shows that peer down, raw_uct
# (tests/adversary/raw_uct.c) sends from each host UCX 1.13's tcp
# framing to D's interface sockets: a put into D's exposed region, then
# the put to 0x10000 that kills a daemon that lets it in. Each connection
# must be closed at accept and counted (rmactl status, "ucx sockets"), D
# must live and the region keep its bytes. While D's connect to H2 is
# still waiting (connect_timeout 10 s), H2 may open at most 8 connections
# to D's interface sockets (GUARD_CONNS_PER_ENDPOINT, daemon/guard.h):
# of 12 that send nothing, D keeps 8 and refuses 4. Then an rmad on H1 and D put
# and get to each other (UCX's tcp connects between them in one direction
# or the other: the guard lets that in), and raw bytes from H1, whose
# endpoint is up and past its handshake, are still refused.
# Root only; exit 77 (skip) otherwise. Every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
RAW_UCT=${RAW_UCT:?}
PORT=13337
NET=10.234.0
SKIP_MSG="guard-netns: skipped: needs root, network namespaces, ss and python3"

. "$(dirname "$0")/netns_lib.sh"
netns_require ss python3

SUF=$(netns_suffix)
BR=rgd-br-$SUF D=rgd-d-$SUF H1=rgd-h1-$SUF H2=rgd-h2-$SUF
T=$(mktemp -d /tmp/rmad-guard.XXXXXX)
PIDS=()

cleanup() {
	[ ${#PIDS[@]} -eq 0 ] || kill_wait "${PIDS[@]}"
	netns_del_all
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP

fail() {
	echo "guard-netns: FAIL: $*" >&2
	netns_show_logs "$T"/*.log "$T"/raw.*
	exit 1
}

start_daemon() { # ns name address, then flags; sets DPID
	local ns=$1 name=$2 addr=$3
	shift 3
	mkfifo "$T/$name.ready"
	ip netns exec "$ns" "$RMAD" --listen "$addr:$PORT" --socket "$T/$name.sock" \
		--ready-fd 3 --log-level warn --connect-timeout 2 "$@" \
		3>"$T/$name.ready" 2>>"$T/$name.log" &
	DPID=$!
	PIDS+=($DPID)
	timeout 10 head -c 6 "$T/$name.ready" 2>/dev/null | grep -q ready ||
		fail "rmad $name not ready"
}

rmactl() { # name, then the command
	timeout 20 "$RMACTL" --socket "$T/$1.sock" "${@:2}"
}

refused() { rmactl d status 2>/dev/null | awk '/ucx sockets/ {print $3}'; }

peer_state() { # address: D's outbound peer's state
	rmactl d status --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(" ".join(p.get("state", "") for p in j.get("peers", [])
               if p.get("address") == sys.argv[1] and not p.get("inbound")))
' "$1"
}
peer_down() { [ "$(peer_state "$1")" = down ]; }
peer_connecting() { [ "$(peer_state "$1")" = connecting ]; }

# D's UCX tcp interface ports: its listening sockets but the listener.
iface_ports() {
	ip netns exec "$D" ss -ltnpH | awk -v pid="pid=$DPID," -v a="$DA:" \
		'index($0, pid) && index($4, a) == 1 {sub(".*:", "", $4); print $4}' |
		grep -vx "$PORT" | sort -u | paste -sd, -
}

victim_intact() {
	rmactl d get --peer "$DA:$PORT" --descriptor "$T/desc" --length 64K \
		--out "$T/victim" 2>>"$T/d.log" && cmp -s "$T/fill" "$T/victim"
}

# raw_uct from a host to D's interface sockets: every connection closed at
# accept, each counted, D alive, the region unchanged.
raw_from() { # ns label
	local ns=$1 label=$2 before after sent attack
	before=$(refused)
	: >"$T/raw.$label"
	for attack in put crash; do
		ip netns exec "$ns" timeout 30 "$RAW_UCT" --host "$DA" --bind any \
			--ports "$PORTS" --target "$TARGET" --attack "$attack" --count 3 \
			>>"$T/raw.$label" 2>&1 || fail "raw_uct from $label: exit $?"
	done
	alive "$DPID" || fail "D died after raw bytes from $label: $(tail -3 "$T/d.log")"
	grep -q ', [1-9][0-9]* kept' "$T/raw.$label" &&
		fail "D kept raw connections from $label: $(grep kept "$T/raw.$label" | tr '\n' ' ')"
	sent=$(awk '/connections closed at accept/ {n += $2} END {print n + 0}' "$T/raw.$label")
	after=$(refused)
	[ "$sent" -gt 0 ] && [ $((after - before)) -ge "$sent" ] ||
		fail "from $label: raw_uct saw $sent closed, D counts $((after - before))"
	victim_intact || fail "the victim region changed after raw bytes from $label"
	echo "guard-netns: raw bytes from $label: $sent connections refused at accept and counted"
}

# ---- the network, D, its victim -------------------------------------------

DA=$NET.3 H1A=$NET.1 H2A=$NET.2
netns_bridge "$BR" "$NET" "$H1" "$H2" "$D"
head -c 65536 /dev/urandom >"$T/fill"
start_daemon "$D" d "$DA" --peer-allow "$H1A/32" --connect-timeout 10
"$RMACTL" --socket "$T/d.sock" expose --size 1M --fill "$T/fill" \
	--descriptor-out "$T/desc" 2>>"$T/d.log" &
PIDS+=($!)
wait_until 10 test -s "$T/desc" || fail "no descriptor"
PORTS=$(iface_ports)
[ -n "$PORTS" ] || fail "no UCX interface sockets of D found"
TARGET=$(awk '/rmad-region/ {split($1, r, "-"); print "0x" r[1]; exit}' "/proc/$DPID/maps")
[ -n "$TARGET" ] || fail "D's region not in its maps"
victim_intact || fail "the victim region cannot be read"

# H2 accepts and says nothing, for as long as the test runs
ip netns exec "$H2" python3 -c '
import socket, sys
s = socket.socket(); s.bind(("'"$H2A"'", '"$PORT"')); s.listen(16)
print("listening", flush=True)
held = []
while True:
    held.append(s.accept()[0])
' >"$T/silent.log" 2>&1 &
PIDS+=($!)
wait_until 10 grep -q listening "$T/silent.log" || fail "no silent listener on H2"

# ---- the window of a connect still waiting: at most 8 connections ----------

rmactl d wait --timeout 8 --peer "$H2A:$PORT" >/dev/null 2>&1 &
WAITER=$!
PIDS+=($WAITER)
wait_until 10 peer_connecting "$H2A:$PORT" ||
	fail "D's peer $H2A:$PORT is '$(peer_state "$H2A:$PORT")', not connecting"
ip netns exec "$H2" timeout 60 "$RAW_UCT" --host "$DA" --bind any --ports "$PORTS" \
	--target "$TARGET" --attack idle --count 12 >"$T/raw.window" 2>&1 ||
	fail "raw_uct in the window: exit $?"
[ "$(peer_state "$H2A:$PORT")" = connecting ] ||
	fail "the connect to H2 ended before raw_uct did: the window was not measured"
line=$(grep -m1 'connections closed at accept' "$T/raw.window")
kept=$(awk '/connections closed at accept/ {print $7}' "$T/raw.window")
[ "$kept" = 8 ] || fail "in the window of one endpoint D kept $kept connections, want 8: $line"
echo "guard-netns: while D's connect to H2 waited: $line"
wait "$WAITER" 2>/dev/null || true

# ---- a client's connects, then raw bytes from those hosts ------------------

for h in "$H1A" "$H2A"; do
	rc=0
	rmactl d wait --timeout 1 --peer "$h:$PORT" >/dev/null 2>"$T/wait.$h" || rc=$?
	[ $rc -ne 0 ] || fail "D reached $h:$PORT"
	# the connect is over (refused, or connect_timeout) before bytes come
	wait_until 15 peer_down "$h:$PORT" ||
		fail "D's peer $h:$PORT is '$(peer_state "$h:$PORT")', not down"
done
raw_from "$H2" "H2 (outside peer_allow, silent listener)"
raw_from "$H1" "H1 (inside peer_allow, nothing listens)"

# ---- a real daemon on H1: traffic both ways, then raw bytes again ----------

start_daemon "$H1" h1 "$H1A" --peer-allow "$NET.0/24"
"$RMACTL" --socket "$T/h1.sock" expose --size 1M --descriptor-out "$T/desc1" 2>>"$T/h1.log" &
PIDS+=($!)
wait_until 10 test -s "$T/desc1" || fail "no descriptor on H1"
head -c 70000 /dev/urandom >"$T/data"
rmactl d put --peer "$H1A:$PORT" --descriptor "$T/desc1" "$T/data" || fail "put D -> H1"
rmactl d get --peer "$H1A:$PORT" --descriptor "$T/desc1" --length 70000 \
	--out "$T/data.back" && cmp -s "$T/data" "$T/data.back" || fail "get D <- H1"
rmactl h1 put --peer "$DA:$PORT" --descriptor "$T/desc" --offset 512K "$T/data" ||
	fail "put H1 -> D"
rmactl h1 get --peer "$DA:$PORT" --descriptor "$T/desc" --offset 512K --length 70000 \
	--out "$T/data.back2" && cmp -s "$T/data" "$T/data.back2" || fail "get H1 <- D"
echo "guard-netns: D and an rmad on H1 put and get both ways"
raw_from "$H1" "H1 (its endpoints up)"
echo "guard-netns: all checks passed"

# SPDX-License-Identifier: BSD-2-Clause
# What the tests with hosts in network namespaces share (sourced, not run):
# the skip check, waits with deadlines, stopping processes, namespaces and
# the cable between them. Nothing here touches the root namespace's
# networking: both ends of every veth are created inside namespaces.
#
# The sourcing script sets SKIP_MSG and defines fail(); it keeps the
# namespaces it made in CREATED and deletes them with netns_del_all.

CREATED=()

# Exit 77 (skip) unless root with `ip` and the other commands named.
netns_require() {
	local cmd
	[ "$(id -u)" -eq 0 ] || { echo "$SKIP_MSG"; exit 77; }
	for cmd in ip "$@"; do
		command -v "$cmd" >/dev/null || { echo "$SKIP_MSG"; exit 77; }
	done
}

# A random suffix for names: concurrent runs never share a namespace.
netns_suffix() { od -An -N4 -tx4 /dev/urandom | tr -d ' '; }

# Polls for a condition until a deadline (seconds).
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.02 # poll interval; bounded by the deadline above
	done
}

# A child that exited stays a zombie until reaped, and kill -0 still
# finds it: look at its state instead.
alive() {
	local st=""
	read -r _ _ st _ 2>/dev/null <"/proc/$1/stat" || return 1
	[ "$st" != Z ]
}

kill_wait() { # pids: TERM, a deadline, then KILL
	local p deadline
	for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
	deadline=$((SECONDS + 5))
	for p in "$@"; do
		while alive "$p" && [ $SECONDS -lt $deadline ]; do
			sleep 0.05 # poll interval; bounded by the deadline above
		done
		kill -KILL "$p" 2>/dev/null || true
		{ wait "$p"; } 2>/dev/null || true
	done
}

# netns_start_rmad DIR H NS LISTEN SOCKET [rmad flags]: rmad of host H in
# namespace NS, logging to DIR/hH.log, its pid in DPID[H] (the caller's
# array); retried for 10 s, as the port of a killed predecessor may linger.
# NETNS_START_ONCE=1: one try, ready within 30 s (a take-over, ready once
# its predecessor has drained and exited, cannot be tried twice).
netns_start_rmad() {
	local dir=$1 h=$2 ns=$3 listen=$4 sock=$5
	local deadline=$((SECONDS + 10)) n=0 ready_s=10
	[ -z "${NETNS_START_ONCE:-}" ] || ready_s=30
	shift 5
	while :; do
		n=$((n + 1))
		rm -f "$dir/h$h.ready"
		mkfifo "$dir/h$h.ready"
		ip netns exec "$ns" "$RMAD" --listen "$listen" --socket "$sock" \
			--ready-fd 3 "$@" 3>"$dir/h$h.ready" 2>>"$dir/h$h.log" &
		DPID[$h]=$!
		if timeout $ready_s head -c 6 "$dir/h$h.ready" 2>/dev/null | grep -q ready; then
			return 0
		fi
		kill -KILL "${DPID[$h]}" 2>/dev/null || true
		{ wait "${DPID[$h]}"; } 2>/dev/null || true
		unset "DPID[$h]"
		[ -z "${NETNS_START_ONCE:-}" ] || fail "rmad on host $h not ready within $ready_s s"
		[ $SECONDS -lt $deadline ] || fail "rmad on host $h not ready after $n tries"
		sleep 0.1 # retry interval; bounded by the deadline above
	done
}

netns_add() { # name: a namespace with its loopback up
	ip netns add "$1" 2>/dev/null || { echo "$SKIP_MSG"; exit 77; }
	CREATED+=("$1")
	ip -n "$1" link set lo up
}

netns_del_all() {
	local ns
	for ns in "${CREATED[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	CREATED=()
}

netns_link_up() { ip -n "$1" link show "${2:-eth0}" | grep -q 'state UP'; }

# Two namespaces joined by one cable: eth0 in each, addresses NET.1 and
# NET.2 (/24), up.
netns_cable() { # ns1 ns2 net
	local i ns=("" "$1" "$2")
	ip -n "$1" link add eth0 type veth peer name eth0 netns "$2"
	for i in 1 2; do
		ip -n "${ns[$i]}" addr add "$3.$i/24" dev eth0
		ip -n "${ns[$i]}" link set eth0 up
	done
	for i in 1 2; do
		wait_until 10 netns_link_up "${ns[$i]}" ||
			fail "eth0 of ${ns[$i]} not up"
	done
}

# Hosts on a bridge that lives in a namespace of its own: eth0 in each
# host (NET.i/24, i counting from 1), vethI on the bridge's side.
netns_bridge() { # bridge-ns net host-ns...
	local br=$1 net=$2 i=0 h
	shift 2
	netns_add "$br"
	ip -n "$br" link add br0 type bridge
	ip -n "$br" link set br0 up
	for h in "$@"; do
		i=$((i + 1))
		netns_add "$h"
		ip -n "$br" link add "veth$i" type veth peer name eth0 netns "$h"
		ip -n "$br" link set "veth$i" master br0 up
		ip -n "$h" addr add "$net.$i/24" dev eth0
		ip -n "$h" link set eth0 up
	done
	for h in "$@"; do
		wait_until 10 netns_link_up "$h" || fail "eth0 of $h not up"
	done
}

# The last lines of each non-empty file named, on stderr (for fail()).
netns_show_logs() {
	local f
	for f in "$@"; do
		[ -s "$f" ] && { echo "--- $f" >&2; tail -30 "$f" >&2; }
	done
	return 0
}

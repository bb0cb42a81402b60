#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 23: daemons of one host and different users. Each guard (guard.c)
# serves UCX's sockets from a local address only to a socket of its own
# uid or root's, and UCX's tcp opens a lane between two daemons in the
# direction their ports order: a root daemon and one of uid 65534 would
# connect about half the time. So neither tries: a connect either way
# fails at once, every time, with a message that says why. Two daemons of
# uid 65534 connect, and put and get to each other both ways. Root only
# (setpriv); exit 77 (skip) otherwise. Every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}

[ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null || {
	echo "guard-local: skipped: needs root and setpriv"
	exit 77
}
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
T=$(mktemp -d /tmp/rmad-guard-local.XXXXXX)
chmod 755 "$T"
PIDS=()

. "$(dirname "$0")/lib.sh"
trap 'lib_cleanup KILL' EXIT
trap "exit 1" TERM INT HUP

fail() {
	echo "guard-local: FAIL: $*" >&2
	tail -5 "$T"/*/*.log >&2 || true
	exit 1
}

# start_daemon NAME USER(root|nobody): its directory belongs to that user
start_daemon() {
	local name=$1 user=$2 port run=()
	port=$(free_port)
	mkdir "$T/$name"
	[ "$user" = root ] || { chown 65534:65534 "$T/$name"; run=("${NOBODY[@]}"); }
	mkfifo "$T/$name/ready"
	"${run[@]}" "$RMAD" --socket "$T/$name/s.sock" --listen "127.0.0.1:$port" \
		--ready-fd 3 --log-level warn --connect-timeout 2 \
		3>"$T/$name/ready" >"$T/$name/d.log" 2>&1 &
	PIDS+=($!)
	timeout 10 head -c 6 "$T/$name/ready" | grep -q ready || fail "$name not ready"
	eval "PORT_$name=$port"
}

ctl() { # name user, then the command
	local name=$1 user=$2 run=()
	shift 2
	[ "$user" = root ] || run=("${NOBODY[@]}")
	timeout 20 "${run[@]}" "$RMACTL" --socket "$T/$name/s.sock" "$@"
}

start_daemon r root
start_daemon n nobody
start_daemon m nobody

# root <-> nobody: refused at once, the same way every time
for try in 1 2 3; do
	for dir in "r root $PORT_n" "n nobody $PORT_r"; do
		set -- $dir
		rc=0
		ctl "$1" "$2" wait --timeout 5 --peer "127.0.0.1:$3" >/dev/null 2>"$T/err" || rc=$?
		[ $rc -ne 0 ] || fail "$1 reached 127.0.0.1:$3 (try $try)"
		grep -q "another user's daemon on the same host" "$T/err" ||
			fail "$1 -> 127.0.0.1:$3 (try $try): $(cat "$T/err")"
	done
done
echo "guard-local: root and uid 65534 daemons refuse each other, 3 of 3 each way: $(cut -c1-120 "$T/err")"

# nobody <-> nobody: served both ways
ctl m nobody expose --size 64K --descriptor-out "$T/m/desc" 2>>"$T/m/d.log" &
PIDS+=($!)
ctl n nobody expose --size 64K --descriptor-out "$T/n/desc" 2>>"$T/n/d.log" &
PIDS+=($!)
deadline=$((SECONDS + 10))
until [ -s "$T/m/desc" ] && [ -s "$T/n/desc" ]; do
	[ $SECONDS -lt $deadline ] || fail "no descriptors"
	sleep 0.05 # poll interval; bounded by the deadline above
done
head -c 5000 /dev/urandom >"$T/data"
chmod 644 "$T/data"
ctl n nobody put --peer "127.0.0.1:$PORT_m" --descriptor "$T/m/desc" "$T/data" || fail "put n -> m"
ctl m nobody put --peer "127.0.0.1:$PORT_n" --descriptor "$T/n/desc" "$T/data" || fail "put m -> n"
ctl n nobody get --peer "127.0.0.1:$PORT_m" --descriptor "$T/m/desc" --length 5000 >"$T/back1" || fail "get n <- m"
ctl m nobody get --peer "127.0.0.1:$PORT_n" --descriptor "$T/n/desc" --length 5000 >"$T/back2" || fail "get m <- n"
cmp -s "$T/data" "$T/back1" && cmp -s "$T/data" "$T/back2" || fail "bytes differ between the uid 65534 daemons"
echo "guard-local: two uid 65534 daemons put and get both ways"
echo "guard-local: all checks passed"

# SPDX-License-Identifier: BSD-2-Clause
# What the shell tests on loopback share (sourced, not run): failing,
# waits with deadlines, a free port, a daemon started with --ready-fd, and
# the cleanup of what they started. The sourcing script sets RMAD, T (its
# temporary directory) and PIDS=() first; it may define its own fail()
# after sourcing this. The tests in network namespaces have netns_lib.sh.

fail() { echo "FAIL: $*" >&2; exit 1; }

# Polls for a condition until a deadline (seconds).
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05 # poll interval; bounded by the deadline above
	done
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

# Sends SIG (TERM unless named) to every pid in PIDS, reaps them, and
# removes $T: the EXIT trap of the tests.
lib_cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -"${1:-TERM}" "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}

# start_daemon NAME [rmad flags]: rmad on $T/NAME.sock and a free port of
# 127.0.0.1 (in NAME_PORT), logging to $T/NAME.log; fails the test with
# that log unless ready within 10 s.
start_daemon() {
	local name=$1 port
	shift
	port=$(free_port)
	mkfifo "$T/$name.ready"
	"$RMAD" --socket "$T/$name.sock" --listen "127.0.0.1:$port" \
		--ready-fd 3 --log-level warn --connect-timeout 2 "$@" \
		3>"$T/$name.ready" 2>"$T/$name.log" &
	PIDS+=($!)
	# "ready", or the daemon exited (end of file) or hung: say why
	[ "$(timeout 10 head -c 5 "$T/$name.ready")" = ready ] ||
		fail "$name not ready: $(cat "$T/$name.log")"
	eval "${name}_PORT=$port"
}

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rmad under systemd's protocols without systemd: systemd-socket-activate
# passes the listening socket, a datagram socket of ours stands in for
# NOTIFY_SOCKET. The inherited socket serves clients; READY=1, STATUS=,
# WATCHDOG=1 and, on SIGTERM, STOPPING=1 arrive; rmad exits 0 and leaves
# the socket (systemd's) in place. A socket of the wrong kind is refused.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}" "${RMACTL_BIN:?}" "${NOTIFY_SINK:?}"
command -v systemd-socket-activate >/dev/null ||
	skip "no systemd-socket-activate (apt-get install systemd)"

"$NOTIFY_SINK" "$T/notify" 120 >"$T/notify.log" &
SINK=$!
PIDS+=("$SINK")
wait_until 10 test -S "$T/notify" || fail "notify socket not bound"

# The watchdog at 0.4 s: WATCHDOG=1 every 0.2 s.
NOTIFY_SOCKET=$T/notify WATCHDOG_USEC=400000 \
	systemd-socket-activate -l "$T/rmad.sock" \
	-E NOTIFY_SOCKET -E WATCHDOG_USEC \
	"$RMAD_BIN" --socket "$T/not-this.sock" --listen 127.0.0.1:0 \
	--log-level info 2>"$T/rmad.log" &
RMAD=$! # systemd-socket-activate execs rmad: the same process
PIDS+=("$RMAD")
wait_until 10 test -S "$T/rmad.sock" || fail "no activated socket: $(cat "$T/rmad.log")"

# The first client starts rmad (systemd-socket-activate waits for one) and
# is served through the inherited socket.
"$RMACTL_BIN" --socket "$T/rmad.sock" status >"$T/status.out" ||
	fail "status through the activated socket: $(cat "$T/rmad.log")"
grep -q '^daemon ' "$T/status.out" || fail "status: $(cat "$T/status.out")"
"$RMACTL_BIN" --socket "$T/rmad.sock" ping >/dev/null || fail "ping"
[ -e "$T/not-this.sock" ] && fail "rmad made its own socket besides systemd's"
grep -q "serving $T/rmad.sock" "$T/rmad.log" ||
	fail "rmad does not say it serves the activated socket: $(cat "$T/rmad.log")"

wait_until 10 grep -qx 'READY=1' "$T/notify.log" ||
	fail "no READY=1: $(cat "$T/notify.log")"
wait_until 10 grep -q '^STATUS=[0-9]* clients, [0-9]*/[0-9]* peers up, [0-9]* operations in flight$' \
	"$T/notify.log" || fail "no STATUS=: $(cat "$T/notify.log")"
wait_until 10 grep -qx 'WATCHDOG=1' "$T/notify.log" ||
	fail "no WATCHDOG=1: $(cat "$T/notify.log")"
# READY=1 came once UCX and the listener were up: before any watchdog
first=$(grep -m1 -x -e 'READY=1' -e 'WATCHDOG=1' "$T/notify.log")
[ "$first" = READY=1 ] || fail "WATCHDOG=1 before READY=1"
grep -q '^STOPPING=1$' "$T/notify.log" && fail "STOPPING=1 before any signal"

kill -TERM "$RMAD"
rc=0
wait "$RMAD" || rc=$?
[ "$rc" -eq 0 ] || fail "rmad exited $rc after SIGTERM: $(cat "$T/rmad.log")"
wait_until 10 grep -qx 'STOPPING=1' "$T/notify.log" ||
	fail "no STOPPING=1: $(cat "$T/notify.log")"
test -S "$T/rmad.sock" || fail "rmad removed the socket systemd owns"

# A socket that is not a listening AF_UNIX stream one is refused: here a
# TCP one (rmad starts at the first connection).
for try in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 30000))
	systemd-socket-activate -l "127.0.0.1:$port" "$RMAD_BIN" \
		--listen 127.0.0.1:0 2>"$T/tcp.log" &
	TCP=$!
	PIDS+=("$TCP")
	wait_until 10 grep -q -e 'Listening on' -e 'Failed' "$T/tcp.log" || true
	grep -q 'Listening on' "$T/tcp.log" && break
	wait "$TCP" 2>/dev/null || true
done
grep -q 'Listening on' "$T/tcp.log" || fail "systemd-socket-activate on tcp: $(cat "$T/tcp.log")"
exec 4<>"/dev/tcp/127.0.0.1/$port" || fail "connect to the tcp socket"
rc=0
timeout 30 tail -s 0.1 --pid="$TCP" -f /dev/null || fail "rmad kept running on a tcp socket"
wait "$TCP" || rc=$?
exec 4>&-
[ "$rc" -eq 1 ] || fail "rmad on a tcp socket exited $rc: $(cat "$T/tcp.log")"
grep -q 'not a listening AF_UNIX stream socket' "$T/tcp.log" ||
	fail "no reason given: $(cat "$T/tcp.log")"
echo ok

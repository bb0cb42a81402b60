#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The UCX listener goes only once the connections it accepted are gone
# (daemon/listener.c: listener_stop). UCX 1.13's sockcm keeps a connection
# it accepted, until its first bytes arrive, with a pointer to the uct
# listener, which ucp_listener_destroy frees: bytes arriving afterwards
# made UCX's async thread call the freed listener (a SIGSEGV seen in a
# hand-over's drain). Three connections that send nothing are held to a
# daemon's listener until the daemon holds them; on SIGTERM the daemon
# must shut all three down before its listener goes (its log counts
# them), each must see its end, and the daemon must exit with status 0.
# Every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
T=$(mktemp -d /tmp/rmad-listener-stop.XXXXXX)
PIDS=()

. "$(dirname "$0")/lib.sh"
trap 'lib_cleanup KILL' EXIT
trap "exit 1" TERM INT HUP

start_daemon a --log-level info
pid=${PIDS[0]}

# Held connections: connected, then held until the daemon has accepted
# each (its end's inode among the daemon's descriptors); then SIGTERM,
# and each must read its end (or a reset) before the deadline.
python3 - "$pid" "$a_PORT" 3 <<'PY' || fail "held connections: $(tail -5 "$T/a.log")"
import os, signal, socket, sys, time

pid, port, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
ends = {"%04X" % c.getsockname()[1] for c in conns}

def held_inodes():
    found = set()
    with open("/proc/net/tcp") as f:
        for line in list(f)[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if local.endswith(":%04X" % port) and remote.split(":")[1] in ends:
                found.add("socket:[%s]" % inode)
    return found

def daemon_holds_all():
    want = held_inodes()
    if len(want) < n:
        return False
    have = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            have.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return want <= have

deadline = time.monotonic() + 10
while not daemon_holds_all():
    if time.monotonic() > deadline:
        sys.exit("the daemon did not accept the %d connections" % n)
    time.sleep(0.05)  # poll interval; bounded by the deadline above
os.kill(pid, signal.SIGTERM)
for c in conns:
    c.settimeout(10)
    try:
        if c.recv(1) != b"":
            sys.exit("bytes from the daemon's listener")
    except ConnectionResetError:
        pass
PY
wait "$pid" || fail "the daemon exited with status $?: $(tail -5 "$T/a.log")"
grep -q "listener_stop: 3 connections to the listener shut down before it goes" "$T/a.log" ||
	fail "the listener went before its connections: $(tail -5 "$T/a.log")"
echo "listener-stop: ok"

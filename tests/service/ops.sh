#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rmactl's operator commands against real daemons: peers, clients,
# users, regions, ops (an operation held in flight by a frozen peer, with its
# age), ping; --json for each; exit codes.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}" "${RMACTL_BIN:?}"
ctl() { "$RMACTL_BIN" --socket "$T/b.sock" "$@"; }

# exit codes without a daemon, and usage errors
rc=0
"$RMACTL_BIN" --socket "$T/none.sock" ping 2>"$T/err" || rc=$?
[ "$rc" -eq 69 ] || fail "ping without a daemon exited $rc"
grep -q '^rmactl: ping: ' "$T/err" || fail "error line: $(cat "$T/err")"
for cmd in peers clients users regions ops ping; do
	rc=0
	"$RMACTL_BIN" --socket "$T/none.sock" "$cmd" --bogus 2>/dev/null || rc=$?
	[ "$rc" -eq 64 ] || fail "$cmd --bogus exited $rc"
	"$RMACTL_BIN" "$cmd" --help | grep -q "^usage: rmactl .*$cmd" ||
		fail "$cmd --help"
done
rc=0
"$RMACTL_BIN" ping --count 0 2>/dev/null || rc=$?
[ "$rc" -eq 64 ] || fail "ping --count 0 exited $rc"

start_daemon a --op-timeout 30
start_daemon b --op-timeout 30

ctl peers | grep -qx 'no peers' || fail "peers on a fresh daemon"
ctl ops | grep -qx 'no operations in flight' || fail "ops on a fresh daemon"
ctl regions | grep -qx 'no regions' || fail "regions on a fresh daemon"
# users: what the uid holds, exactly, once the daemon has seen the
# earlier rmactl processes go (their closes are read on its own time)
users_are() { # regex, file
	ctl users >"$2" && grep -Eq "$1" "$2"
}
# the asking rmactl is the one client of its user
wait_until 10 users_are "^ +$(id -u) +1/256 +0/16384 +0 B/256\.0 GiB$" "$T/users0" ||
	fail "users on a fresh daemon: $(cat "$T/users0")"
ctl ping >"$T/ping" || fail "ping"
grep -Eq '^rmad [0-9.]+ \(daemon [0-9a-f]+\) at .*b\.sock: connect\+hello [0-9.]+ ms, status min/avg/max [0-9.]+/[0-9.]+/[0-9.]+ ms \(1\)$' \
	"$T/ping" || fail "ping: $(cat "$T/ping")"
ctl ping --count 5 --json >"$T/ping.json" || fail "ping --json"
json_ok "$T/ping.json"
grep -q '"count": 5,' "$T/ping.json" || fail "ping --json: $(cat "$T/ping.json")"

"$RMACTL_BIN" --socket "$T/a.sock" expose --size 1M --descriptor-out "$T/desc" &
PIDS+=($!)
wait_until 10 test -s "$T/desc" || fail "no descriptor"
"$RMACTL_BIN" --socket "$T/b.sock" expose --size 64K --descriptor-out "$T/desc.b" &
PIDS+=($!)
wait_until 10 test -s "$T/desc.b" || fail "no descriptor on b"
head -c 65536 /dev/urandom >"$T/data"
ctl put --peer "127.0.0.1:$a_PORT" --descriptor "$T/desc" "$T/data" || fail "put"

ctl peers >"$T/peers" || fail "peers"
grep -Eq "^ +[0-9]+  127\\.0\\.0\\.1:$a_PORT +up +out +[1-9][0-9]* +64\\.0 KiB +0 +0 B +0$" \
	"$T/peers" || fail "peers: $(cat "$T/peers")"
ctl peers --wide >"$T/peers.wide" || fail "peers --wide"
grep -Eq "^ +[0-9]+  127\\.0\\.0\\.1:$a_PORT +127\\.0\\.0\\.1:$a_PORT +up +out +0 +[0-9a-f]{32} +[1-9]" \
	"$T/peers.wide" || fail "peers --wide: $(cat "$T/peers.wide")"
# a knows b (inbound) by b's listen address, as /metrics and the JSON do,
# not by the ephemeral port b connected from (--wide shows that one)
"$RMACTL_BIN" --socket "$T/a.sock" peers >"$T/a.peers" || fail "a peers"
grep -Eq "^ +[0-9]+  127\\.0\\.0\\.1:$b_PORT +up +in +0 +0 B +[1-9][0-9]* +64\\.0 KiB +0$" \
	"$T/a.peers" || fail "a's inbound peer: $(cat "$T/a.peers")"
"$RMACTL_BIN" --socket "$T/a.sock" status >"$T/a.status" || fail "a status"
grep -Eq "^ +[0-9]+  127\\.0\\.0\\.1:$b_PORT +up +in " "$T/a.status" ||
	fail "a's inbound peer in status: $(cat "$T/a.status")"
"$RMACTL_BIN" --socket "$T/a.sock" peers --json >"$T/a.peers.json" || fail "a peers --json"
grep -q "\"listen_address\": \"127.0.0.1:$b_PORT\"" "$T/a.peers.json" ||
	fail "a peers --json: $(cat "$T/a.peers.json")"
"$RMACTL_BIN" --socket "$T/a.sock" peers --wide >"$T/a.peers.wide" || fail "a peers --wide"
grep -Eq "^ +[0-9]+  127\\.0\\.0\\.1:$b_PORT +127\\.0\\.0\\.1:[0-9]+ +up +in " \
	"$T/a.peers.wide" || fail "a peers --wide: $(cat "$T/a.peers.wide")"
# the tables people read fit 100 columns; bytes are humanised
ctl status >"$T/b.status" || fail "status"
for f in "$T/peers" "$T/a.peers" "$T/a.status" "$T/b.status"; do
	awk -v f="$f" 'length($0) > 100 { print f ": " length($0) " columns: " $0; bad = 1 }
		END { exit bad }' "$f" || fail "wider than 100 columns"
done
grep -q "^  bytes          put 64\\.0 KiB, get 0 B$" "$T/b.status" ||
	fail "status bytes: $(grep bytes "$T/b.status")"
grep -Eq "^ +[0-9]+ +64\\.0 KiB +[0-9]+ +0 +alloc$" "$T/b.status" ||
	fail "status regions: $(cat "$T/b.status")"
ctl clients >"$T/clients" || fail "clients"
grep -Eq '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ rmactl\[[0-9]+\] +0 +ring +1 +64\.0 KiB' \
	"$T/clients" || fail "clients: $(cat "$T/clients")"
# a client without the ring (RMA_RING=0) is listed as on the socket: here
# the asking rmactl itself, with no regions
RMA_RING=0 ctl clients >"$T/clients.sock" || fail "clients with RMA_RING=0"
grep -Eq '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ rmactl\[[0-9]+\] +0 +socket +0 ' \
	"$T/clients.sock" || fail "clients via socket: $(cat "$T/clients.sock")"
# the exposing rmactl and the asking one, one region of 64 KiB
wait_until 10 users_are "^ +$(id -u) +2/256 +1/16384 +64\.0 KiB/256\.0 GiB$" "$T/users" ||
	fail "users: $(cat "$T/users")"
# status has the same table (taken earlier: an rmactl of before may
# still count there)
grep -Eq "^  +$(id -u) +[0-9]+/256 +[0-9]+/16384 +[0-9.]+ [KMG]?i?B/256\.0 GiB$" \
	"$T/b.status" || fail "status users: $(cat "$T/b.status")"
ctl regions >"$T/regions" || fail "regions"
grep -qx '1 regions, 64.0 KiB registered' "$T/regions" || fail "regions: $(cat "$T/regions")"
grep -Eq '^ +[0-9]+ +64\.0 KiB +[0-9]+ +0 +alloc$' "$T/regions" || fail "regions: $(cat "$T/regions")"
for cmd in peers clients users regions ops; do
	ctl "$cmd" --json >"$T/$cmd.json" || fail "$cmd --json"
	json_ok "$T/$cmd.json"
done
grep -q '"peers": \[' "$T/peers.json" || fail "peers --json: $(cat "$T/peers.json")"
# the tables' words, not the .proto's names (issue 14 item 9)
grep -q '"state": "up"' "$T/peers.json" || fail "peers --json state"
grep -q '"clients": \[' "$T/clients.json" || fail "clients --json"
grep -q "\"uid\": $(id -u)," "$T/users.json" || fail "users --json: $(cat "$T/users.json")"
grep -q '"max_region_bytes_per_uid": "274877906944"' "$T/users.json" ||
	fail "users --json limits: $(cat "$T/users.json")"
# 64-bit integers are strings (proto3 JSON mapping), 32-bit ones numbers
grep -q '"length": "65536"' "$T/regions.json" || fail "regions --json"
grep -Eq '"client_id": [0-9]+,' "$T/regions.json" || fail "regions --json client_id"
grep -q '"ops_in_flight": "0"' "$T/ops.json" || fail "ops --json: $(cat "$T/ops.json")"

# An operation held in flight: the target is frozen (SIGSTOP), so the put
# stays until its deadline (30 s); ops lists it, oldest first, with its age.
kill -STOP "$a_PID"
ctl put --peer "127.0.0.1:$a_PORT" --descriptor "$T/desc" "$T/data" 2>/dev/null &
PUT=$!
PIDS+=("$PUT")
in_flight() {
	ctl ops --json >"$T/ops.json" && grep -q '"ops_in_flight": "[1-9]' "$T/ops.json"
}
wait_until 10 in_flight || fail "no operation in flight: $(cat "$T/ops.json")"
json_ok "$T/ops.json"
grep -q '"kind": "put"' "$T/ops.json" || fail "ops --json kind"
grep -q "\"peer_address\": \"127.0.0.1:$a_PORT\"" "$T/ops.json" || fail "ops --json peer"
grep -q '"length": "65536"' "$T/ops.json" || fail "ops --json length"
grep -Eq '"age_us": "[0-9]+"' "$T/ops.json" || fail "ops --json age"
ctl ops >"$T/ops" || fail "ops"
grep -Eq "^ +[0-9]+ +[0-9]+ +[0-9]+ put +[0-9]+  127\\.0\\.0\\.1:$a_PORT +64\\.0 KiB +[0-9.]+(us|ms|s)$" \
	"$T/ops" || fail "ops: $(cat "$T/ops")"
grep -Eq '^[1-9][0-9]* operations in flight, [1-9][0-9]* listed' "$T/ops" || fail "ops total"
ctl peers --wide | grep -Eq " +1 +[0-9.]+(us|ms|s) +[0-9]+ +[0-9]+ +[0-9.]+( [KMGT]?i?B)? +[0-9]+ +[0-9]+/[0-9]+  -$" || fail "peers: no oldest age: $(ctl peers --wide)"

# A frozen peer that dies: the put fails promptly (connection reset).
kill -KILL "$a_PID"
rc=0
wait "$PUT" || rc=$?
[ "$rc" -ne 0 ] || fail "put to a killed peer succeeded"
wait_until 10 sh -c "'$RMACTL_BIN' --socket '$T/b.sock' ops | grep -qx 'no operations in flight'" ||
	fail "operations still in flight after the peer died"
echo ok

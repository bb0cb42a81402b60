#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Prometheus metrics over HTTP, read with a bash /dev/tcp client from a
# real daemon after real puts: counters by operation and peer, bytes,
# the latency histogram, peer state, clients and regions.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}" "${RMACTL_BIN:?}"

# a serves metrics too: the target's view of what it serves (issue 14)
start_daemon a --metrics-listen 127.0.0.1:0 --op-timeout 1
A_MPORT=$(sed -n 's|.*metrics_start: serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' \
	"$T/a.log")
[ -n "$A_MPORT" ] || fail "no metrics address in a's log: $(cat "$T/a.log")"
# Two workers on b: the clients of the puts below land on both, and the
# page must add their counts up.
start_daemon b --metrics-listen 127.0.0.1:0 --workers 2
MPORT=$(sed -n 's|.*metrics_start: serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' \
	"$T/b.log")
[ -n "$MPORT" ] || fail "no metrics address in b's log: $(cat "$T/b.log")"
B_MPORT=$MPORT

# http METHOD PATH OUT: one HTTP/1.0 request, the whole response in OUT
# (CRs dropped).
http() {
	local rc=0
	exec 5<>"/dev/tcp/127.0.0.1/$MPORT" || return 1
	printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" "$2" >&5
	timeout 10 cat <&5 >"$3.raw" || rc=$?
	exec 5<&-
	tr -d '\r' <"$3.raw" >"$3"
	return $rc
}

# metric OUT LINE-REGEX: OUT has a sample line matching the whole regex.
metric() {
	grep -Eqx "$2" "$1" ||
		fail "no line matching '$2' in: $(grep -v '^#' "$1")"
}

http GET /metrics "$T/m0" || fail "GET /metrics"
head -n 1 "$T/m0" | grep -q '^HTTP/1\.[01] 200' || fail "status: $(head -n 1 "$T/m0")"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$T/m0" || fail "content type"
metric "$T/m0" 'rmad_operations_in_flight 0'
metric "$T/m0" 'rmad_clients 0'
metric "$T/m0" 'rmad_operation_duration_seconds_count\{op="put"\} 0'

"$RMACTL_BIN" --socket "$T/a.sock" expose --size 1M --descriptor-out "$T/desc" \
	--read-only-descriptor-out "$T/desc.ro" &
PIDS+=($!)
wait_until 10 test -s "$T/desc" || fail "no descriptor"
"$RMACTL_BIN" --socket "$T/b.sock" expose --size 1M --descriptor-out "$T/desc.b" &
PIDS+=($!)
wait_until 10 test -s "$T/desc.b" || fail "no descriptor on b"

head -c 100000 /dev/urandom >"$T/data"
for i in 1 2 3; do
	"$RMACTL_BIN" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
		--descriptor "$T/desc" --offset $((i * 1000)) "$T/data" ||
		fail "put $i"
done
"$RMACTL_BIN" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --length 4K --out "$T/back" || fail "get"
# out of bounds: decided by the library (immediate completion), never
# reaches the daemon
rc=0
"$RMACTL_BIN" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 1000000 "$T/data" 2>/dev/null || rc=$?
[ "$rc" -eq 65 ] || fail "out of bounds put exited $rc"
# an atomic through the read-only descriptor: refused by the owner,
# counted as failed
rc=0
"$RMACTL_BIN" --socket "$T/b.sock" atomic --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc.ro" --offset 0 --op add --value 1 2>/dev/null || rc=$?
[ "$rc" -eq 77 ] || fail "read-only atomic exited $rc"

http GET /metrics "$T/m1" || fail "GET /metrics after puts"
peer="127\\.0\\.0\\.1:$a_PORT"
puts=$(sed -n "s/^rmad_operations_total{op=\"put\",peer=\"$peer\"} \([0-9]*\)$/\1/p" "$T/m1")
[ -n "$puts" ] && [ "$puts" -ge 3 ] || fail "rmad_operations_total for put: '$puts'"
metric "$T/m1" "rmad_operation_bytes_total\\{op=\"put\",peer=\"$peer\"\\} 300000"
metric "$T/m1" "rmad_operation_bytes_total\\{op=\"get\",peer=\"$peer\"\\} 4096"
metric "$T/m1" "rmad_operation_errors_total\\{op=\"put\",peer=\"$peer\"\\} 0"
metric "$T/m1" 'rmad_operations_failed_total [1-9][0-9]*'
metric "$T/m1" "rmad_operation_duration_seconds_count\\{op=\"put\"\\} $puts"
metric "$T/m1" "rmad_operation_duration_seconds_bucket\\{op=\"put\",le=\"\\+Inf\"\\} $puts"
metric "$T/m1" 'rmad_operation_duration_seconds_bucket\{op="put",le="10"\} [1-9][0-9]*'
metric "$T/m1" 'rmad_operation_duration_seconds_sum\{op="put"\} [0-9.]+'
a_id=$("$RMACTL_BIN" --socket "$T/a.sock" status --json |
	sed -n 's/^  "daemon_id": "\([0-9a-f]*\)",$/\1/p')
b_id=$("$RMACTL_BIN" --socket "$T/b.sock" status --json |
	sed -n 's/^  "daemon_id": "\([0-9a-f]*\)",$/\1/p')
[ -n "$a_id" ] && [ -n "$b_id" ] || fail "daemon ids: '$a_id' '$b_id'"
out="peer=\"$peer\",daemon_id=\"$a_id\",direction=\"out\",worker=\"[01]\""
metric "$T/m1" "rmad_peer_up\\{$out\\} 1"
metric "$T/m1" "rmad_peer_state\\{$out,state=\"up\"\\} 1"
metric "$T/m1" "rmad_peer_state\\{$out,state=\"down\"\\} 0"
metric "$T/m1" "rmad_peer_operations_in_flight\\{$out\\} 0"
metric "$T/m1" 'rmad_operations_in_flight 0'
metric "$T/m1" 'rmad_clients 1'
metric "$T/m1" 'rmad_regions 1'
metric "$T/m1" 'rmad_region_bytes 1048576'
# the door between daemons, all quiet here
for name in peer_messages_dropped peers_cut_off inbound_refused peer_auth_failures ucx_accept_refused; do
	metric "$T/m1" "rmad_${name}_total 0"
	grep -q "^# HELP rmad_${name}_total ." "$T/m1" || fail "no HELP for rmad_${name}_total"
done
metric "$T/m1" 'rmad_target_puts_total 0'
metric "$T/m1" 'rmad_notifications_total\{path="ring"\} 0'
metric "$T/m1" 'rmad_notifications_total\{path="socket"\} 0'
metric "$T/m1" 'rmad_notify_wakeups_total\{when="at_once"\} 0'
metric "$T/m1" 'rmad_notify_wakeups_total\{when="held"\} 0'
metric "$T/m1" 'rmad_connect_failures_total 0'
metric "$T/m1" 'rmad_connect_attempts_total [1-9][0-9]*'
out="peer=\"127\\.0\\.0\\.1:$a_PORT\",daemon_id=\"[0-9a-f]+\",direction=\"out\",worker=\"[01]\""
metric "$T/m1" "rmad_peer_connect_attempts_total\\{$out\\} [1-9][0-9]*"
metric "$T/m1" "rmad_peer_connect_failures_total\\{$out\\} 0"
# the process, under the standard names
metric "$T/m1" 'process_cpu_seconds_total [0-9]+\.[0-9]+'
metric "$T/m1" 'process_resident_memory_bytes [1-9][0-9]*'
metric "$T/m1" 'process_max_fds [1-9][0-9]*'
n_fds=$(sed -n 's/^process_open_fds \([0-9]*\)$/\1/p' "$T/m1")
[ "${n_fds:-0}" -ge 5 ] || fail "process_open_fds '$n_fds'"
start=$(sed -n 's/^process_start_time_seconds \([0-9.]*\)$/\1/p' "$T/m1")
now=$(date +%s)
awk -v s="$start" -v n="$now" 'BEGIN { exit !(s > n - 3600 && s <= n + 1) }' ||
	fail "process_start_time_seconds '$start', now $now"
# Prometheus naming: a counter's name ends in _total, and only a
# counter's does (histograms end in _bucket, _sum, _count)
while read -r name type; do
	case "$type:$name" in
	counter:*_total | histogram:* | gauge:* | untyped:*) ;;
	*) fail "counter $name does not end in _total" ;;
	esac
	case "$type:$name" in
	gauge:*_total) fail "gauge $name ends in _total" ;;
	esac
done < <(sed -n 's/^# TYPE \([^ ]*\) \(.*\)$/\1 \2/p' "$T/m1")
metric "$T/m1" 'rmad_info\{version="[^"]+",ucx_version="[^"]+",daemon_id="[0-9a-f]+"\} 1'
# no sample twice (each worker's endpoint has its own labels)
dups=$(sed -n '/^HTTP/,/^$/!{/^#/!p}' "$T/m1" | sed 's/ [^ ]*$//' | sort | uniq -d)
[ -z "$dups" ] || fail "samples repeated: $dups"
# exposition format: every sample's metric has a TYPE line
sed '1,/^$/d' "$T/m1" | grep -v '^#' | sed 's/[{ ].*//' |
	sed 's/_\(bucket\|sum\|count\)$//' | sort -u | while read -r name; do
	grep -q "^# TYPE $name " "$T/m1" || fail "no TYPE for $name"
done

# ---- the target's side (a): what it served, named by b's daemon id and
# b's listen address, not by b's ephemeral source port
MPORT=$A_MPORT
http GET /metrics "$T/a1" || fail "GET a's /metrics"
in="peer=\"127\\.0\\.0\\.1:$b_PORT\",daemon_id=\"$b_id\",direction=\"in\",worker=\"[01]\""
metric "$T/a1" "rmad_peer_up\\{$in\\} 1"
n_puts=$(sed -n "s/^rmad_peer_served_operations_total{$in,op=\"put\"} \([0-9]*\)$/\1/p" "$T/a1" |
	awk '{s += $1} END {print s + 0}')
[ "$n_puts" -ge 3 ] || fail "served puts on a: '$n_puts': $(grep served "$T/a1")"
n_bytes=$(sed -n "s/^rmad_peer_served_bytes_total{$in} \([0-9]*\)$/\1/p" "$T/a1" |
	awk '{s += $1} END {print s + 0}')
[ "$n_bytes" -ge 304096 ] || fail "served bytes on a: '$n_bytes'"
metric "$T/a1" "rmad_peer_served_operations_total\\{$in,op=\"get\"\\} [1-9][0-9]*"
metric "$T/a1" "rmad_peer_served_operations_total\\{$in,op=\"resolve\"\\} [1-9][0-9]*"
metric "$T/a1" "rmad_peer_refused_total\\{$in\\} [0-9]+"
grep -q 'direction="in"' "$T/a1" || fail "no inbound series on a"
grep -E 'direction="in"' "$T/a1" | grep -Eq "peer=\"127\\.0\\.0\\.1:$b_PORT\"" ||
	fail "inbound series not named by b's listen address"
# status: the inbound peer carries b's daemon id and its served counters
"$RMACTL_BIN" --socket "$T/a.sock" peers --json >"$T/a_peers.json" || fail "a peers"
json_ok "$T/a_peers.json"
python3 - "$T/a_peers.json" "$b_id" "$b_PORT" <<'PY' || fail "a's peers: $(cat "$T/a_peers.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
ins = [p for p in doc["peers"] if p.get("inbound")]
assert ins, "no inbound peer"
# b has two workers: one inbound peer per lane
for p in ins:
    assert p["daemon_id"] == sys.argv[2], p
    assert p["listen_address"] == "127.0.0.1:" + sys.argv[3], p
assert sum(int(p["served_puts"]) for p in ins) >= 3, ins
assert sum(int(p["served_bytes"]) for p in ins) >= 304096, ins
PY
"$RMACTL_BIN" --socket "$T/a.sock" peers --wide >"$T/a_peers.txt" || fail "a peers table"
grep -q "SERVED" "$T/a_peers.txt" || fail "no SERVED column: $(cat "$T/a_peers.txt")"
grep -E " in +[0-9]+ +$b_id " "$T/a_peers.txt" >/dev/null ||
	fail "inbound peer's daemon id not in the table: $(cat "$T/a_peers.txt")"

# labels of a's peer series, one line each, values cut
labels() { grep -E '^rmad_peer_(up|served|refused)' "$1" | sed 's/ [^ ]*$//' | sort; }
labels "$T/a1" >"$T/a1.labels"

# A reconnect: a freezes while b has a put in flight; b's deadline
# (1 s) closes the endpoint, a thaws and the next put reconnects from
# b's new source port. The series keep their names: no new ones.
kill -STOP "$a_PID"
rc=0
"$RMACTL_BIN" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 0 "$T/data" 2>/dev/null || rc=$?
kill -CONT "$a_PID"
[ "$rc" -ne 0 ] || fail "a put to a frozen daemon succeeded"
reput() {
	"$RMACTL_BIN" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
		--descriptor "$T/desc" --offset 0 "$T/data" 2>/dev/null
}
wait_until 20 reput || fail "no put after the reconnect"
# b has two workers, and the put above reconnected one of them: the
# series after it are among those before (none new), and the inbound
# peer is up again under its old name.
inbound_back() {
	http GET /metrics "$T/a2" &&
		grep -Eq "^rmad_peer_up\{$in\} 1$" "$T/a2"
}
wait_until 10 inbound_back || fail "inbound series after the reconnect: $(grep peer_up "$T/a2")"
labels "$T/a2" >"$T/a2.labels"
new_series=$(comm -13 "$T/a1.labels" "$T/a2.labels")
[ -z "$new_series" ] || fail "new series after a reconnect: $new_series"
[ -s "$T/a2.labels" ] || fail "no peer series after the reconnect"
dups=$(sed -n '/^HTTP/,/^$/!{/^#/!p}' "$T/a2" | sed 's/ [^ ]*$//' | sort | uniq -d)
[ -z "$dups" ] || fail "samples repeated after the reconnect: $dups"
grep -q 'replaced by a newer connection\|connection lost\|handshake' "$T/a.log" ||
	fail "no reconnect seen in a's log: $(cat "$T/a.log")"

# ---- a failed connect stays visible (b to a port nobody listens on)
dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rc=0
"$RMACTL_BIN" --socket "$T/b.sock" put --peer "127.0.0.1:$dead" \
	--descriptor "$T/desc" --offset 0 "$T/data" 2>/dev/null || rc=$?
[ "$rc" -ne 0 ] || fail "a put to a dead port succeeded"
"$RMACTL_BIN" --socket "$T/b.sock" peers --json >"$T/b_peers.json" || fail "b peers"
json_ok "$T/b_peers.json"
python3 - "$T/b_peers.json" "$dead" <<'PY' || fail "dead peer: $(cat "$T/b_peers.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
ps = [p for p in doc["peers"] if p["address"] == "127.0.0.1:" + sys.argv[2]]
assert len(ps) == 1, "the failed peer is gone"
p = ps[0]
assert p["state"] == "down", p
assert int(p["connect_attempts"]) >= 1 and int(p["connect_failures"]) >= 1, p
assert p["last_error"] and int(p["last_error_unix_ms"]) > 0, p
PY
"$RMACTL_BIN" --socket "$T/b.sock" peers --wide | grep -E "127\.0\.0\.1:$dead .* [0-9]+s ago: " >/dev/null ||
	fail "no failed peer with its error's age: $("$RMACTL_BIN" --socket "$T/b.sock" peers --wide)"
# the narrow table: the error on a line of its own, within 100 columns
"$RMACTL_BIN" --socket "$T/b.sock" peers >"$T/b_peers.txt"
grep -Eq "^      last error: [0-9]+s ago: " "$T/b_peers.txt" ||
	fail "no last error line: $(cat "$T/b_peers.txt")"
awk 'length($0) > 100 { bad = 1 } END { exit bad }' "$T/b_peers.txt" ||
	fail "peers wider than 100 columns: $(cat "$T/b_peers.txt")"
MPORT=$B_MPORT
http GET /metrics "$T/m2" || fail "GET b's /metrics"
metric "$T/m2" 'rmad_connect_failures_total [1-9][0-9]*'
metric "$T/m2" "rmad_peer_connect_failures_total\\{peer=\"127\\.0\\.0\\.1:$dead\",daemon_id=\"\",direction=\"out\",worker=\"[01]\"\\} [1-9][0-9]*"

http GET / "$T/m404" || fail "GET /"
head -n 1 "$T/m404" | grep -q ' 404' || fail "GET / gave $(head -n 1 "$T/m404")"
http POST /metrics "$T/mpost" || true
head -n 1 "$T/mpost" | grep -q ' 200' && fail "POST /metrics answered 200"

# SIGTERM with metrics on: a clean exit
kill -TERM "$b_PID"
rc=0
wait "$b_PID" || rc=$?
[ "$rc" -eq 0 ] || fail "b exited $rc: $(cat "$T/b.log")"
echo ok

#!/bin/bash
# Prometheus metrics over HTTP, read with a bash /dev/tcp client from a
# real daemon after real puts: counters by operation and peer, bytes,
# the latency histogram, peer state, clients and regions.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}" "${RMACTL_BIN:?}"

start_daemon a
# Two workers on b: the clients of the puts below land on both, and the
# page must add their counts up.
start_daemon b --metrics-listen 127.0.0.1:0 --workers 2
MPORT=$(sed -n 's|.*metrics_start: serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' \
	"$T/b.log")
[ -n "$MPORT" ] || fail "no metrics address in b's log: $(cat "$T/b.log")"
grep -q metrics_start "$T/a.log" && fail "metrics served without metrics_listen"

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

"$RMACTL_BIN" --socket "$T/a.sock" expose --size 1M --descriptor-out "$T/desc" &
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
# out of bounds: refused before UCX, counted as failed
rc=0
"$RMACTL_BIN" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 1000000 "$T/data" 2>/dev/null || rc=$?
[ "$rc" -eq 65 ] || fail "out of bounds put exited $rc"

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
metric "$T/m1" "rmad_peer_up\\{peer=\"$peer\",direction=\"out\",worker=\"[01]\"\\} 1"
metric "$T/m1" "rmad_peer_state\\{peer=\"$peer\",direction=\"out\",worker=\"[01]\",state=\"up\"\\} 1"
metric "$T/m1" "rmad_peer_state\\{peer=\"$peer\",direction=\"out\",worker=\"[01]\",state=\"down\"\\} 0"
metric "$T/m1" "rmad_peer_operations_in_flight\\{peer=\"$peer\",direction=\"out\",worker=\"[01]\"\\} 0"
metric "$T/m1" 'rmad_operations_in_flight 0'
metric "$T/m1" 'rmad_clients 1'
metric "$T/m1" 'rmad_regions 1'
metric "$T/m1" 'rmad_region_bytes 1048576'
# the door between daemons, all quiet here
for name in peer_messages_dropped peers_cut_off inbound_refused peer_auth_failures; do
	metric "$T/m1" "rmad_${name}_total 0"
	grep -q "^# HELP rmad_${name}_total ." "$T/m1" || fail "no HELP for rmad_${name}_total"
done
metric "$T/m1" 'rmad_target_puts_total 0'
metric "$T/m1" 'rmad_info\{version="[^"]+",ucx_version="[^"]+",daemon_id="[0-9a-f]+"\} 1'
# no sample twice (each worker's endpoint has its own labels)
dups=$(sed -n '/^HTTP/,/^$/!{/^#/!p}' "$T/m1" | sed 's/ [^ ]*$//' | sort | uniq -d)
[ -z "$dups" ] || fail "samples repeated: $dups"
# exposition format: every sample's metric has a TYPE line
sed '1,/^$/d' "$T/m1" | grep -v '^#' | sed 's/[{ ].*//' |
	sed 's/_\(bucket\|sum\|count\)$//' | sort -u | while read -r name; do
	grep -q "^# TYPE $name " "$T/m1" || fail "no TYPE for $name"
done

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

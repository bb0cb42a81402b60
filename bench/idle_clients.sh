#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# A daemon's footprint with many clients (issue 15, item 5): start rmad,
# connect N clients (default 100; `rmactl expose` of 4 KiB each, every one
# with its shared ring), push traffic through some of them (same-daemon
# puts, 8 B, window 256), then report the daemon's RSS (now and peak) and
# the CPU it used in the IDLE_S seconds after the traffic (default 3).
# Goals: RSS < 16 MiB, no CPU when idle (the ring's polling is bounded).
#
#   bench/idle_clients.sh [BUILD_DIR] [N] [IDLE_S]
#
# Prints a line per figure and one JSON line. Everything is killed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
N=${2:-100}
IDLE_S=${3:-3}
RMAD=$BUILD/daemon/rmad
RMACTL=$BUILD/rmactl/rmactl
T=$(mktemp -d /tmp/rmad-idle.XXXXXX)
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" TERM INT HUP

wait_until() { # seconds, command...
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.02 # poll interval; bounded by the deadline above
	done
}

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkfifo "$T/ready"
"$RMAD" --listen "127.0.0.1:$PORT" --socket "$T/a.sock" --ready-fd 3 \
	--log-level warn 3>"$T/ready" 2>"$T/a.log" &
DPID=$!
PIDS+=($DPID)
timeout 10 head -c 6 "$T/ready" | grep -q ready || { echo "idle_clients: rmad not ready" >&2; exit 1; }

for i in $(seq 1 "$N"); do
	"$RMACTL" --socket "$T/a.sock" expose --size 4K \
		--descriptor-out "$T/desc.$i" 2>>"$T/expose.log" &
	PIDS+=($!)
done
all_there() { [ "$(ls "$T" | grep -c '^desc\.[0-9]*$')" -eq "$N" ]; }
wait_until 60 all_there || { echo "idle_clients: not all $N clients exposed" >&2; exit 1; }

# traffic through ten of them: same-daemon puts
for i in $(seq 1 10); do
	"$RMACTL" --socket "$T/a.sock" bench --peer "127.0.0.1:$PORT" \
		--descriptor "$T/desc.$i" --op put --size 8 --count 20000 \
		--window 256 --json >"$T/bench.$i" 2>>"$T/bench.log"
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }
rss_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$DPID/status"; }
TCK=$(getconf CLK_TCK)
c0=$(cpu_ticks)
t0=$EPOCHREALTIME
# the daemon is idle now: this is the window being measured, not a wait
# for something to happen
sleep "$IDLE_S"
c1=$(cpu_ticks)
t1=$EPOCHREALTIME
rss=$(rss_kib VmRSS)
hwm=$(rss_kib VmHWM)
cpu_ms=$(((c1 - c0) * 1000 / TCK))
clients=$("$RMACTL" --socket "$T/a.sock" status --json |
	python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("clients", [])))')
ring=$("$RMACTL" --socket "$T/a.sock" clients | grep -c ' ring ' || true)

printf 'idle_clients: %d clients connected (%d through a ring)\n' "$clients" "$ring"
printf 'idle_clients: daemon RSS %.1f MiB now, %.1f MiB peak (goal < 16 MiB)\n' \
	"$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
printf 'idle_clients: daemon CPU while idle: %d ms in %.1f s (goal ~0)\n' \
	"$cpu_ms" "$(echo "$t1 - $t0" | bc -l)"
printf '{"bench": "idle_clients", "clients": %d, "ring_clients": %d, "rss_kib": %d, "peak_rss_kib": %d, "idle_cpu_ms": %d, "idle_s": %s}\n' \
	"$clients" "$ring" "$rss" "$hwm" "$cpu_ms" "$IDLE_S"

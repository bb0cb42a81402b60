# SPDX-License-Identifier: BSD-2-Clause
# Shared by the service tests: a temp dir cleaned on exit, processes
# killed on exit, waits with deadlines (never fixed sleeps).
set -euo pipefail

T=$(mktemp -d /tmp/rmad-service.XXXXXX)
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

skip() {
	echo "SKIP: $*" >&2
	exit 77
}

# wait_until SECONDS COMMAND...: polls COMMAND until it succeeds or the
# deadline passes.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.05 # poll interval, bounded by the deadline above
	done
}

# start_daemon NAME [FLAGS...]: rmad on $T/NAME.sock, a free UCX port,
# logs in $T/NAME.log; returns once it says ready. Sets NAME_PID and
# NAME_PORT.
start_daemon() {
	local name=$1 pid port
	shift
	mkfifo "$T/$name.ready"
	"$RMAD_BIN" --socket "$T/$name.sock" --listen 127.0.0.1:0 \
		--ready-fd 3 --log-level info --connect-timeout 2 "$@" \
		3>"$T/$name.ready" 2>"$T/$name.log" &
	pid=$!
	PIDS+=("$pid")
	timeout 20 head -c 6 "$T/$name.ready" >/dev/null ||
		fail "$name not ready: $(cat "$T/$name.log")"
	port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
		"$T/$name.log" | head -n 1)
	[ -n "$port" ] || fail "$name: no listen port in its log"
	eval "${name}_PID=$pid ${name}_PORT=$port"
}

# json_ok FILE: valid JSON, one document per line or one in all, each
# with schema_version 1 first and no integer a double cannot hold (64-bit
# values are strings); checked when python3 is there.
json_ok() {
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$1" <<'PY' || fail "bad JSON in $1: $(cat "$1")"
import json, sys
text = open(sys.argv[1]).read()
try:
    docs = [json.loads(text)]
except ValueError:
    docs = [json.loads(l) for l in text.splitlines() if l.strip()]
assert docs, "no document"
def walk(v):
    if isinstance(v, bool):
        return
    if isinstance(v, int):
        assert abs(v) < 2**53, "integer %d is not exact in a double" % v
    elif isinstance(v, dict):
        for x in v.values():
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
for d in docs:
    assert list(d)[0] == "schema_version", "schema_version not first"
    assert d["schema_version"] == 1, "schema_version %r" % d["schema_version"]
    walk(d)
PY
	fi
}

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rmactl between two real daemons on loopback: expose, put, get, status,
# and the errors an operator sees. Every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
T=$(mktemp -d /tmp/rmad-cli.XXXXXX)
PIDS=()

. "$(dirname "$0")/lib.sh"
trap lib_cleanup EXIT

start_daemon a
start_daemon b

head -c 300000 /dev/urandom >"$T/data"
head -c 4096 /dev/urandom >"$T/fill"

# expose on a, filled from a file
"$RMACTL" --socket "$T/a.sock" expose --size 1M --fill "$T/fill" \
	--descriptor-out "$T/desc" --dump-on-exit "$T/dump" &
EXPOSE=$!
PIDS+=($EXPOSE)
wait_until 10 test -s "$T/desc" || fail "no descriptor"
grep -q '^rma1:' "$T/desc" || fail "descriptor format"
# a descriptor is a capability: only its owner may read the file
[ "$(stat -c %a "$T/desc")" = 600 ] || fail "descriptor file mode $(stat -c %a "$T/desc")"

# the fill is visible remotely
"$RMACTL" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --length 4K --out "$T/fill.back"
cmp "$T/fill" "$T/fill.back" || fail "fill differs"

EXAMPLE_PUT=${EXAMPLE_PUT:?}

# put at an odd offset, get it back to a file and to stdout
"$RMACTL" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 12345 "$T/data"
"$RMACTL" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 12345 --length 300000 --out "$T/back"
cmp "$T/data" "$T/back" || fail "get --out differs"
"$RMACTL" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 12345 --length 300000 >"$T/back2"
cmp "$T/data" "$T/back2" || fail "get to stdout differs"

# the README's example program
RMAD_SOCKET="$T/b.sock" "$EXAMPLE_PUT" "127.0.0.1:$a_PORT" "$(cat "$T/desc")" >"$T/example.out"
grep -q "^put: success$" "$T/example.out" || fail "example: $(cat "$T/example.out")"
grep -q "^read back: hello, remote memory$" "$T/example.out" || fail "example read back"

# status, human and JSON
"$RMACTL" --socket "$T/b.sock" status >"$T/status"
grep -q "127.0.0.1:$a_PORT" "$T/status" || fail "status lacks the peer"
"$RMACTL" --socket "$T/b.sock" status --json >"$T/status.json"
grep -q '"daemon_id"' "$T/status.json" || fail "status --json"
grep -q '"ucx_version": *"1\.' "$T/status.json" || fail "status --json ucx"
if command -v python3 >/dev/null; then
	# schema version first; 64-bit integers as strings, enums as the
	# tables' words (issue 14 item 9)
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert list(j)[0] == "schema_version" and j["schema_version"] == 1
assert j["peers"][0]["state"] == "up", j["peers"][0]["state"]
assert isinstance(j["uptime_ms"], str) and int(j["uptime_ms"]) >= 0
assert isinstance(j["counters"]["ops_put"], str)
assert int(j["counters"]["bytes_put"]) >= 300000
assert isinstance(j["pid"], int)
' "$T/status.json" || fail "status --json: $(cat "$T/status.json")"
fi

expect_error() { # want-exit-code, then the command
	local want=$1 rc=0; shift
	"$@" 2>"$T/err" >/dev/null || rc=$?
	[ "$rc" -eq "$want" ] || fail "exit $rc, want $want: $* ($(cat "$T/err"))"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "want one error line: $(cat "$T/err")"
}

# out of bounds
expect_error 65 "$RMACTL" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 1M "$T/fill"
grep -q "out of bounds" "$T/err" || fail "oob message: $(cat "$T/err")"
expect_error 65 "$RMACTL" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --offset 1000000 --length 100000
# bad descriptor
echo "rma1:0000" >"$T/bad"
expect_error 65 "$RMACTL" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/bad" "$T/fill"
# unreachable peer
expect_error 68 "$RMACTL" --socket "$T/b.sock" put --peer "127.0.0.1:$(free_port)" \
	--descriptor "$T/desc" "$T/fill"
# no daemon: a socket that never existed is said to be missing, not
# "daemon gone"; one left by a daemon that exited is refused
expect_error 69 "$RMACTL" --socket "$T/nobody.sock" status
grep -q "socket $T/nobody.sock does not exist" "$T/err" ||
	fail "missing socket: $(cat "$T/err")"
grep -q "daemon gone" "$T/err" && fail "missing socket: $(cat "$T/err")"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
	"$T/left.sock"
expect_error 69 "$RMACTL" --socket "$T/left.sock" status
grep -q "no daemon at $T/left.sock: Connection refused" "$T/err" ||
	fail "left socket: $(cat "$T/err")"
# EACCES (not for root, who passes every permission check): the hint
# names group rma
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	expect_error 77 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$RMACTL" --socket "$T/a.sock" status
	grep -q "Permission denied.*usermod -aG rma" "$T/err" ||
		fail "EACCES: $(cat "$T/err")"
fi
# an unknown flag: one line and a hint, not the help (EX_USAGE)
expect_error 64 "$RMAD" --x
grep -qx "rmad: unknown option '--x'; see rmad --help" "$T/err" ||
	fail "rmad --x: $(cat "$T/err")"
expect_error 64 "$RMAD" --socket
grep -qx "rmad: option '--socket' needs a value; see rmad --help" "$T/err" ||
	fail "rmad --socket: $(cat "$T/err")"
expect_error 64 "$RMACTL" --x status
grep -qx "rmactl: unknown option --x; see rmactl --help" "$T/err" ||
	fail "rmactl --x: $(cat "$T/err")"
expect_error 64 "$RMACTL" --socket "$T/b.sock" status --x
grep -q "unknown option --x; see rmactl status --help" "$T/err" ||
	fail "rmactl status --x: $(cat "$T/err")"
# usage
expect_error 64 "$RMACTL" --socket "$T/b.sock" put --descriptor "$T/desc"
# rmad: configuration errors are EX_CONFIG (78), one line, found by
# --check-config: a directory as --config, a socket_group this host lacks
expect_error 78 "$RMAD" --config "$T" --check-config
grep -q "is a directory" "$T/err" || fail "--config DIR: $(cat "$T/err")"
expect_error 78 "$RMAD" --socket-group rmad-no-such-group-i14 --check-config
grep -q "socket_group: no group" "$T/err" || fail "socket_group: $(cat "$T/err")"
"$RMAD" --socket-group "$(id -gn)" --check-config >/dev/null ||
	fail "--check-config refused the caller's own group"
# input files that cannot be opened: EX_NOINPUT (66)
expect_error 66 "$RMACTL" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" "$T/missing"
grep -q "cannot open $T/missing: No such file" "$T/err" || fail "66 message: $(cat "$T/err")"
expect_error 66 "$RMACTL" --socket "$T/b.sock" put --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" "$T"
grep -q "Is a directory" "$T/err" || fail "66 message: $(cat "$T/err")"
expect_error 66 "$RMACTL" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/missing" --length 1
expect_error 66 "$RMACTL" --socket "$T/b.sock" expose --size 4K --fill "$T/missing"
# output files that cannot be written: EX_CANTCREAT (73)
expect_error 73 "$RMACTL" --socket "$T/b.sock" get --peer "127.0.0.1:$a_PORT" \
	--descriptor "$T/desc" --length 4K --out "$T/nodir/out"
grep -q "cannot write $T/nodir/out" "$T/err" || fail "73 message: $(cat "$T/err")"
expect_error 73 "$RMACTL" --socket "$T/b.sock" expose --size 4K \
	--descriptor-out "$T/nodir/desc"

# wait: at once for what is there, 75 with one line after the timeout
"$RMACTL" --socket "$T/b.sock" wait --timeout 5 --peer "127.0.0.1:$a_PORT" ||
	fail "wait for a daemon and a peer that are up"
"$RMACTL" wait --file "$T/desc" --timeout 5 || fail "wait for a descriptor that is there"
expect_error 75 "$RMACTL" --socket "$T/nobody.sock" wait --timeout 0.3
grep -q "timed out after 0.3 s: daemon: .*nobody.sock" "$T/err" || fail "wait message: $(cat "$T/err")"
expect_error 75 "$RMACTL" --socket "$T/b.sock" wait --timeout 0.5 --peer "127.0.0.1:$(free_port)"
grep -q "peer unreachable" "$T/err" || fail "wait --peer message: $(cat "$T/err")"
expect_error 75 "$RMACTL" wait --file "$T/none" --timeout 0.2
expect_error 64 "$RMACTL" wait --peer nowhere
# a file that appears while waiting
( "$RMACTL" wait --file "$T/later" --timeout 10 && touch "$T/later.seen" ) &
WAITER=$!
echo x >"$T/later"
wait "$WAITER" || fail "wait --file missed a file written while it waited"
[ -e "$T/later.seen" ] || fail "wait --file"

# expose dumps the final contents on SIGTERM and exits 0
kill -TERM "$EXPOSE"
rc=0; wait "$EXPOSE" || rc=$?
[ "$rc" -eq 0 ] || fail "expose exit $rc"
cmp -n 4075 -i 21:21 "$T/dump" "$T/fill" || fail "dump lacks the fill"
head -c 20 "$T/dump" | grep -q "hello, remote memory" || fail "dump lacks the example's put"
cmp -n 300000 -i 12345:0 "$T/dump" "$T/data" || fail "dump lacks the put"
[ "$(stat -c %s "$T/dump")" -eq 1048576 ] || fail "dump size"

echo "cli: all checks passed"

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rmactl atomic and read-only descriptors between real daemons on
# loopback (and within one daemon): values, errors, exit codes, and that
# a refused operation touches nothing. RMAD_PROTOCOL=ucx runs the daemons
# with rma_protocol = ucx (atomics then still go through rmad's messages).
# Every wait has a deadline.
set -euo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
T=$(mktemp -d /tmp/rmad-atomic.XXXXXX)
PIDS=()

. "$(dirname "$0")/lib.sh"
trap lib_cleanup EXIT

PROTO=()
if [ -n "${RMAD_PROTOCOL:-}" ]; then
	PROTO=(--rma-protocol "$RMAD_PROTOCOL" --rma-protocol-unchecked)
fi

start_daemon a "${PROTO[@]}"
start_daemon b "${PROTO[@]}"

# 64 bytes of 0x00, then 0x11.. pattern; the word at 8 holds 5
python3 -c 'import sys,struct; sys.stdout.buffer.write(bytes(8)+struct.pack("<Q",5)+bytes(48))' >"$T/fill"
"$RMACTL" --socket "$T/a.sock" expose --size 4K --fill "$T/fill" \
	--descriptor-out "$T/desc" --read-only-descriptor-out "$T/ro" \
	--dump-on-exit "$T/dump" &
EXPOSE=$!
PIDS+=($EXPOSE)
wait_until 10 test -s "$T/desc" || fail "no descriptor"
test -s "$T/ro" || fail "no read-only descriptor"
grep -q '^rmar:' "$T/ro" || fail "read-only descriptor format: $(cat "$T/ro")"
cmp -s "$T/desc" "$T/ro" && fail "read-only descriptor equals the full one"

A="127.0.0.1:$a_PORT"
at() { # socket descriptor args...: prints the old value
	local sock=$1 desc=$2; shift 2
	"$RMACTL" --socket "$T/$sock.sock" atomic --peer "$A" --descriptor "$desc" "$@"
}
expect() { # want got what
	[ "$1" = "$2" ] || fail "$3: want $1, got $2"
}

# from b (between daemons) and from a itself (the same-daemon path)
for s in b a; do
	expect 5 "$(at $s "$T/desc" --offset 8 --op fetch-add --value 10)" "$s fetch-add"
	expect 15 "$(at $s "$T/desc" --offset 8 --op add --value -5)" "$s add -5"
	expect 10 "$(at $s "$T/desc" --offset 8 --op cswap --value 99 --compare 7)" "$s cswap miss"
	expect 10 "$(at $s "$T/desc" --offset 8 --op cswap --value 5 --compare 10)" "$s cswap hit"
	expect 5 "$(at $s "$T/desc" --offset 8 --op swap --value 0xff)" "$s swap"
	expect 255 "$(at $s "$T/desc" --offset 8 --op and --value 0x0f)" "$s and"
	expect 15 "$(at $s "$T/desc" --offset 8 --op or --value 0x30)" "$s or"
	expect 63 "$(at $s "$T/desc" --offset 8 --op xor --value 0x3f)" "$s xor"
	expect 0 "$(at $s "$T/desc" --offset 8 --op fetch-or --value 5)" "$s fetch-or"
	expect 5 "$(at $s "$T/desc" --offset 8 --op fetch-xor --value 1)" "$s fetch-xor"
	expect 4 "$(at $s "$T/desc" --offset 8 --op fetch-and --value 0)" "$s fetch-and"
	expect 0 "$(at $s "$T/desc" --offset 8 --op swap --value 5)" "$s swap back"
	# 32-bit words: the low half of the word at 8 (little-endian)
	expect 5 "$(at $s "$T/desc" --offset 8 --width 32 --op fetch-add --value 0xffffffff)" "$s 32-bit wrap"
	# no carry into the high half
	expect 0 "$(at $s "$T/desc" --offset 12 --width 32 --op swap --value 0)" "$s 32-bit high half"
	expect 4 "$(at $s "$T/desc" --offset 8 --op swap --value 5)" "$s reset"
done

# misaligned or outside: a clear error, exit codes as for put/get, and
# nothing touched
rc=0; at b "$T/desc" --offset 9 --op add --value 1 2>"$T/err" || rc=$?
[ $rc -eq 64 ] || fail "misaligned: exit $rc"
grep -q "aligned" "$T/err" || fail "misaligned: $(cat "$T/err")"
rc=0; at b "$T/desc" --offset 4096 --op add --value 1 2>"$T/err" || rc=$?
[ $rc -eq 65 ] || fail "outside: exit $rc ($(cat "$T/err"))"
expect 0 "$(at b "$T/desc" --offset 4092 --width 32 --op add --value 1)" "last 32-bit word"
rc=0; at b "$T/desc" --offset 8 --op cswap --value 1 2>/dev/null || rc=$?
[ $rc -eq 64 ] || fail "cswap without --compare: exit $rc"
rc=0; at b "$T/desc" --offset 8 --op frob --value 1 2>/dev/null || rc=$?
[ $rc -eq 64 ] || fail "unknown op: exit $rc"

# read-only descriptor: gets work, puts and atomics are refused with
# PERMISSION (exit 77), from another daemon and from the owner's own
"$RMACTL" --socket "$T/b.sock" get --peer "$A" --descriptor "$T/ro" \
	--offset 8 --length 8 --out "$T/word"
python3 -c 'import struct,sys; v=struct.unpack("<Q",open(sys.argv[1],"rb").read())[0]; sys.exit(v!=5)' "$T/word" ||
	fail "get through the read-only descriptor"
printf 'XXXXXXXX' >"$T/x"
for s in b a; do
	rc=0; "$RMACTL" --socket "$T/$s.sock" put --peer "$A" --descriptor "$T/ro" \
		--offset 16 "$T/x" 2>"$T/err" || rc=$?
	[ $rc -eq 77 ] || fail "$s: put through read-only: exit $rc ($(cat "$T/err"))"
	rc=0; at $s "$T/ro" --offset 8 --op add --value 1 2>"$T/err" || rc=$?
	[ $rc -eq 77 ] || fail "$s: atomic through read-only: exit $rc ($(cat "$T/err"))"
done

# forging: the read-only text with the full prefix fails its checksum;
# with the full prefix and a recomputed checksum it still carries the
# read-only secret: refused by the owner
python3 - "$T/ro" "$T/forged1" "$T/forged2" <<'PY'
import sys, zlib
ro = open(sys.argv[1]).read().strip()
body = bytes.fromhex(ro[5:])[:-4]
open(sys.argv[2], "w").write("rma1:" + ro[5:] + "\n")
crc = zlib.crc32(body) & 0xffffffff
open(sys.argv[3], "w").write("rma1:" + (body + crc.to_bytes(4, "big")).hex() + "\n")
PY
rc=0; "$RMACTL" --socket "$T/b.sock" put --peer "$A" --descriptor "$T/forged1" \
	--offset 16 "$T/x" 2>/dev/null || rc=$?
[ $rc -eq 65 ] || fail "prefix-edited read-only descriptor: exit $rc"
for s in b a; do
	rc=0; "$RMACTL" --socket "$T/$s.sock" put --peer "$A" --descriptor "$T/forged2" \
		--offset 16 "$T/x" 2>"$T/err" || rc=$?
	[ $rc -eq 77 ] || fail "$s: re-checksummed read-only descriptor: exit $rc ($(cat "$T/err"))"
	rc=0; at $s "$T/forged2" --offset 8 --op swap --value 1 2>/dev/null || rc=$?
	[ $rc -eq 77 ] || fail "$s: atomic, re-checksummed read-only: exit $rc"
done

# counted: atomics issued (b) and served for other daemons (a)
"$RMACTL" --socket "$T/b.sock" status --json | python3 -c '
import json, sys
k = json.load(sys.stdin)["counters"]
sys.exit(0 if int(k["ops_atomic"]) >= 15 else 1)' || fail "b: ops_atomic"
"$RMACTL" --socket "$T/a.sock" status --json | python3 -c '
import json, sys
k = json.load(sys.stdin)["counters"]
sys.exit(0 if int(k["target_atomics"]) >= 15 and int(k["target_refused"]) >= 1 else 1)' ||
	fail "a: target_atomics"
# (through a file: grep -q closing a pipe early fails it under pipefail)
"$RMACTL" --socket "$T/a.sock" status >"$T/status.txt"
grep -q "atomic [1-9]" "$T/status.txt" || fail "status text"

# nothing refused was written: the region is the fill, word 8 = 5
kill -TERM $EXPOSE
wait $EXPOSE || fail "expose exit"
cmp -n 64 "$T/fill" "$T/dump" || fail "refused operations changed the region"
echo ok

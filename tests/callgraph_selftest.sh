#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/callgraph.py on tiny graphs: quiet without cycles, fails on a new
# cycle or a grown one (naming the edge and the cycle it closes), fails on
# a stale allowed edge, and --update only ever shrinks the list.  Last, the
# graph from real objects: two files that call each other are a cycle.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cg="python3 $here/callgraph.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() { # expect RC NEEDLE CMD...: exit code RC and NEEDLE in the output
	want=$1 needle=$2
	shift 2
	rc=0
	"$@" >"$tmp/out" 2>&1 || rc=$?
	if [ "$rc" -ne "$want" ] || ! grep -qF -- "$needle" "$tmp/out"; then
		echo "callgraph_selftest: '$*': rc $rc (want $want), wanted '$needle' in:"
		cat "$tmp/out"
		fails=$((fails + 1))
	fi
}

printf 'a -> b\nb -> c\n' >"$tmp/line"
: >"$tmp/none"
expect 0 "0 cycle(s)" $cg --allowed "$tmp/none" --edges "$tmp/line"

# A new cycle: the edge, the cycle it closes, and the advice.
printf 'a -> b\nb -> c\nc -> a\n' >"$tmp/ring"
expect 1 "new edge on a cycle: c -> a" $cg --allowed "$tmp/none" --edges "$tmp/ring"
expect 1 "it closes: c -> a -> b -> c" $cg --allowed "$tmp/none" --edges "$tmp/ring"
expect 1 "Remove the cycle instead" $cg --allowed "$tmp/none" --edges "$tmp/ring"

# A known two-file cycle is allowed; a third file joining it is not.
printf 'a -> b\nb -> a\n' >"$tmp/pair"
expect 0 "none new" $cg --allowed "$tmp/pair" --edges "$tmp/pair"
printf 'a -> b\nb -> a\nb -> c\nc -> a\n' >"$tmp/grown"
expect 1 "it closes: c -> a -> b -> c" $cg --allowed "$tmp/pair" --edges "$tmp/grown"
expect 1 "SCC of 3 files" $cg --allowed "$tmp/pair" --edges "$tmp/grown"

# --update refuses to grow the list and leaves it as it was.
cp "$tmp/pair" "$tmp/allowed"
expect 1 "new edge on a cycle: b -> c" $cg --update --allowed "$tmp/allowed" --edges "$tmp/grown"
cmp -s "$tmp/pair" "$tmp/allowed" || { echo "callgraph_selftest: --update grew the list"; fails=$((fails + 1)); }

# A cycle broken: the stale line fails the check until --update drops it.
expect 1 "allowed edge b -> a is gone" $cg --allowed "$tmp/allowed" --edges "$tmp/line"
expect 0 "removed; 0 left" $cg --update --allowed "$tmp/allowed" --edges "$tmp/line"
expect 0 "none new" $cg --allowed "$tmp/allowed" --edges "$tmp/line"

# A group (the files of one subsystem) is one node: calls inside it are
# no cycle, a cycle through it and a file outside still is.
printf 'group g: a b\n' >"$tmp/group"
expect 0 "none new" $cg --allowed "$tmp/group" --edges "$tmp/pair"
printf 'a -> b\nb -> a\nb -> c\nc -> a\n' >"$tmp/through"
expect 1 "new edge on a cycle: c -> g" $cg --allowed "$tmp/group" --edges "$tmp/through"
printf 'group g: a x\n' >"$tmp/badgroup"
expect 1 "group g names x, not a file of the graph" $cg --allowed "$tmp/badgroup" --edges "$tmp/pair"
cp "$tmp/group" "$tmp/allowed2"
printf 'g -> c\nc -> g\n' >>"$tmp/allowed2"
expect 0 "removed; 0 left" $cg --update --allowed "$tmp/allowed2" --edges "$tmp/pair"
expect 0 "none new" $cg --allowed "$tmp/allowed2" --edges "$tmp/pair"
grep -qx 'group g: a b' "$tmp/allowed2" || { echo "callgraph_selftest: --update lost the group"; fails=$((fails + 1)); }

# From objects: x.o and y.o call each other, z.o only calls down.
if command -v "${CC:-cc}" >/dev/null 2>&1 && command -v "${NM:-nm}" >/dev/null 2>&1; then
	printf 'void y(void);\nvoid x(void) { y(); }\n' >"$tmp/x.c"
	printf 'void x(void);\nvoid y(void) { x(); }\n' >"$tmp/y.c"
	printf 'void y(void);\nvoid z(void) { y(); }\n' >"$tmp/z.c"
	for f in x y z; do
		"${CC:-cc}" -c -o "$tmp/$f.c.o" "$tmp/$f.c"
	done
	expect 1 "new edge on a cycle: x -> y" $cg --allowed "$tmp/none" "$tmp/x.c.o" "$tmp/y.c.o" "$tmp/z.c.o"
	expect 1 "SCC of 2 files, 2 edges inside (1 pairs both ways): x y" \
		$cg --allowed "$tmp/none" "$tmp/x.c.o" "$tmp/y.c.o" "$tmp/z.c.o"
	printf 'x -> y\ny -> x\n' >"$tmp/xy"
	expect 0 "3 files, 3 cross-file edges" $cg --allowed "$tmp/xy" "$tmp/x.c.o" "$tmp/y.c.o" "$tmp/z.c.o"
fi

[ "$fails" -eq 0 ] || { echo "callgraph_selftest: $fails check(s) failed"; exit 1; }
echo "callgraph_selftest: all checks passed"

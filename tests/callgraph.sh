#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# No new cycle between the daemon's files: the file call graph of daemon/
# (from nm of the objects the build made, tests/callgraph.py) against the
# edges tests/callgraph.allowed still lets sit on a cycle.  That list only
# shrinks; its "group NAME: FILE..." lines make one subsystem's files one
# node (callgraph.py).  After a refactor that removed cycle edges:
#   tests/callgraph.sh --update BUILDDIR
# Usage: callgraph.sh [--update | --explain] BUILDDIR   (SRCDIR defaults to this tree)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
opt=""
case "${1:-}" in
--update | --explain)
	opt=$1
	shift
	;;
esac
build=${1:?usage: callgraph.sh [--update] BUILDDIR}
lib="$build/daemon/librmadcore.a"
exe_objs="$build/daemon/rmad.p"
for p in "$lib" "$exe_objs"; do
	[ -e "$p" ] || { echo "callgraph: $p missing; build first" >&2; exit 1; }
done
if ! command -v "${NM:-nm}" >/dev/null 2>&1; then
	echo "callgraph: no nm, skipped"
	exit 77
fi
exec python3 "$here/callgraph.py" $opt \
	--allowed "${SRCDIR:-$(dirname "$here")}/tests/callgraph.allowed" "$lib" "$exe_objs"

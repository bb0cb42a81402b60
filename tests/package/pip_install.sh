#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# What a Python user does: rmad installed (here: meson install into a
# scratch destdir, its rma.pc pointed there), then in a fresh venv of an
# interpreter other than Debian's (pyenv's, when there is one) the
# README's block that runs pip install --no-build-isolation ./python with
# Debian's python3-mesonpy on PYTHONPATH (no package index here), then
# examples/put.py from outside the source tree,
# against two real daemons. The extension must link the installed
# librma.so.0, not carry the client code. Skipped (77) when venv,
# meson-python, a compiler, pkg-config or Python.h is missing.
. "$(dirname "$0")/../service/lib.sh"

: "${MESON:?}" "${BUILDDIR:?}" "${SRCDIR:?}" "${RMAD_BIN:?}" "${RMACTL_BIN:?}"
command -v cc >/dev/null || skip "no C compiler (apt-get install gcc)"
command -v pkg-config >/dev/null || skip "no pkg-config (apt-get install pkg-config)"

# The interpreter: $RMA_PIP_PYTHON, else python3 on PATH unless it is
# Debian's (/usr), else Debian's.
interp_of() { # PYTHON: its real executable and prefix, or nothing
	"$1" -c 'import os, sys; print(os.path.realpath(sys.executable), sys.base_prefix)' 2>/dev/null
}
PY=""
for cand in ${RMA_PIP_PYTHON:-} python3 /usr/bin/python3; do
	command -v "$cand" >/dev/null || continue
	read -r exe prefix < <(interp_of "$cand") || continue
	if [ -n "${RMA_PIP_PYTHON:-}" ] || [ "$prefix" != /usr ] || [ "$cand" = /usr/bin/python3 ]; then
		PY=$exe
		break
	fi
done
[ -n "$PY" ] || skip "no python3"
echo "interpreter: $PY ($("$PY" -V 2>&1))"
[ -f "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] ||
	skip "no Python.h for $PY (Debian's python3: apt-get install python3-dev)"
"$PY" -m venv "$T/venv" >"$T/venv.log" 2>&1 ||
	skip "$PY cannot make a venv (Debian's python3: apt-get install python3-venv): $(tail -n 1 "$T/venv.log")"
VPY=$T/venv/bin/python

# meson-python for the build: Debian's pure-Python packages
# (python3-mesonpy and what it imports), for pip alone, by the README's
# own block; the venv stays as it was made.
for m in mesonpy pyproject_metadata packaging tomli; do
	[ -e "/usr/lib/python3/dist-packages/$m" ] ||
		skip "no /usr/lib/python3/dist-packages/$m (apt-get install python3-mesonpy)"
done
awk '
	/^ *```sh$/ { fence = 1; block = ""; next }
	fence && /^ *```$/ { fence = 0; if (block ~ /pip install --no-build-isolation/ && block ~ /PYTHONPATH=/) { printf "%s", block; found = 1; exit } next }
	fence { sub(/^  /, ""); block = block $0 "\n" }
	END { if (!found) exit 1 }
' "$SRCDIR/README.md" >"$T/readme_pip.sh" || fail "README.md has no sh block with PYTHONPATH=... pip install --no-build-isolation"

# rmad installed; pkg-config finds its librma there
D=$T/dest
"$MESON" install -C "$BUILDDIR" --no-rebuild --quiet --destdir "$D" \
	>"$T/install.log" 2>&1 || fail "meson install: $(cat "$T/install.log")"
PC=$(find "$D" -path '*/pkgconfig/rma.pc' | head -n 1)
[ -n "$PC" ] || fail "no rma.pc installed"
mkdir "$T/pc"
sed "s|^prefix=|prefix=$D|" "$PC" >"$T/pc/rma.pc"
LIBDIR=$(PKG_CONFIG_PATH=$T/pc pkg-config --variable=libdir rma)
[ -e "$LIBDIR/librma.so.0" ] || fail "no librma.so.0 in $LIBDIR"

# pip builds python/ as it is in the repository, copied so that nothing
# is written into the source tree; the README's block runs as it is, from
# the copy's top, with the venv's pip first on PATH (no package index
# here: the package needs nothing from one)
mkdir "$T/work"
cp -r "$SRCDIR/python" "$T/work/python"
rm -rf "$T/work/python/tests"
cat "$T/readme_pip.sh"
(
	cd "$T/work"
	PATH=$T/venv/bin:$PATH PKG_CONFIG_PATH=$T/pc \
		PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INDEX=1 \
		bash -euo pipefail "$T/readme_pip.sh"
) >"$T/pip.log" 2>&1 || {
	# Debian 12's meson 1.0 reads an interpreter through distutils,
	# which Python 3.12 dropped (pip with an index fetches a newer meson)
	grep -q 'is not a valid python or it is missing distutils' "$T/pip.log" &&
		skip "meson $(meson --version 2>/dev/null) cannot build for $PY (no distutils): set RMA_PIP_PYTHON to a Python up to 3.11"
	fail "pip install: $(tail -n 30 "$T/pip.log")"
}

# installed into the venv, for this interpreter, on the installed librma
MOD=$(cd "$T" && "$VPY" -c 'import rma._rma as m; print(m.__file__)' 2>"$T/import.err") ||
	fail "import rma: $(cat "$T/import.err")"
case "$MOD" in "$T/venv/"*) ;; *) fail "rma imported from $MOD, not the venv" ;; esac
# (through files: grep -q closing a pipe early fails it under pipefail)
readelf -d "$MOD" >"$T/mod.dyn"
grep -q 'NEEDED.*\[librma\.so\.0\]' "$T/mod.dyn" || fail "$MOD does not need librma.so.0"
readelf --version-info "$MOD" >"$T/mod.ver"
grep -q 'Name: RMA_0\.1 ' "$T/mod.ver" || fail "$MOD needs no RMA_0.1 symbols"
nm -D --undefined-only "$MOD" >"$T/undefined"
grep -q ' rma_connect_timeout@RMA_0\.1$' "$T/undefined" ||
	fail "$MOD does not take rma_connect_timeout from librma"
nm "$MOD" >"$T/syms" 2>&1 || true
if grep -qw client_call "$T/syms"; then
	fail "$MOD carries librma's code"
fi

# examples/put.py with the venv's python, between two real daemons
start_daemon a
start_daemon b
"$RMACTL_BIN" --socket "$T/a.sock" expose --size 64K --descriptor-out "$T/desc" \
	>"$T/expose.log" 2>&1 &
PIDS+=($!)
wait_until 10 test -s "$T/desc" || fail "no descriptor: $(cat "$T/expose.log")"
(cd "$T" && RMAD_SOCKET=$T/b.sock timeout 60 "$VPY" "$SRCDIR/examples/put.py" \
	"127.0.0.1:$a_PORT" "$(cat "$T/desc")") >"$T/put.out" 2>&1 ||
	fail "examples/put.py: $(cat "$T/put.out")"
grep -q '^put: success$' "$T/put.out" || fail "put.py: $(cat "$T/put.out")"
grep -q '^read back: hello, remote memory$' "$T/put.out" || fail "put.py read back: $(cat "$T/put.out")"
echo ok

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# What a Debian packager does: a release build with --prefix=/usr,
# meson install --destdir, then a .deb of that tree (dpkg-deb) checked by
# lintian. Nothing may land under /usr/local (Policy 9.1.2), the Python
# package goes to /usr/lib/python3/dist-packages, asserts are off,
# binaries are hardened (BIND_NOW, RELRO, fortified calls), librma's
# symbols are versioned and the programs link it rather than carry it.
# lintian's tags must all be ones the packaging itself settles
# (debhelper, debian/copyright, a library package split): see ALLOWED.
# Builds the project once more (release, no tests): about a minute.
. "$(dirname "$0")/lib.sh"

: "${MESON:?}" "${SRCDIR:?}"
command -v dpkg-deb >/dev/null || skip "not a Debian system (no dpkg-deb)"
command -v ninja >/dev/null || skip "no ninja (apt-get install ninja-build)"

B=$T/build
R=$T/root
"$MESON" setup "$B" "$SRCDIR" --prefix=/usr --buildtype=release \
	-Dtests=false >"$T/setup.log" 2>&1 || fail "meson setup: $(tail -n 20 "$T/setup.log")"
ninja -C "$B" >"$T/build.log" 2>&1 || fail "build: $(tail -n 30 "$T/build.log")"
"$MESON" install -C "$B" --no-rebuild --quiet --destdir "$R" \
	>"$T/install.log" 2>&1 || fail "meson install: $(cat "$T/install.log")"

# Policy 9.1.2: /usr/local is the administrator's
if [ -e "$R/usr/local" ]; then
	fail "installed under /usr/local: $(cd "$R" && find usr/local | head -n 20 | tr '\n' ' ')"
fi
(cd "$R" && find . -mindepth 1 -maxdepth 1) | sort >"$T/top"
[ "$(tr '\n' ' ' <"$T/top")" = "./etc ./usr " ] || fail "installed outside /etc and /usr: $(tr '\n' ' ' <"$T/top")"

# the Python package where Debian's python3 looks, if it was built
PYSITE=$R/usr/lib/python3/dist-packages/rma
"$MESON" introspect "$B" --targets >"$T/targets.json"
if ! grep -q '"name": "_rma\.' "$T/targets.json"; then
	echo "note: the Python package was not built (python3-dev missing?)"
else
	[ -f "$PYSITE/__init__.py" ] || fail "no rma/__init__.py in /usr/lib/python3/dist-packages: $(cd "$R" && find . -name '__init__.py')"
	ls "$PYSITE"/_rma.*.so >/dev/null 2>&1 || fail "no extension in $PYSITE"
	(cd "$T" && PYTHONPATH=$R/usr/lib/python3/dist-packages \
		LD_LIBRARY_PATH=$R/usr/lib/$(gcc -print-multiarch 2>/dev/null) \
		/usr/bin/python3 -c 'import rma') 2>"$T/import.err" ||
		fail "import rma from the installed tree: $(cat "$T/import.err")"
fi

# release: asserts off; hardening
"$MESON" introspect "$B" --buildoptions >"$T/options.json"
python3 - "$T/options.json" <<'PY' || fail "build options: $(cat "$T/options.err" 2>/dev/null)"
import json, sys
o = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}
assert o["b_ndebug"] == "if-release", o["b_ndebug"]
assert o["buildtype"] == "release", o["buildtype"]
assert o["hardening"] is True, o["hardening"]
PY
grep -q -- '-DNDEBUG' "$B/build.ninja" || fail "a release build keeps asserts (no -DNDEBUG)"
RMAD=$R/usr/sbin/rmad
RMACTL=$R/usr/bin/rmactl
LIB=$(find "$R/usr/lib" -name 'librma.so.0.*' | head -n 1)
[ -n "$LIB" ] || fail "no librma.so.0.* installed"
for f in "$RMAD" "$RMACTL" "$LIB" "$PYSITE"/_rma.*.so; do
	[ -f "$f" ] || continue
	readelf -d "$f" >"$T/dyn"
	grep -q 'BIND_NOW\|Flags:.* NOW' "$T/dyn" || fail "${f#"$R"}: not linked -z now"
	readelf -lW "$f" >"$T/phdr"
	grep -q GNU_RELRO "$T/phdr" || fail "${f#"$R"}: no RELRO"
done
# (through files: grep -q closing a pipe early fails it under pipefail)
readelf -sW "$RMAD" >"$T/rmad.syms"
grep -q '__[a-z_]*_chk@' "$T/rmad.syms" || fail "rmad calls no fortified function (-D_FORTIFY_SOURCE)"
[ "$(stat -c %a "$LIB")" = 644 ] || fail "${LIB#"$R"} mode $(stat -c %a "$LIB"), not 644"

# the library others link
readelf --version-info "$LIB" >"$T/lib.ver"
grep -q 'Name: RMA_0\.1$' "$T/lib.ver" || fail "librma: no version RMA_0.1"
readelf -d "$RMACTL" >"$T/rmactl.dyn"
grep -q 'NEEDED.*\[librma\.so\.0\]' "$T/rmactl.dyn" || fail "rmactl does not link librma.so.0"
nm "$RMACTL" >"$T/rmactl.syms" 2>&1 || true
if grep -qw client_call "$T/rmactl.syms"; then
	fail "rmactl carries librma's code"
fi
grep -qx 'Requires.private: libprotobuf-c' "$R/usr/lib/"*/pkgconfig/rma.pc ||
	fail "rma.pc: no Requires.private: libprotobuf-c"

if ! command -v lintian >/dev/null; then
	echo "ok (lintian not installed: apt-get install lintian to check the .deb)"
	exit 0
fi

# a .deb of the tree, depending on the README's runtime packages and
# libc6 (on every system, so not in the README; dpkg-shlibdeps adds it)
cp -a "$R" "$T/deb"
mkdir "$T/deb/DEBIAN"
depends=$(readme_runtime_packages "$SRCDIR/README.md" | paste -sd, | sed 's/,/, /g')
cat >"$T/deb/DEBIAN/control" <<EOF
Package: rmad
Version: 0.1.0-1
Architecture: $(dpkg --print-architecture)
Maintainer: rmad tests <rmad-tests@example.org>
Depends: libc6, python3, $depends
Section: net
Priority: optional
Description: remote memory access daemon
 rmad does remote memory access for the processes on its host, over UCX,
 for clients of librma, rmactl and the Python package rma.
EOF
(cd "$T/deb" && find etc -type f | sed 's|^|/|') >"$T/deb/DEBIAN/conffiles"
dpkg-deb --root-owner-group --build "$T/deb" "$T/rmad.deb" >"$T/dpkg-deb.log" 2>&1 ||
	fail "dpkg-deb: $(cat "$T/dpkg-deb.log")"

# Tags the packaging settles, not this source tree:
ALLOWED=(
	uncompressed-manual-page          # dh_compress
	unstripped-binary-or-object       # dh_strip (and the -dbgsym package)
	no-md5sums-control-file           # dh_md5sums
	no-shlibs no-symbols-control-file lacks-ldconfig-trigger # dh_makeshlibs
	no-copyright-file no-changelog    # debian/copyright, debian/changelog
	extra-license-file                # LICENSE in /usr/share/doc/rmad: debian/copyright replaces it
	package-name-doesnt-match-sonames # the split into librma0, librma-dev,
	link-to-shared-library-in-wrong-package # rmad and python3-rma
	# rmad is systemd-only by design (Type=notify, the watchdog, the fd
	# store): no init.d script
	package-supports-alternative-init-but-no-init.d-script
	# the extension's few string calls have sizes the compiler proves, so
	# none needs a _chk variant (built with -D_FORTIFY_SOURCE=2, checked
	# for rmad above)
	hardening-no-fortify-functions
)
# exit 1: lintian failed; the tags are judged below, not by --fail-on
rc=0
lintian --fail-on none --tag-display-limit 0 -I "$T/rmad.deb" \
	>"$T/lintian.out" 2>"$T/lintian.err" || rc=$?
[ "$rc" -eq 0 ] || fail "lintian exited $rc: $(grep -v 'root privileges' "$T/lintian.err" | head -n 5)"
grep -E '^[EWI]: ' "$T/lintian.out" >"$T/tags" || true
pattern=$(printf ' %s( |$)|' "${ALLOWED[@]}")
if grep -vE "^[EWI]: [^ ]+:(${pattern%|})" "$T/tags" >"$T/bad"; then
	fail "lintian tags to fix upstream: $(cat "$T/bad")"
fi
echo "ok: lintian: $(cut -d ' ' -f 3 "$T/tags" | sort | uniq -c | awk '{ printf "%s x%s, ", $2, $1 }')all settled by packaging"

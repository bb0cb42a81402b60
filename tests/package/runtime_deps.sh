#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The README's list of runtime packages is the one the installed binaries
# need: every library that rmad, rmactl, librma.so.0 and the Python
# extension name in NEEDED (readelf -d), found as the loader finds it
# (ldd) and mapped to its Debian package (dpkg -S), is on the README's
# apt-get line unless every Debian system has it (an Essential package or
# one they depend on: libc6); and the line names nothing they do not
# need.
. "$(dirname "$0")/lib.sh"

: "${MESON:?}" "${BUILDDIR:?}" "${SRCDIR:?}"
command -v dpkg-query >/dev/null || skip "not a Debian system (no dpkg-query)"
command -v readelf >/dev/null || skip "no readelf (apt-get install binutils)"

D=$T/dest
"$MESON" install -C "$BUILDDIR" --no-rebuild --quiet --destdir "$D" \
	>"$T/install.log" 2>&1 || fail "meson install: $(cat "$T/install.log")"
LIB=$(find "$D" -name 'librma.so.0' | head -n 1)
[ -n "$LIB" ] || fail "no librma.so.0 installed"
BINS=$(find "$D" -type f \( -path '*/sbin/rmad' -o -path '*/bin/rmactl' \
	-o -name 'librma.so.0.*' -o -name '_rma*.so' \))
[ "$(echo "$BINS" | wc -l)" -ge 3 ] || fail "installed binaries: $BINS"

# package_of PATH: the package that installed a library (usrmerge: dpkg
# may know it under /lib or under /usr/lib)
package_of() {
	local p cand
	for p in "$1" "$(readlink -f "$1")"; do
		for cand in "$p" "${p#/usr}" "/usr$p"; do
			dpkg-query -S "$cand" 2>/dev/null | sed -n '1s/:.*//p' | grep . && return 0
		done
	done
	return 1
}

: >"$T/needed"
for bin in $BINS; do
	LD_LIBRARY_PATH=$(dirname "$LIB") ldd "$bin" >"$T/ldd" 2>&1 ||
		fail "ldd $bin: $(cat "$T/ldd")"
	for so in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		path=$(awk -v so="$so" '$1 == so && $2 == "=>" { print $3 }' "$T/ldd")
		case "$so" in ld-linux*) path=$(awk -v so="$so" 'index($1, "/" so) { print $1 }' "$T/ldd") ;; esac
		[ -n "$path" ] && [ "$path" != "not" ] || fail "${bin#"$D"}: $so not found"
		case "$path" in "$D"/*) continue ;; esac # ours
		pkg=$(package_of "$path") || fail "${bin#"$D"}: no package has $path ($so)"
		echo "$pkg ${bin##*/} $so" >>"$T/needed"
	done
done

cut -d ' ' -f 1 "$T/needed" | sort -u >"$T/required"
# on every system: the Essential packages and what they depend on
dpkg-query -W -f='${Essential}|${Package}, ${Pre-Depends}, ${Depends}\n' |
	awk -F '|' '$1 == "yes" { print $2 }' | tr ',' '\n' |
	sed 's/[(|].*//; s/:.*//; s/ //g' | grep . | sort -u >"$T/base"
readme_runtime_packages "$SRCDIR/README.md" >"$T/readme"
[ -s "$T/readme" ] || fail "README.md has no '# the runtime libraries' apt-get line"
missing=$(comm -23 "$T/required" "$T/readme" | comm -23 - "$T/base" | tr '\n' ' ')
extra=$(comm -13 "$T/required" "$T/readme" | tr '\n' ' ')
if [ -n "$missing$extra" ]; then
	echo "what the binaries need (package, binary, library):" >&2
	sort -u "$T/needed" >&2
	fail "README.md's runtime line lacks: ${missing:-nothing}; names what nothing needs: ${extra:-nothing}"
fi
echo "ok: $(tr '\n' ' ' <"$T/readme")(and $(comm -12 "$T/required" "$T/base" | tr '\n' ' ')on every system)"

#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# meson install into a scratch destdir: every file where it belongs, then
# examples/put.c built against the installed library through pkg-config
# only, and librma.so exporting nothing but rma_* symbols.
. "$(dirname "$0")/lib.sh"

: "${MESON:?}" "${BUILDDIR:?}" "${SRCDIR:?}"
D=$T/dest
"$MESON" install -C "$BUILDDIR" --no-rebuild --quiet --destdir "$D" \
	>"$T/install.log" 2>&1 || fail "meson install: $(cat "$T/install.log")"

# one file of each kind, found wherever the prefix put it
find_one() { # NAME PATH-REGEX
	local f
	f=$(find "$D" -path "$2" | head -n 1)
	[ -n "$f" ] || fail "$1 not installed (no $2 under the destdir)"
	echo "$f"
}
RMAD=$(find_one rmad '*/sbin/rmad')
find_one rmactl '*/bin/rmactl' >/dev/null
find_one rma.h '*/include/rma.h' >/dev/null
PC=$(find_one rma.pc '*/pkgconfig/rma.pc')
find_one licence '*/share/doc/rmad/LICENSE' >/dev/null
find_one README '*/share/doc/rmad/README.md' >/dev/null
find_one 'example config' '*/share/doc/rmad/rmad.conf.example' >/dev/null
LIB=$(find_one librma '*/librma.so.0.*')
SERVICE=$(find_one rmad.service '*/systemd/system/rmad.service')
find_one rmad.socket '*/systemd/system/rmad.socket' >/dev/null
find_one sysusers '*/sysusers.d/rmad.conf' >/dev/null
find_one tmpfiles '*/tmpfiles.d/rmad.conf' >/dev/null
CONF=$(find_one rmad.conf '*/etc/rmad/rmad.conf')
for page in man8/rmad.8 man1/rmactl.1 man3/rma.3; do
	f=$(find_one "$page" "*/man/$page")
	grep -q '@VERSION@' "$f" && fail "$page: version not filled in"
	if command -v groff >/dev/null; then
		groff -man -ww -z "$f" 2>"$T/groff.out" || fail "$page: groff"
		[ ! -s "$T/groff.out" ] || fail "$page: $(cat "$T/groff.out")"
	fi
done
[ -x "$RMAD" ] || fail "rmad not executable"

# the unit names the installed daemon and config (by their final paths)
exec_start=$(sed -n 's/^ExecStart=//p' "$SERVICE")
[ "$exec_start" = "${RMAD#"$D"} --config ${CONF#"$D"}" ] ||
	fail "installed ExecStart=$exec_start, not ${RMAD#"$D"} --config ${CONF#"$D"}"
# and its reload checks that same file with that same daemon first
exec_check=$(sed -n 's/^ExecReload=\(.*--check-config\)$/\1/p' "$SERVICE")
[ "$exec_check" = "${RMAD#"$D"} --config ${CONF#"$D"} --check-config" ] ||
	fail "installed ExecReload=$exec_check, not ${RMAD#"$D"} --config ${CONF#"$D"} --check-config"
"$SRCDIR/tests/with_sysusers.sh" "$SRCDIR" "$RMAD" --config "$CONF" --check-config >/dev/null || fail "installed config refused"

# the library: its soname, and only rma_* exported
soname=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = librma.so.0 ] || fail "soname '$soname'"
[ -L "$(dirname "$LIB")/librma.so.0" ] || fail "no librma.so.0 link"
[ -L "$(dirname "$LIB")/librma.so" ] || fail "no librma.so link"
# each at version RMA_0.1 (client/rma.map); the version's own absolute
# symbol (type A) is no function. readelf's output goes to a file first:
# under pipefail, grep -q leaving at the match before readelf's last write
# (it writes 4 KiB at a time) failed the pipeline with readelf's SIGPIPE.
readelf --version-info "$LIB" >"$T/lib.versions"
grep -q 'Name: RMA_0\.1$' "$T/lib.versions" ||
	fail "librma defines no version RMA_0.1"
nm -D --defined-only "$LIB" | awk '$2 != "A" { print $NF }' >"$T/exports"
[ -s "$T/exports" ] || fail "librma exports nothing"
if grep -v '^rma_[a-z0-9_]*@@RMA_0\.1$' "$T/exports" >"$T/extra"; then
	fail "librma exports more than rma_*@@RMA_0.1: $(tr '\n' ' ' <"$T/extra")"
fi
grep -qx 'rma_connect@@RMA_0\.1' "$T/exports" || fail "rma_connect not exported"

# examples/put.c through pkg-config alone
export PKG_CONFIG_PATH=$(dirname "$PC")
export PKG_CONFIG_SYSROOT_DIR=$D
flags=$(pkg-config --cflags --libs rma) || fail "pkg-config rma"
case "$flags" in *"$D"*) ;; *) fail "pkg-config flags outside the destdir: $flags" ;; esac
${CC:-cc} -o "$T/put" "$SRCDIR/examples/put.c" $flags 2>"$T/cc.out" ||
	fail "examples/put.c against the installed librma: $(cat "$T/cc.out")"
readelf -d "$T/put" >"$T/put.dynamic"
grep -q 'NEEDED.*\[librma\.so\.0\]' "$T/put.dynamic" || fail "put does not need librma.so.0"
readelf --version-info "$T/put" >"$T/put.versions"
grep -q 'Name: RMA_0\.1 ' "$T/put.versions" ||
	fail "put does not need version RMA_0.1 of librma"
# it runs on the installed library (usage: exit 64 without arguments)
rc=0
LD_LIBRARY_PATH=$(dirname "$LIB") "$T/put" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 64 ] || fail "installed put exited $rc"
echo ok

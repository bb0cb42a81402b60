#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The man pages name everything there is, so they cannot fall behind:
# - rmad(8): every flag `rmad --help` lists (config_options[] and the
#   actions), each in an entry of OPTIONS that gives its default;
# - rmactl(1): every command of rmactl's table and every long option in
#   rmactl/*.c;
# - rma(3): every function rma.h declares, every rma_status_t value and
#   RMA_FLAG_*, each function in NAME too, and an alias page rma_FN.3
#   (".so man3/rma.3") built for each;
# - the keys SIGHUP applies: README's and rmad(8)'s lists are the
#   daemon's table (rmad --help marks them), and neither says one of them
#   needs a restart.
set -euo pipefail
SRC=${SRCDIR:?}
RMAD=${RMAD_BIN:?}
MANBUILD=${MAN_BUILDDIR:?}
T=$(mktemp -d /tmp/rmad-docs-complete.XXXXXX)
trap 'rm -rf "$T"' EXIT
bad=0

miss() { echo "MISSING: $*"; bad=$((bad + 1)); }

# A man page as plain text: escapes and fonts undone, requests kept.
plain() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\\(aq/'"'"'/g' "$1"
}

# ---- rmad(8) ----
plain "$SRC/man/rmad.8" >"$T/rmad.8"
# OPTIONS: one entry per .TP, its tag line(s) and body joined
sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$T/rmad.8" |
	awk '/^\.TP/ { if (e != "") print e; e = ""; next } /^\.SH/ { next } { e = e " " $0 } END { print e }' \
		>"$T/rmad.entries"
"$RMAD" --help | grep -o '^  --[a-z-]*' | sed 's/^  //' >"$T/rmad.flags"
[ "$(wc -l <"$T/rmad.flags")" -gt 25 ] || { echo "FAIL: rmad --help lists too few flags"; exit 1; }
while read -r flag; do
	entry=$(grep -e "$flag\b" "$T/rmad.entries" | grep -v -e "$flag-" | head -n 1 || true)
	if [ -z "$entry" ]; then
		# a tag may list two flags (--allow-users, --allow-groups)
		entry=$(grep -e "[ ,]$flag\( \|$\)" "$T/rmad.entries" | head -n 1 || true)
	fi
	if [ -z "$entry" ]; then
		miss "rmad.8 OPTIONS has no entry for $flag"
		continue
	fi
	# every option with a value in the file has a default to give
	case $flag in --config | --check-config | --help | --version | --ready-fd) continue ;; esac
	grep -qi 'default' <<<"$entry" || miss "rmad.8: $flag gives no default"
done <"$T/rmad.flags"

# ---- rmactl(1) ----
plain "$SRC/man/rmactl.1" >"$T/rmactl.1"
grep -ho '{"[a-z]*", *rmactl_[a-z_]*}' "$SRC"/rmactl/rmactl.c | sed 's/{"\([a-z]*\)".*/\1/' >"$T/rmactl.cmds"
[ "$(wc -l <"$T/rmactl.cmds")" -ge 10 ] || { echo "FAIL: rmactl's command table not found"; exit 1; }
while read -r cmd; do
	grep -q "^\.B $cmd\b" "$T/rmactl.1" || miss "rmactl.1 has no entry (.B $cmd) for the command $cmd"
done <"$T/rmactl.cmds"
grep -ho '{"[a-z-]*", *\(required\|no\|optional\)_argument' "$SRC"/rmactl/*.c |
	sed 's/{"\([a-z-]*\)".*/\1/' | sort -u >"$T/rmactl.opts"
while read -r opt; do
	grep -q -- "--$opt\b" "$T/rmactl.1" || miss "rmactl.1 never names --$opt"
done <"$T/rmactl.opts"

# ---- rma(3) ----
plain "$SRC/man/rma.3" >"$T/rma.3"
grep -o '\brma_[a-z_]*(' "$SRC/client/rma.h" | tr -d '(' | sort -u >"$T/rma.funcs"
grep -o '\bRMA_\(OK\|ERR_[A-Z_]*\|INPROGRESS\|FLAG_[A-Z_]*\)\b' "$SRC/client/rma.h" | sort -u >"$T/rma.names"
[ "$(wc -l <"$T/rma.funcs")" -ge 30 ] || { echo "FAIL: too few functions found in rma.h"; exit 1; }
[ "$(grep -c ERR_ "$T/rma.names")" -ge 20 ] || { echo "FAIL: too few statuses found in rma.h"; exit 1; }
sed -n '/^\.SH NAME/,/^\.SH /p' "$T/rma.3" >"$T/rma.name"
sed -n '/^\.SH DESCRIPTION/,$p' "$T/rma.3" >"$T/rma.body"
while read -r fn; do
	grep -q "\b$fn\b" "$T/rma.name" || miss "rma.3 NAME lacks $fn"
	grep -q "\b$fn\b" "$T/rma.body" || miss "rma.3 never describes $fn"
	if [ ! -f "$MANBUILD/$fn.3" ]; then
		miss "no alias page $fn.3 in $MANBUILD (man/meson.build)"
	elif [ "$(cat "$MANBUILD/$fn.3")" != ".so man3/rma.3" ]; then
		miss "$fn.3 is not '.so man3/rma.3'"
	fi
done <"$T/rma.funcs"
while read -r name; do
	grep -q "\b$name\b" "$T/rma.body" || miss "rma.3 never describes $name"
done <"$T/rma.names"
# and no alias for a function that is gone
for f in "$MANBUILD"/rma_*.3; do
	[ -e "$f" ] || continue
	grep -qx "$(basename "$f" .3)" "$T/rma.funcs" || miss "alias $(basename "$f") names no function of rma.h"
done

# ---- reloadable keys: one list, the daemon's own (config_options[]'s
# ROPT, marked "(reloadable)" by rmad --help), in README and rmad(8) ----
"$RMAD" --help | awk '/^  --[a-z-]+ / { f = substr($1, 3); gsub(/-/, "_", f)
	if ($0 ~ /\(reloadable\)$/) print f > R; else if ($0 ~ /\]$/) print f > N }' \
	R="$T/reload.table" N="$T/restart.table"
sort -o "$T/reload.table" "$T/reload.table"
cat "$T/reload.table" "$T/restart.table" >"$T/keys"
[ "$(wc -l <"$T/reload.table")" -gt 10 ] || { echo "FAIL: rmad --help marks too few keys reloadable"; exit 1; }
# the option names quoted between two phrases of a text
names_between() { # file start-phrase end-phrase
	tr '\n' ' ' <"$1" | sed -n "s/.*$2\(.*\)$3.*/\1/p" | grep -o '[a-z_][a-z_]*' |
		grep -Fx -f "$T/keys" | sort -u
}
names_between "$SRC/README.md" '[*][*]Reload:[*][*]' 'Limits apply' >"$T/reload.readme"
names_between "$SRC/README.md" 'needs a restart' 'whose old value stays' >"$T/restart.readme"
sed -n '/^\.B SIGHUP/,/^\.TP/p' "$T/rmad.8" >"$T/sighup.8"
names_between "$T/sighup.8" 'What a running daemon can change' 'Limits apply' >"$T/reload.man"
names_between "$T/sighup.8" 'The other keys' 'need a restart' >"$T/restart.man"
for doc in readme man; do
	what=README; [ "$doc" = man ] && what="rmad(8) SIGHUP"
	diff "$T/reload.table" "$T/reload.$doc" >"$T/d" ||
		miss "$what's reloadable keys differ from the daemon's (< daemon only, > doc only): $(tr '\n' ' ' <"$T/d")"
	if grep -Fx -f "$T/reload.table" "$T/restart.$doc" >"$T/d"; then
		miss "$what says these need a restart, the daemon reloads them: $(tr '\n' ' ' <"$T/d")"
	fi
done

if [ "$bad" -ne 0 ]; then
	echo "FAIL: $bad things the man pages do not name"
	exit 1
fi
echo "ok: $(wc -l <"$T/rmad.flags") rmad flags, $(wc -l <"$T/rmactl.cmds") rmactl commands and" \
	"$(wc -l <"$T/rmactl.opts") options, $(wc -l <"$T/rma.funcs") functions and" \
	"$(wc -l <"$T/rma.names") constants of rma.h documented"

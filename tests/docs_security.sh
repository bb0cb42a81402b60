#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The threat model is stated once, in the same words, in README.md
# (## Security) and rmad(8) (.SH SECURITY): both are reduced to their
# words (markup, case and punctuation dropped) and must be equal.
set -euo pipefail
SRC=${SRCDIR:-$(dirname "$0")/..}
T=$(mktemp -d /tmp/rmad-docs.XXXXXX)
trap 'rm -rf "$T"' EXIT

# words: one lower-case word per line from the text on stdin.
words() {
	tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' ' ' | tr -s ' ' '\n' | sed '/^$/d'
}

sed -n '/^## Security$/,/^## /p' "$SRC/README.md" | sed '1d;$d' |
	sed 's/`//g' | words >"$T/readme"
sed -n '/^\.SH SECURITY$/,/^\.SH /p' "$SRC/man/rmad.8" | sed '1d;$d' |
	sed -e '/^\.\(PP\|IP\|TP\|RS\|RE\|sp\|br\)\b/d' -e 's/^\.[A-Z][A-Z]* //' \
		-e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\\-/-/g' -e 's/\\e/\\/g' |
	words >"$T/man"

[ "$(wc -l <"$T/readme")" -gt 300 ] || { echo "FAIL: README has no Security section"; exit 1; }
[ "$(wc -l <"$T/man")" -gt 300 ] || { echo "FAIL: rmad.8 has no SECURITY section"; exit 1; }
if ! diff -u "$T/readme" "$T/man" >"$T/diff"; then
	echo "FAIL: README's Security and rmad(8)'s SECURITY differ (word by word, README first):"
	head -n 40 "$T/diff"
	exit 1
fi
echo "ok: $(wc -l <"$T/readme") words alike"

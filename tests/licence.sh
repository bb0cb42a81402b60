#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Every source, script, build file, unit and man page git tracks names its
# licence (BSD-2-Clause, see LICENSE) in an SPDX line near its top.
set -eu
cd "${SRCDIR:?}"
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 || {
	echo "licence: not a git checkout, skipped"
	exit 77
}
missing=0
for f in $(git ls-files); do
	case "$f" in
	*/corpus/* | *.json | *.md | LICENSE) continue ;;
	# an alias page is one .so line, as Debian expects
	man/rma_alias.3.in) continue ;;
	*.c | *.h | *.proto | *.sh | *.py | *.pyi | *.1 | *.3 | *.8 | *.in | \
		*meson.build | meson_options.txt | systemd/*) ;;
	*) continue ;;
	esac
	if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: BSD-2-Clause'; then
		echo "licence: no SPDX line in $f"
		missing=$((missing + 1))
	fi
done
[ "$missing" -eq 0 ] || { echo "licence: $missing file(s) without it"; exit 1; }
echo "licence: every source names BSD-2-Clause"

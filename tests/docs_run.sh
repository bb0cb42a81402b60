#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Documentation that runs as written:
#
# 1. The README's tour: every ```sh block under "## A five-minute tour",
#    in order, one script, as a person pastes them into one shell, except
#    a block right after a line "<!-- docs-run: skip ... -->" (the build).
#    It runs verbatim under `bash -eu` in an empty directory, with only the
#    build's rmad and rmactl added to PATH, in a network namespace of its
#    own when one can be made (the tour's ports are fixed), with a
#    deadline; whatever it leaves running is killed, and is a failure.
# 2. Every configuration snippet: ```ini blocks of README.md, the lines
#    between ".\" docs-run: config" and the next .EE or .fi of each man
#    page, and systemd/rmad.conf.example, each through
#    `rmad --check-config --config FILE` (exit 0 wanted), on the host the
#    snippets describe (eth1 holding 10.1.0.5: --check-config refuses an
#    address or a device this host lacks): a network namespace made so,
#    else with those two rewritten to loopback. A snippet with a '#'
#    comment after a value must fail the same way, and so must one with
#    an address that host lacks, so the check can.
set -euo pipefail

SRC=${SRCDIR:?}
RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
T=$(mktemp -d /tmp/rmad-docs-run.XXXXXX)
TOUR_PG=

cleanup() {
	# the tour's process group (timeout leads it): nothing may be left
	if [ -n "$TOUR_PG" ]; then kill -KILL -- "-$TOUR_PG" 2>/dev/null || true; fi
	rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- 1. the tour ----

mkdir "$T/bin" "$T/run"
ln -s "$RMAD" "$T/bin/rmad"
ln -s "$RMACTL" "$T/bin/rmactl"

awk '
	/^## / { in_tour = ($0 == "## A five-minute tour") }
	!in_tour { next }
	fence && /^```/ { fence = 0; if (!skip) print ""; skip = 0; next }
	fence { if (!skip) print; next }
	/^```sh$/ { fence = 1; blocks++; skip = prev ~ /^<!-- docs-run: skip/; next }
	/^./ { prev = $0 }
	END { if (blocks == 0) exit 1 }
' "$SRC/README.md" >"$T/tour.sh" || fail "README.md has no ## A five-minute tour with sh blocks"
grep -q '^rmad ' "$T/tour.sh" || fail "the tour starts no rmad (by name)"
grep -q 'rmactl .*wait' "$T/tour.sh" || fail "the tour waits for nothing"
if grep -n 'build/' "$T/tour.sh"; then
	fail "the tour calls programs by build path, not by name"
fi

# A network namespace of our own, with its loopback up, if we may.
NS=()
if unshare -rn ip link set lo up 2>/dev/null; then
	NS=(unshare -rn sh -c 'ip link set lo up && exec "$@"' sh)
else
	echo "note: no network namespace; running on this host's loopback"
fi

# timeout leads a process group of its own: the tour's background jobs
# are in it, and so is the cleanup's kill.
(
	cd "$T/run"
	PATH="$T/bin:$PATH" TMPDIR="$T/run" exec timeout -k 5 120 "${NS[@]}" bash -eu "$T/tour.sh"
) >"$T/tour.out" 2>&1 &
TOUR_PG=$!
rc=0
wait "$TOUR_PG" || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "--- the tour as run:"
	cat -n "$T/tour.sh"
	echo "--- its output:"
	tail -n 40 "$T/tour.out"
	[ "$rc" -eq 124 ] && fail "the tour did not finish within 120 s"
	fail "the tour failed with exit $rc"
fi
if kill -0 -- "-$TOUR_PG" 2>/dev/null; then
	ps -o pid,args -g "$TOUR_PG" || true
	fail "the tour left processes running"
fi
TOUR_PG=
# what the tour says it does, it did (its mktemp went under $T/run)
grep -q '127.0.0.1:14001' "$T/tour.out" || fail "the tour's status shows no peer: $(cat "$T/tour.out")"
dir=$(find "$T/run" -name final.bin -printf '%h\n' | head -n 1)
[ -n "$dir" ] || fail "the tour left no final.bin"
[ "$(stat -c %s "$dir/final.bin")" -eq 1048576 ] || fail "final.bin is not the 1 MiB region"
cmp -n 65536 -i 100:0 "$dir/final.bin" "$dir/data" || fail "final.bin lacks the tour's put"
echo "ok: the README's tour ran ($(grep -c . "$T/tour.sh") lines)"

# ---- 2. configuration snippets ----

mkdir "$T/conf"
n=0
# README.md: ```ini blocks
awk -v dir="$T/conf" '
	fence && /^```/ { fence = 0; close(f); next }
	fence { print > f; next }
	/^```ini$/ { fence = 1; f = sprintf("%s/readme-%d.conf", dir, ++k) }
' "$SRC/README.md"
# man pages: marked .EX/.nf sections, man escapes undone
for page in "$SRC"/man/*.[0-9]; do
	awk -v dir="$T/conf" -v name="$(basename "$page")" '
		/^\.\\" docs-run: config/ { want = 1; next }
		want && /^\.(EX|nf)/ { inside = 1; want = 0; f = sprintf("%s/%s-%d.conf", dir, name, ++k); next }
		inside && /^\.(EE|fi)/ { inside = 0; close(f); next }
		inside && /^\./ { next }
		inside {
			gsub(/\\-/, "-"); gsub(/\\&/, ""); gsub(/\\\(aq/, "\047")
			gsub(/\\e/, "\\"); gsub(/\\f[BIRP]/, "")
			print > f
		}
	' "$page"
done
cp "$SRC/systemd/rmad.conf.example" "$T/conf/rmad.conf.example.conf"

# The documentation's host: eth1 (a bridge) holding 10.1.0.5/24.
DOCHOST=()
dochost='ip link set lo up && ip link add eth1 type bridge &&
	ip addr add 10.1.0.5/24 dev eth1 && ip link set eth1 up'
if [ "$(id -u)" -eq 0 ] && unshare -n sh -c "$dochost" 2>/dev/null; then
	DOCHOST=(unshare -n sh -c "$dochost"' && exec "$@"' sh)
elif unshare -rn sh -c "$dochost" 2>/dev/null; then
	DOCHOST=(unshare -rn sh -c "$dochost"' && exec "$@"' sh)
else
	echo "note: no network namespace: eth1 and 10.1.0.5 checked as lo and 127.0.0.1"
	sed -i -e 's/10\.1\.0\.5/127.0.0.1/g' -e 's/\<eth1\>/lo/g' "$T"/conf/*.conf
fi

for f in "$T"/conf/*.conf; do
	n=$((n + 1))
	rc=0
	env -u RMAD_SOCKET "${DOCHOST[@]}" "$SRC/tests/with_sysusers.sh" "$SRC" "$RMAD" --check-config --config "$f" >"$T/check.out" 2>"$T/check.err" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "--- $(basename "$f"):"
		cat -n "$f"
		cat "$T/check.err"
		fail "$(basename "$f"): rmad --check-config exits $rc"
	fi
done
ls "$T"/conf/readme-*.conf >/dev/null 2>&1 || fail "no ini block in README.md"
ls "$T"/conf/rmad.8-*.conf >/dev/null 2>&1 || fail "no marked config example in rmad.8"

# the check is one that a '#' after a value fails
printf '[rmad]\nlisten = 127.0.0.1:13337        # this host\n' >"$T/bad.conf"
if "$RMAD" --check-config --config "$T/bad.conf" >/dev/null 2>&1; then
	fail "--check-config accepts a '#' comment after a value"
fi
# and an address the snippets' host lacks (TEST-NET-1)
printf '[rmad]\nlisten = 192.0.2.1:13337\n' >"$T/bad.conf"
if "${DOCHOST[@]}" "$RMAD" --check-config --config "$T/bad.conf" >/dev/null 2>&1; then
	fail "--check-config accepts an address this host lacks"
fi
echo "ok: $n configuration snippets pass rmad --check-config"

#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Builds everything with ThreadSanitizer in build-tsan/ and runs the suites
# that run rmad with worker threads (workers, e2e-workers, metrics) there.
# Any report fails this script. Extra arguments go to meson test.
#
# UCX's memory hooks (it patches mmap and friends) crash a ThreadSanitizer
# process at exit: they are turned off here, which changes nothing rmad
# relies on (its regions are registered explicitly).
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
if [ ! -f build-tsan/build.ninja ]; then
	meson setup build-tsan -Db_sanitize=thread -Db_lundef=false
fi
ninja -C build-tsan

reports=$PWD/build-tsan/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
export TSAN_OPTIONS="halt_on_error=0:log_path=$reports/tsan:suppressions=$PWD/scripts/tsan.supp"
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=n UCX_MEM_EVENTS=n

rc=0
meson test -C build-tsan --print-errorlogs workers e2e-workers metrics "$@" ||
	rc=$?
if [ -n "$(find "$reports" -type f)" ]; then
	for f in "$reports"/*; do
		echo "==== sanitizer report $f" >&2
		head -n 80 "$f" >&2
	done
	echo "tsan: $(find "$reports" -type f | wc -l) report(s), in $reports" >&2
	rc=1
fi
if [ "$rc" -eq 0 ]; then
	echo "tsan: worker suites passed, no ThreadSanitizer reports"
else
	echo "tsan: FAILED (see above and build-tsan/meson-logs/testlog.txt)" >&2
fi
exit "$rc"

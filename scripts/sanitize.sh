#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Builds everything with AddressSanitizer, LeakSanitizer and UBSan in
# build-asan/ and runs the whole test suite there (the fuzz corpora
# included: tests fuzz-replay-*). Extra arguments go to meson test.
#
# ASan and LSan reports go to files in build-asan/sanitizer-reports/, not
# to stderr: daemons started by the tests often have their stderr in a
# scratch file and their exit status ignored, and a report there would
# otherwise pass unseen. gcc's UBSan ignores log_path and writes to
# stderr: the test log is searched for its reports. Any report fails this
# script, whatever the tests said, and is printed at the end.
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false
fi
ninja -C build-asan

reports=$PWD/build-asan/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
# verify_asan_link_order=0: a test builds examples/put.c with plain cc
# against the installed (here: sanitized) librma, so the ASan runtime
# arrives as librma's dependency instead of first.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
# No LeakSanitizer suppressions: UCX and libevent leave nothing that LSan
# reports (checked with UCX 1.13.1, libevent 2.1.12).

rc=0
meson test -C build-asan --print-errorlogs "$@" || rc=$?
if [ -n "$(find "$reports" -type f)" ]; then
	for f in "$reports"/*; do
		echo "==== sanitizer report $f" >&2
		head -n 80 "$f" >&2
	done
	echo "sanitize: $(find "$reports" -type f | wc -l) sanitizer report(s), in $reports" >&2
	rc=1
fi
if grep -n -A 12 -E 'runtime error:|ERROR: (Address|Leak)Sanitizer' \
	build-asan/meson-logs/testlog.txt >&2; then
	echo "sanitize: sanitizer reports in build-asan/meson-logs/testlog.txt" >&2
	rc=1
fi
if [ "$rc" -eq 0 ]; then
	echo "sanitize: all tests passed, no sanitizer reports"
else
	echo "sanitize: FAILED (see above and build-asan/meson-logs/testlog.txt)" >&2
fi
exit "$rc"

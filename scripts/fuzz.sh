#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan in
# build-fuzz/ and runs each for SECONDS (default 60) from a scratch copy
# of its committed seed corpus. Fails on any crash, leak, UB report or
# hang. Logs, the grown corpora and crash inputs stay in build-fuzz/run/:
# replay a crash with build-fuzz/tests/fuzz/fuzz_TARGET FILE.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
targets="frame descriptor dispatch peer config"

./scripts/deps.sh
if [ ! -f build-fuzz/build.ninja ]; then
	# fuzzer-no-link: coverage for libFuzzer in every object, main in none.
	CC=clang meson setup build-fuzz -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link
fi
ninja -C build-fuzz

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run=build-fuzz/run
rm -rf "$run"
failed=""
summary=""
for t in $targets; do
	mkdir -p "$run/$t/corpus"
	cp tests/fuzz/corpus/"$t"/* "$run/$t/corpus/"
	echo "fuzz: $t for $secs s" >&2
	if build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$secs" \
		-timeout=20 -print_final_stats=1 \
		-artifact_prefix="$run/$t/" "$run/$t/corpus" \
		>"$run/$t/log" 2>&1; then
		status=ok
	else
		status=FAILED
		failed="$failed $t"
		tail -n 60 "$run/$t/log" >&2
	fi
	# "#N DONE cov: X ft: Y corp: ..." and the final stats
	done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$run/$t/log" | tail -n 1 ||
		true)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/$t/log")
	if [ "$status" = ok ] && [ -z "$done_line" ]; then
		status="FAILED (no DONE line)"
		failed="$failed $t"
	fi
	summary="$summary
$(printf '%-10s %-6s %s execs  %s' "$t" "$status" "${execs:-?}" \
		"${done_line:-see $run/$t/log}")"
done
echo "fuzz summary ($secs s each):$summary"
if [ -n "$failed" ]; then
	echo "fuzz: failed:$failed (logs and crash inputs in $run/)" >&2
	exit 1
fi

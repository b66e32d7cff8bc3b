#!/usr/bin/env bash
# run-fuzzers.sh [seconds]: builds the core fuzz targets with clang and
# libFuzzer + ASan + UBSan into build-fuzz/ and runs each for the given number
# of seconds (default 600), starting from (and adding to a copy of) its seed
# corpus. Prints each target's execution count. Exit status is non-zero if
# any target found a crash. UTLS_FUZZ_PARALLEL=1 runs the targets at once.
set -euo pipefail

seconds=${1:-600}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${UTLS_FUZZ_BUILD_DIR:-$root/build-fuzz}
cc=${CC_FUZZ:-clang}
targets=(fuzz_cobs fuzz_reasm fuzz_scan fuzz_ucobs)

if ! command -v "$cc" >/dev/null; then
    echo "run-fuzzers: $cc not found (apt-get install clang libclang-rt-14-dev)" >&2
    exit 1
fi
mkdir -p "$out"
flags=(-std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I"$root/core/include")
for t in "${targets[@]}"; do
    "$cc" "${flags[@]}" -o "$out/$t" "$here/$t.c" "$root"/core/src/*.c
done
# The sub-stream reorder buffer lives in the fork's sources, not in core/.
"$cc" "${flags[@]}" -I"$root/include" -I"$root/openssl-patch/src" -o "$out/fuzz_streams" \
    "$here/fuzz_streams.c" "$root/openssl-patch/src/utls_streamq.c"
targets+=(fuzz_streams)

run_one() {
    local t=$1
    local corpus="$out/corpus-$t"
    mkdir -p "$corpus" "$out/artifacts-$t"
    cp -n "$here/corpus/$t"/* "$corpus"/ 2>/dev/null || true
    local rc=0
    "$out/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$out/artifacts-$t/" "$corpus" \
        >"$out/$t.log" 2>&1 || rc=$?
    local runs
    runs=$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$out/$t.log" | tail -1 || true)
    local execs
    execs=$(grep -E 'stat::number_of_executed_units' "$out/$t.log" | awk '{print $2}' | tail -1)
    echo "$t: exit $rc, ${runs:-no summary}, executions ${execs:-?}, log $out/$t.log"
    return $rc
}

status=0
if [ "${UTLS_FUZZ_PARALLEL:-0}" = 1 ]; then
    pids=()
    for t in "${targets[@]}"; do
        run_one "$t" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || status=1
    done
else
    for t in "${targets[@]}"; do
        run_one "$t" || status=1
    done
fi
exit $status

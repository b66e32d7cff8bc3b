#!/usr/bin/env bash
# run-fuzzers.sh [seconds]: builds the fuzz targets with clang and
# libFuzzer + ASan + UBSan into build-fuzz/ and runs each for the given number
# of seconds (default 600), starting from (and adding to a copy of) its seed
# corpus. Prints each target's execution count. Exit status is non-zero if
# any target found a crash. UTLS_FUZZ_PARALLEL=1 runs the targets at once;
# UTLS_FUZZ_TARGETS="fuzz_receiver ..." runs only those; UTLS_FUZZ_ARGS adds
# libFuzzer flags (e.g. "-seed=2 -len_control=20").
#
# fuzz_cobs, fuzz_reasm, fuzz_scan, fuzz_streams, fuzz_ucobs: core/ on its
#   own (fuzz_streams: the sub-stream header codec and reorder buffer).
# fuzz_receiver: the fork's whole out-of-order receive path (see the header
#   of fuzz_receiver.c: a real handshake per input, then a program of genuine,
#   duplicated, tampered and forged segments and reads, with a ground-truth
#   oracle). It needs the fork itself instrumented: a CMake tree of its own,
#   build-fuzz/receiver, configured with clang and
#   -fsanitize=fuzzer-no-link,address,undefined (UTLS_LIBFUZZER=ON), in which
#   only the target is built; it links the fork's objects directly, so that
#   coverage guidance and ASan cover libssl, our hooks and the glue.
# fuzz_ern: the receive path of explicit record numbers (see the header of
#   fuzz_ern.c: a negotiated pair per input, a sender that seals, reorders
#   and drops, then replays, flips and forgeries), built in the same tree.
# fuzz_aeadsearch: the provider's AEAD candidate search against the client's
#   EVP trial decryption and records sealed by the target itself (see the
#   header of fuzz_aeadsearch.c); the provider's sources and the client are
#   compiled in, instrumented, with the test-only switch of gf128.c
#   (UTLS_GF128_TEST_HOOK) that forces the portable multiplication.
set -euo pipefail

seconds=${1:-600}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${UTLS_FUZZ_BUILD_DIR:-$root/build-fuzz}
cc=${CC_FUZZ:-clang}
targets=(fuzz_cobs fuzz_reasm fuzz_scan fuzz_streams fuzz_ucobs)

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
# The AEAD search: the provider and its client, against the system libcrypto.
"$cc" "${flags[@]}" -DUTLS_GF128_TEST_HOOK -I"$root/provider" -I"$root/provider/include" \
    -o "$out/fuzz_aeadsearch" "$here/fuzz_aeadsearch.c" "$root/provider/utls_prov.c" \
    "$root/provider/search.c" "$root/provider/gf128.c" "$root/provider/aeadsearch_client.c" -lcrypto
targets+=(fuzz_aeadsearch)

# The receive path: the fork built with coverage instrumentation.
# It builds the whole fork: skipped when UTLS_FUZZ_TARGETS names neither of
# its targets.
if [ -z "${UTLS_FUZZ_TARGETS:-}" ] || [[ " $UTLS_FUZZ_TARGETS " == *" fuzz_receiver "* ]] \
    || [[ " $UTLS_FUZZ_TARGETS " == *" fuzz_ern "* ]]; then
    san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
    san="$san -fno-omit-frame-pointer"
    if [ ! -f "$out/receiver/build.ninja" ]; then
        cmake -S "$root" -B "$out/receiver" -G Ninja -DCMAKE_C_COMPILER="$cc" \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$san" \
            -DUTLS_UPSTREAM_TESTS=OFF -DUTLS_LIBFUZZER=ON >"$out/receiver-configure.log" 2>&1 || {
            echo "run-fuzzers: configuring $out/receiver failed (log: $out/receiver-configure.log)" >&2
            exit 1
        }
    fi
    cmake --build "$out/receiver" --target fuzz_receiver fuzz_ern >"$out/receiver-build.log" 2>&1 || {
        echo "run-fuzzers: building fuzz_receiver and fuzz_ern failed (log: $out/receiver-build.log)" >&2
        exit 1
    }
    cp "$out/receiver/tests/fuzz/fuzz_receiver" "$out/fuzz_receiver"
    cp "$out/receiver/tests/fuzz/fuzz_ern" "$out/fuzz_ern"
    targets+=(fuzz_receiver fuzz_ern)
fi
if [ -n "${UTLS_FUZZ_TARGETS:-}" ]; then
    read -r -a targets <<<"$UTLS_FUZZ_TARGETS"
fi

run_one() {
    local t=$1
    local corpus="$out/corpus-$t"
    mkdir -p "$corpus" "$out/artifacts-$t"
    cp -n "$here/corpus/$t"/* "$corpus"/ 2>/dev/null || true
    local rc=0
    # shellcheck disable=SC2086 # UTLS_FUZZ_ARGS: extra libFuzzer flags, split on spaces
    "$out/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 ${UTLS_FUZZ_ARGS:-} \
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

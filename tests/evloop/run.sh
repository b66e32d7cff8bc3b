#!/bin/bash
# tests/evloop/run.sh CASE BUILD PREFIX: one case of evloop_semantics over the
# testbed (100 ms RTT, 5% loss on the data direction, seeded): the server runs
# with the fork and libutls-evloop.so preloaded and UTLS_MODE=unordered,tap,port=4433,
# the client is the stock utls-stream sender. Needs root (exit 77 without).
set -u
case_=$1 build=$2 prefix=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
tb="$src/tools/testbed/testbed --prefix $prefix -q"
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (network namespaces, the tap)"
    exit 77
fi
dir=$(mktemp -d)
trap '$tb down >/dev/null 2>&1; rm -rf "$dir"' EXIT
$tb down >/dev/null 2>&1
$tb up --rtt 100 --loss 5 --seed 3 >/dev/null || { echo "testbed up failed"; exit 1; }
addr="$($tb addr receiver):4433"
$tb exec receiver -- env LD_PRELOAD="$build/lib/libssl.so.3 $build/lib/libutls-evloop.so" \
    UTLS_MODE=unordered,tap,port=4433 "$build/tests/evloop/evloop_semantics" "$case_" --listen "$addr" \
    --count 150 --size 1426 --ready "$dir/ready" &
recv=$!
for _ in $(seq 200); do [ -e "$dir/ready" ] && break; sleep 0.05; done
[ -e "$dir/ready" ] || { echo "the server did not start"; exit 1; }
$tb exec sender -- "$build/examples/utls-stream/utls-stream-stock" send --mode tls \
    --connect "$addr" --out "$dir/send.jsonl" --interval 20 --count 150 --size 1426 \
    --require stock --quiet --timeout 60 || echo "sender failed"
wait $recv

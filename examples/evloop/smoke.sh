#!/bin/bash
# examples/evloop/smoke.sh PROGRAM BUILD PREFIX: an event-loop example over the
# testbed (100 ms RTT, 5% loss, seeded) against the stock utls-stream sender:
# every message once, some out of order. Needs root (exit 77 without).
set -u
prog=$1 build=$2 prefix=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
tb="$src/tools/testbed/testbed --prefix $prefix -q"
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root"; exit 77; fi
dir=$(mktemp -d)
trap '$tb down >/dev/null 2>&1; rm -rf "$dir"' EXIT
$tb down >/dev/null 2>&1
$tb up --rtt 100 --loss 5 --seed 3 >/dev/null || { echo "testbed up failed"; exit 1; }
addr="$($tb addr receiver):4433"
$tb exec receiver -- "$prog" --listen "$addr" --count 150 --size 1426 --ready "$dir/ready" &
recv=$!
for _ in $(seq 200); do [ -e "$dir/ready" ] && break; sleep 0.05; done
$tb exec sender -- "$build/examples/utls-stream/utls-stream-stock" send --mode tls \
    --connect "$addr" --out "$dir/send.jsonl" --interval 20 --count 150 --size 1426 \
    --require stock --quiet --timeout 60 || echo "sender failed"
wait $recv

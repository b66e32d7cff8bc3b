#!/usr/bin/env bash
# run_delivery.sh loopback|testbed BUILD_BIN_DIR WORKDIR [sched_send options...]
# A scheduler sender (the fork) and a STOCK receiver (the system libssl)
# exchange a mixed workload; check_delivery.py checks that the receiver read
# exactly what the scheduler wrote. "testbed" runs them in the testbed's
# sender and receiver namespaces over a lossy bottleneck (needs root and
# tools/testbed; exits 77 to skip otherwise); "loopback" over 127.0.0.1.
# The testbed prefix is ${UTLS_TESTBED_PREFIX:-ts7} followed by this PID.
# With UTLS_CHECK_PROBE_RTT=1 the sender also writes a TCP trace
# (WORKDIR/trace) and check_probe_rtt.py checks its ProbeRTT drains against
# BBR's real ProbeRTT entries.
set -euo pipefail
where=$1 bin=$2 work=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tb=$top/tools/testbed/testbed
# $UTLS_TESTBED_PREFIX (default ts7) plus the PID: parallel runs never share
# a testbed.
prefix=${UTLS_TESTBED_PREFIX:-ts7}$$
mkdir -p "$work"
rm -f "$work"/recv.out "$work"/send.out "$work"/drops "$work"/ready
run_snd() { "$@"; }
run_rcv() { exec timeout 200 "$@"; }
addr=127.0.0.1
if [ "$where" = testbed ]; then
    if [ "$(id -u)" != 0 ]; then echo "SKIP: the testbed needs root"; exit 77; fi
    if [ ! -x "$tb" ]; then echo "SKIP: tools/testbed/testbed is not there"; exit 77; fi
    export UTLS_NFQ_DELAY=${UTLS_NFQ_DELAY:-$(dirname "$bin")/../tools/testbed/nfq-delay}
    trap '"$tb" --prefix $prefix -q down || true' EXIT
    if ! "$tb" --prefix $prefix -q up --rtt 40 --loss 1 --rate 8 --queue 50 --seed 7; then
        echo "SKIP: the testbed could not be set up"; exit 77
    fi
    addr=$("$tb" --prefix $prefix addr receiver)
    run_snd() { "$tb" --prefix $prefix exec sender -- "$@"; }
    run_rcv() { exec "$tb" --prefix $prefix exec receiver -- timeout 200 "$@"; }
fi
port=$((20000 + $$ % 20000))
run_rcv "$bin/sched_recv_stock" --listen "$addr:$port" --out "$work/recv.out" \
    --ready "$work/ready" --expect-stock 2> "$work/recv.err" &
rpid=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.05; done
run_snd "$bin/sched_send" --connect "$addr:$port" --workload mix --drops "$work/drops" "$@" \
    > "$work/send.out" 2> "$work/send.err" || { cat "$work/send.err"; kill $rpid || true; exit 1; }
rc=0; wait $rpid || rc=$?
cat "$work/recv.err" "$work/send.err" "$work/send.out"
[ $rc = 0 ] || { echo "stock receiver failed ($rc)"; exit 1; }
# Not exec: the EXIT trap must still take the testbed down.
/usr/bin/python3 "$here/check_delivery.py" "$work/recv.out" "$work/send.out" "$work/drops"
if [ "${UTLS_CHECK_PROBE_RTT:-0}" = 1 ]; then
    /usr/bin/python3 "$here/check_probe_rtt.py" "$work/trace" "$work/send.out"
fi

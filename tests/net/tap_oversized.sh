#!/usr/bin/env bash
# tap_oversized.sh BINDIR — the tap takes jumbo segments whole: the ring's
# 2 KiB frames cut them off, and the hub reads their whole copies back from
# the data socket (lib/bio/tap_local.h, PACKET_COPY_THRESH).
#
# The testbed's veths run at MTU 9000; 300 records of 8,000 plaintext bytes
# (one ~8 KB segment each), one every 10 ms, over 100 ms
# RTT with 2% seeded loss, to a uTLS receiver reading through the tap.
# Asserts: every record delivered exactly once and intact, some out of order
# (only whole segments can give those: a cut one has no record in it),
# the tap's payload bytes cover those records (more than a frame holds),
# UTLS_STATS agrees, no ring drops. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COUNT=300
net_stream_test "${1:-}" utls-stream "uovs$$" net-tap-oversized 4433 \
    "--rtt 100 --loss 2 --seed 4242 --mtu 9000" \
    "--mode utls --count $COUNT --size 8000 --timeout 60" "--interval 10"
# Segments the socket had already returned count as packets without payload
# bytes; the ones past a hole carry ~8 KB each.
PYTHONPATH="$HERE" "$PY" -c 'import sys, netcheck
netcheck.check_tap_stream(sys.argv[1], int(sys.argv[2]), bytes_per_ooo=8000)
netcheck.finish()' \
    "$WORK/recv.jsonl" "$COUNT"
net_verdict $?

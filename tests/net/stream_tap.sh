#!/usr/bin/env bash
# stream_tap.sh BINDIR — issue 5, done-when 1 (ctest label net).
#
# Streams 500 records (1448 plaintext bytes, one every 10 ms) from the sender
# namespace to a uTLS receiver in the receiver namespace of tools/testbed,
# over 100 ms RTT with 2% seeded loss (the same packets are dropped on every
# run), the receiver reading with SSL_MODE_UNORDERED through the tap
# (UTLS_tap_listen + UTLS_BIO_new_tap). Asserts: every record delivered exactly
# once and intact, some out of order, no fallback, the tap saw the packets.
# The testbed is torn down whatever happens (trap), and the test checks that
# nothing of it is left. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COUNT=500
net_stream_test "${1:-}" utls-stream "utap$$" net-stream-tap 4433 "--rtt 100 --loss 2 --seed 4242" \
    "--mode utls --count $COUNT --size 1448 --timeout 60" "--interval 10"
PYTHONPATH="$HERE" "$PY" -c 'import sys, netcheck
netcheck.check_tap_stream(sys.argv[1], int(sys.argv[2]), min_packets=int(sys.argv[2]))
netcheck.finish()' \
    "$WORK/recv.jsonl" "$COUNT"
net_verdict $?

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
PYTHONPATH="$HERE" "$PY" - "$WORK/recv.jsonl" "$COUNT" <<'PY'
import sys
from netcheck import check, check_delivered_once, check_out_of_order, finish, fork_receiver_log
count = int(sys.argv[2])
start, end, recs = fork_receiver_log(sys.argv[1])
check_delivered_once(recs, end, count, "record")
# Out-of-order records must really be early: delivered before an earlier one.
ooo = check_out_of_order(recs, "record")
u = end.get("utls", {})
check(u.get("fallback", "").startswith("none"), "no fallback (%s)" % u.get("fallback"))
check(u.get("records_out_of_order") == ooo, "UTLS_STATS agrees (%s)" % u.get("records_out_of_order"))
t = end.get("tap", {})
check(t.get("packets", 0) >= count, "the tap captured the stream (%s packets)" % t.get("packets"))
check(t.get("ring_drops", 1) == 0, "no tap ring drops")
finish()
PY
net_verdict $?

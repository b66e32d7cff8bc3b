#!/usr/bin/env bash
# tap_oversized.sh BINDIR — the tap takes jumbo segments (lib/bio/tap_local.h:
# a ring block holds at least one 64 KiB packet), the case a ring of
# MTU-sized frames would cut to its headers.
#
# The testbed's veths run at MTU 9000; 300 records of 8,000 plaintext bytes
# (one ~8 KB segment each), one every 10 ms, over 100 ms
# RTT with 2% seeded loss, to a uTLS receiver reading through the tap.
# Asserts: every record delivered exactly once and intact, some out of order
# (only whole segments can give those: a cut one has no record in it),
# the tap's payload bytes per captured packet above a frame's size, no ring
# drops. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COUNT=300
net_stream_test "${1:-}" utls-stream "uovs$$" net-tap-oversized 4433 \
    "--rtt 100 --loss 2 --seed 4242 --mtu 9000" \
    "--mode utls --count $COUNT --size 8000 --timeout 60" "--interval 10"
PYTHONPATH="$HERE" "$PY" - "$WORK/recv.jsonl" "$COUNT" <<'PY'
import sys
from netcheck import check, check_delivered_once, check_out_of_order, finish, fork_receiver_log
count = int(sys.argv[2])
start, end, recs = fork_receiver_log(sys.argv[1])
check_delivered_once(recs, end, count, "record")
ooo = check_out_of_order(recs, "record")
u = end.get("utls", {})
check(u.get("fallback", "").startswith("none"), "no fallback (%s)" % u.get("fallback"))
t = end.get("tap", {})
pk, pb = t.get("packets", 0), t.get("payload_bytes", 0)
# Segments the socket had already returned count as packets without payload
# bytes; the ones past a hole carry ~8 KB each.
check(pk > 0 and pb > 0, "the tap captured the stream (%s packets, %s bytes)" % (pk, pb))
check(pb >= ooo * 8000, "payload bytes (%d) cover the %d out-of-order records" % (pb, ooo))
check(t.get("ring_drops", 1) == 0, "no tap ring drops (%s)" % t.get("ring_drops"))
finish()
PY
net_verdict $?

#!/usr/bin/env bash
# ucobs_tap.sh BINDIR — issue 9, uCOBS through the testbed (ctest label net).
#
# Streams 500 uCOBS datagrams (1440 bytes, 1448 on the wire, one every 10 ms)
# over plain TCP from the sender namespace to the receiver namespace of
# tools/testbed, at 100 ms RTT with 2% seeded loss, the receiver reading with
# UTLS_ucobs_recv through the tap (UTLS_tap_listen, UTLS_UCOBS_REQUIRE_TAP).
# Asserts: every datagram delivered exactly once and intact, some out of
# order and each of those really before an earlier one, the receiver's
# counters agree, no framing error, every frame 1448 bytes. The testbed
# (prefix uco<pid>) is torn down whatever happens, and the test checks that
# nothing of it is left. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COUNT=500
net_stream_test "${1:-}" utls-stream "uco$$" net-ucobs-tap 4434 "--rtt 100 --loss 2 --seed 4242" \
    "--mode ucobs --count $COUNT --size 1440 --timeout 60" "--interval 10"
PYTHONPATH="$HERE" "$PY" - "$WORK/recv.jsonl" "$WORK/send.jsonl" "$COUNT" <<'PY'
import json, sys
from netcheck import check, check_delivered_once, check_out_of_order, finish, fork_receiver_log
sent = [json.loads(l) for l in open(sys.argv[2])]
count = int(sys.argv[3])
start, end, recs = fork_receiver_log(sys.argv[1], "ucobs")
check_delivered_once(recs, end, count, "datagram")
# Out-of-order datagrams must really be early: delivered before an earlier one.
ooo = check_out_of_order(recs, "datagram")
u = end.get("ucobs", {})
check(u.get("tapped") == 1, "the receiver used the tap")
check(u.get("datagrams_out_of_order") == ooo, "UTLS_UCOBS_STATS agrees (%s)" % u.get("datagrams_out_of_order"))
check(u.get("datagrams_in_order", 0) + u.get("datagrams_out_of_order", 0) == count,
      "in order + out of order = %d" % count)
check(u.get("framing_errors") == 0, "no framing error")
check(u.get("bytes_read") == 1448 * count, "the socket delivered every byte in order (%s)" % u.get("bytes_read"))
t = end.get("tap", {})
check(t.get("packets", 0) >= 0.9 * count, "the tap captured the stream (%s packets for %d frames)" % (t.get("packets"), count))
check(t.get("ring_drops", 1) == 0, "no tap ring drops")
wl = [r.get("wire_len") for r in recs] + [s.get("wire_len") for s in sent if "i" in s]
check(all(w == 1448 for w in wl), "every frame is 1448 bytes on the wire")
offs = sorted(r["offset"] for r in recs)
check(offs == [1448 * i for i in range(count)], "datagram offsets are the frames' opening markers")
finish()
PY
net_verdict $?

#!/usr/bin/env bash
# substreams_tap.sh BINDIR — sub-streams over the testbed (issue 9, label net).
#
# 4 streams x 250 messages (300 plaintext bytes; each stream a message every
# 20 ms, staggered by 5 ms) from the sender namespace to a uTLS receiver in
# the receiver namespace of tools/testbed (prefix sst), over 100 ms RTT with
# 2% seeded loss, the receiver reading with SSL_MODE_UNORDERED through the tap
# and UTLS_stream_read. Asserts: every message of every stream exactly once,
# intact and in its own stream's order; some messages came from records
# delivered out of order and some waited for their own stream (so streams
# really overtook each other's losses); no fallback; the layer did not fail.
# The testbed is torn down whatever happens, and the test checks that nothing
# of it is left. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COUNT=1000
net_stream_test "${1:-}" utls-substreams "${UTLS_SST_PREFIX:-sst}" net-substreams 4433 "--rtt 100 --loss 2 --seed 9090" \
    "--mode utls_streams --count $COUNT --streams 4 --size 300 --timeout 90" "--interval 20"
PYTHONPATH="$HERE" "$PY" - "$WORK/recv.jsonl" "$COUNT" <<'PY'
import sys
from netcheck import check, finish, fork_receiver_log
count = int(sys.argv[2])
start, end, msgs = fork_receiver_log(sys.argv[1])
check(all(m.get("ok") == 1 for m in msgs), "every message intact, none duplicated")
for k in range(4):
    qs = [m["q"] for m in msgs if m.get("ok") == 1 and m["s"] == k]
    check(qs == list(range(count // 4)),
          "stream %d: %d messages, exactly once and in its order" % (k, len(qs)))
check(end.get("order_violations") == 0 and end.get("duplicates") == 0 and end.get("bad") == 0,
      "receiver counters: no order violation, duplicate or bad message")
ooo = sum(1 for m in msgs if m.get("ooo") == 1)
held = sum(1 for m in msgs if m.get("held") == 1)
check(ooo > 0, "messages from records delivered out of order: %d" % ooo)
check(held > 0, "messages that waited for their own stream: %d" % held)
# Overtaking: a message returned while an earlier-sent message of another
# stream was still missing (its stream was not blocked by the other's loss).
sent_before = lambda a, b: (a["send_ns"] < b["send_ns"])
returned = set()
overtakes = 0
order = sorted(msgs, key=lambda m: m["send_ns"])
pos = {(m["s"], m["q"]): i for i, m in enumerate(order)}
done_upto = 0
seen = [False] * len(order)
for m in msgs:
    i = pos[(m["s"], m["q"])]
    seen[i] = True
    while done_upto < len(order) and seen[done_upto]:
        done_upto += 1
    if i > done_upto and order[done_upto]["s"] != m["s"]:
        overtakes += 1
check(overtakes > 0, "messages returned before an earlier-sent message of another stream: %d"
      % overtakes)
check(end.get("utls", {}).get("fallback", "").startswith("none"),
      "no fallback (%s)" % end.get("utls", {}).get("fallback"))
check(end.get("streams", {}).get("failed_reason") == 0, "the sub-stream layer did not fail")
check(end.get("tap", {}).get("ring_drops", 1) == 0, "no tap ring drops")
finish()
PY
net_verdict $?

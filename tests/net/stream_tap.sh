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
net_require_root "network namespaces, the AF_PACKET tap"
BINDIR=${1:?usage: stream_tap.sh BINDIR}
net_init "utap$$" net-stream-tap
NET_PID_VARS=RECV_PID
BIN=$BINDIR/utls-stream
COUNT=500
RECV_PID=

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
net_testbed_up --rtt 100 --loss 2 --seed 4242
ADDR=$("$TB" --prefix "$PREFIX" addr receiver):4433

net_run_stream "$BIN" "$ADDR" \
    "--mode utls --count $COUNT --size 1448 --timeout 60" \
    "--mode utls --count $COUNT --size 1448 --interval 10 --timeout 60"
PYTHONPATH="$HERE" "$PY" - "$WORK/recv.jsonl" "$COUNT" <<'PY'
import json, sys
from netcheck import check, count_really_early, finish, receiver_log
count = int(sys.argv[2])
start, end, recs = receiver_log(sys.argv[1])
check(start.get("fork") == 1, "the receiver ran the fork (%s)" % start.get("libssl"))
check(end.get("event") == "end", "the receiver finished its log")
good = [r["i"] for r in recs if r.get("ok") == 1]
check(sorted(good) == list(range(count)), "every record delivered (%d of %d)" % (len(set(good)), count))
check(len(good) == len(set(good)) and end.get("duplicates") == 0, "no record delivered twice")
check(end.get("bad") == 0 and all(r.get("ok") == 1 for r in recs), "every record intact")
ooo = sum(1 for r in recs if r.get("ooo") == 1)
check(ooo > 0, "records delivered out of order: %d" % ooo)
u = end.get("utls", {})
check(u.get("fallback", "").startswith("none"), "no fallback (%s)" % u.get("fallback"))
check(u.get("records_out_of_order") == ooo, "UTLS_STATS agrees (%s)" % u.get("records_out_of_order"))
t = end.get("tap", {})
check(t.get("packets", 0) >= count, "the tap captured the stream (%s packets)" % t.get("packets"))
check(t.get("ring_drops", 1) == 0, "no tap ring drops")
# Out-of-order records must really be early: delivered before an earlier one.
early = count_really_early(recs)
check(early == ooo, "each out-of-order record came before an earlier record (%d)" % early)
finish()
PY
net_verdict $?

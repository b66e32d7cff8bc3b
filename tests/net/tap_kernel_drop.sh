#!/usr/bin/env bash
# tap_kernel_drop.sh BINDIR — a segment the tap captured but the receiving
# kernel dropped is a hole too, and records past it still come early.
#
# The ring sees a packet before the kernel's TCP does, so the tap holds a
# captured segment that starts at the kernel's in-order point aside as "in
# flight" (lib/bio/tap_local.h, UTLS_TAP_INFLIGHT_GRACE_NS) until the kernel
# queues it. Here the receiver's own netfilter drops every 20th data segment
# after the capture has seen it (input hook): the kernel never queues it, and
# the network loses nothing. The held segments must enter the store when the
# grace ends, so that the records past each drop are delivered before the
# sender's retransmission fills it. 400 records of 1448 bytes, one every
# 10 ms, 100 ms RTT, no loss on the path. Asserts: every record exactly once
# and intact; at least one per drop from the capture, as UTLS_STATS counts,
# each within 20 ms of its arrival; no more records delayed by an RTT than
# drops; the tap took the stream, no ring drops. Needs root; without it
# exits 77.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COUNT=400
net_require_root "network namespaces, nftables, the AF_PACKET tap"
command -v nft >/dev/null || { echo "SKIP: nft (nftables) is not installed"; exit 77; }
net_stream_init "${1:-}" utls-stream "ukdr$$" net-tap-kernel-drop
net_testbed_up --rtt 100 --loss 0
"$TB" --prefix "$PREFIX" exec receiver -- nft -f - <<'NFT' || { echo "FAIL: nft rule"; exit 1; }
table inet utls_kernel_drop {
    chain input {
        type filter hook input priority 0; policy accept;
        tcp dport 4433 meta length 1000-65535 numgen inc mod 20 0 counter drop
    }
}
NFT
ADDR=$(net_addr receiver 4433)
net_run_stream "$BIN" "$ADDR" "--mode utls --count $COUNT --size 1448 --timeout 60" \
    "--mode utls --count $COUNT --size 1448 --timeout 60 --interval 10"
DROPS=$("$TB" --prefix "$PREFIX" exec receiver -- nft list table inet utls_kernel_drop |
    sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
echo "segments the receiver's kernel dropped after the capture: ${DROPS:-?}"
PYTHONPATH="$HERE" "$PY" - "$WORK/recv.jsonl" "$COUNT" "${DROPS:-0}" <<'PY'
import sys
from netcheck import check, check_tap_stream, finish
path, count, drops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3] or 0)
check(drops >= 10, "the receiver's kernel dropped segments (%d)" % drops)
# The records in and past each dropped segment come from the capture (out of
# order: ahead of the kernel's stream), though none overtakes another: the
# capture holds the dropped bytes too.
recs = check_tap_stream(path, count, really_early=False)
ooo = [r for r in recs if r.get("ooo") == 1]
check(len(ooo) >= drops, "at least one record from the capture per drop (%d)" % len(ooo))
# Held in flight for the grace (2 ms), not until the retransmission.
wait = max([(r["recv_ns"] - r["arrival_ns"]) / 1e6 for r in ooo] or [0])
check(wait < 20, "each record from the capture delivered within 20 ms of its last byte (%.1f)"
      % wait)
# Only a record that straddles a drop's in-order point waits for the sender's
# retransmission (its head came from the socket); in-order TLS would hold the
# ~13 records behind each drop for more than one RTT.
lat = [(r["recv_ns"] - r["send_ns"]) / 1e6 for r in recs]
late = sum(1 for x in lat if x > min(lat) + 100)
check(late <= drops, "records delayed more than one RTT: %d (at most one per drop, %d)"
      % (late, drops))
finish()
PY
net_verdict $?

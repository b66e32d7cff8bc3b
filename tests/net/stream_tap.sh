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
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (network namespaces, the AF_PACKET tap)"
    exit 77
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BINDIR=${1:?usage: stream_tap.sh BINDIR}
TB=$ROOT/tools/testbed/testbed
BIN=$BINDIR/utls-stream
PREFIX=utap$$
COUNT=500
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
WORK=$(mktemp -d /tmp/net-stream-tap.XXXXXX)
RECV_PID=

cleanup() {
    local rc=$?
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    "$TB" --prefix "$PREFIX" -q down >/dev/null 2>&1
    if grep -q "^$PREFIX-" <<<"$(ip netns list)"; then
        echo "FAIL: namespaces of $PREFIX left behind after teardown"
        rc=1
    fi
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
"$TB" --prefix "$PREFIX" -q up --rtt 100 --loss 2 --seed 4242 ||
    { echo "FAIL: testbed up"; exit 1; }
ADDR=$("$TB" --prefix "$PREFIX" addr receiver):4433

"$TB" --prefix "$PREFIX" exec receiver -- "$BIN" recv --mode utls --listen "$ADDR" \
    --count "$COUNT" --size 1448 --require fork --ready "$WORK/ready" \
    --out "$WORK/recv.jsonl" --timeout 60 --quiet &
RECV_PID=$!
for _ in $(seq 200); do [ -s "$WORK/ready" ] && break; sleep 0.05; done
[ -s "$WORK/ready" ] || { echo "FAIL: the receiver did not start"; exit 1; }
"$TB" --prefix "$PREFIX" exec sender -- "$BIN" send --mode utls --connect "$ADDR" \
    --count "$COUNT" --size 1448 --interval 10 --require fork \
    --out "$WORK/send.jsonl" --timeout 60 --quiet ||
    { echo "FAIL: the sender failed"; exit 1; }
wait "$RECV_PID"
RRC=$?
RECV_PID=
echo "receiver exit $RRC"
tail -1 "$WORK/recv.jsonl"
"$PY" - "$WORK/recv.jsonl" "$COUNT" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
count = int(sys.argv[2])
start, end = lines[0], lines[-1]
recs = [l for l in lines[1:] if "event" not in l]
fails = []
def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)
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
first_seen = {}
for pos, r in enumerate(recs):
    first_seen.setdefault(r["i"], pos)
early = sum(1 for r in recs if r.get("ooo") == 1
            and any(first_seen.get(j, 1 << 30) > first_seen[r["i"]] for j in range(r["i"])))
check(early == ooo, "each out-of-order record came before an earlier record (%d)" % early)
sys.exit(1 if fails else 0)
PY
PRC=$?
[ "$RRC" = 0 ] || echo "FAIL: receiver exit $RRC"
[ "$RRC" = 0 ] && [ "$PRC" = 0 ]

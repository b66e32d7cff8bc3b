#!/usr/bin/env bash
# forged_segments.sh BINDIR STATS_DUMP_SO [--good-checksum]
# Issue 5, done-when 4 (ctest net.forged_segments, label net).
#
# What it does. tools/testbed (100 ms RTT, 2% seeded loss) carries a uTLS
# stream of 800 records (1448 plaintext bytes, one every 10 ms) from the
# sender namespace to `utls-stream recv --mode utls` in the receiver
# namespace (SSL_MODE_UNORDERED through the AF_PACKET tap). During the
# transfer tests/net/inject.py, running in the SENDER namespace, watches the
# sender's own segments to learn the live 4-tuple, sequence/ack numbers and
# record boundaries, and sends forged IPv4 TCP segments with that 4-tuple
# through a raw socket, for about 5 s:
#   (a) in window: random bytes ahead of and behind the live sequence number
#       (into holes, over bytes in flight, over bytes already received);
#       complete TLS-shaped records (17 03 03 len + random body, the genuine
#       record size) at the exact offsets where genuine records are about to
#       land, so the forged bytes reach the tap first; segments packed with
#       small TLS-shaped records (many plausible headers: probe work);
#   (b) out of window: 2^31 away, 64 MiB..1 GiB ahead and behind.
# A counter in the receiver namespace (inject.py count) tells genuine from
# forged arrivals by IP TTL (forged: 200).
#
# Why the forged segments carry a BAD TCP checksum. That is the tap's threat
# model: the AF_PACKET tap sees every segment before TCP validates it, so an
# attacker who can only get packets to the receiver that its kernel will
# reject (bad checksum, out of window) still reaches the tap. The kernel drops
# them (the receiver's Tcp InCsumErrors grows by about as many), the stream
# the kernel delivers stays the authority, and the test checks that the
# out-of-order side does not let any of it through or lose anything.
# A forged segment with a VALID checksum and an in-window sequence number is a
# different attack: the kernel's TCP accepts it as stream data (the first copy
# wins), so stock TLS over the same socket gets corrupt bytes too and fails
# with bad_record_mac; no TLS receiver can defend against that (only TCP-AO,
# IPsec or an unspoofable path can). `--good-checksum` runs exactly that, to
# show that the test can fail: the receiver then loses the stream.
#
# Asserts: from the receiver's JSON log, every record index 0..799 delivered
# exactly once and intact (ok), none missing, every delivered record is one
# the sender logged (same index and send time: zero forged), some out of
# order; from UTLS_STATS (all counters and the limits, dumped through
# the LD_PRELOAD module stats_dump.c because utls-stream logs only some):
# no fallback, probes <= headers_found * max_probes_per_record, probes <=
# burst (256) + payload bytes the tap saw * max_probes_per_kib / 1024, and
# the receiver's CPU time (getrusage, same module) <= 2 s; from
# the tap stats: it captured the forged segments (packets >= genuine +
# forged arrivals counted in the namespace, minus a little slack); the kernel
# rejected them (InCsumErrors). The testbed goes down on any exit (trap).
# About 10 s.
#
# Typical run: ~1900 forged segments (1.9 MB) seen by the tap beside ~1580
# genuine ones; 800/800 records intact, ~125 out of order (~257 without the
# forgeries: forged bytes that reach the tap first win the out-of-order
# store's first copy, and the probe budget runs dry, so those records come in
# order instead); ~20 000 probes against a bound of ~80 000 (probe_limit_hits
# ~18 000); receiver CPU ~150 ms for the whole transfer. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
net_require_root "network namespaces, the AF_PACKET tap, raw sockets"
BINDIR=${1:?usage: forged_segments.sh BINDIR STATS_DUMP_SO [--good-checksum]}
SHIM=${2:?usage: forged_segments.sh BINDIR STATS_DUMP_SO [--good-checksum]}
GOOD=
[ "${3:-}" = --good-checksum ] && GOOD=--good-checksum
net_init "utf$$" net-forged
NET_PID_VARS="INJ_PID SEND_PID RECV_PID CNT_PID"
BIN=$BINDIR/utls-stream
COUNT=800
PORT=4433
RECV_PID= SEND_PID= CNT_PID= INJ_PID=
T0=$(date +%s)

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
[ -f "$SHIM" ] || { echo "FAIL: $SHIM not built"; exit 1; }
net_testbed_up --rtt 100 --loss 2 --seed 5151
RADDR=$("$TB" --prefix "$PREFIX" addr receiver)
SADDR=$("$TB" --prefix "$PREFIX" addr sender)

csum_errors() {  # Tcp InCsumErrors in the receiver namespace
    "$TB" --prefix "$PREFIX" exec receiver -- cat /proc/net/snmp |
        awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "InCsumErrors") c = i; h = 1 }
                       else print $c }'
}
CSUM0=$(csum_errors)

"$TB" --prefix "$PREFIX" exec receiver -- "$PY" "$HERE/inject.py" count --src "$SADDR" \
    --dport "$PORT" --ready "$WORK/cnt.ready" --out "$WORK/count.json" &
CNT_PID=$!
"$TB" --prefix "$PREFIX" exec receiver -- env LD_PRELOAD="$SHIM" \
    UTLS_STATS_DUMP="$WORK/stats.json" "$BIN" recv --mode utls --listen "$RADDR:$PORT" \
    --count "$COUNT" --size 1448 --require fork --ready "$WORK/ready" \
    --out "$WORK/recv.jsonl" --timeout 60 --quiet &
RECV_PID=$!
net_wait_ready "$WORK/ready" receiver "$WORK/cnt.ready" counter

"$TB" --prefix "$PREFIX" exec sender -- "$BIN" send --mode utls --connect "$RADDR:$PORT" \
    --count "$COUNT" --size 1448 --interval 10 --require fork \
    --out "$WORK/send.jsonl" --timeout 60 --quiet &
SEND_PID=$!
# The injector waits for the first data segment, then forges for 5 s while
# the 8 s transfer runs.
"$TB" --prefix "$PREFIX" exec sender -- "$PY" "$HERE/inject.py" inject --dst "$RADDR" \
    --dport "$PORT" --duration 5 --interval 20 --seed 77 $GOOD --out "$WORK/inject.json" &
INJ_PID=$!
wait "$INJ_PID"; IRC=$?; INJ_PID=
wait "$SEND_PID"; SRC=$?; SEND_PID=
wait "$RECV_PID"; RRC=$?; RECV_PID=
sleep 0.5   # the last forged segments cross the 50 ms path long before this
kill -TERM "$CNT_PID" 2>/dev/null; wait "$CNT_PID"; CNT_PID=
CSUM1=$(csum_errors)
echo "injector exit $IRC, sender exit $SRC, receiver exit $RRC, $(( $(date +%s) - T0 )) s"
tail -1 "$WORK/recv.jsonl"

PYTHONPATH="$HERE" "$PY" - "$WORK" "$COUNT" "$((CSUM1 - CSUM0))" "$IRC" "$SRC" "$RRC" "${GOOD:-bad}" <<'PY'
import json, os, sys
from netcheck import check, finish, load_json
work, count, csum_err = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
irc, src, rrc, mode = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
def load(name):
    return load_json(work, name)
inj, cnt, st = load("inject.json"), load("count.json"), load("stats.json")
lines = [json.loads(l) for l in open(os.path.join(work, "recv.jsonl")) if l.strip()]
sent = {}
for l in open(os.path.join(work, "send.jsonl")):
    r = json.loads(l)
    if "i" in r and "send_ns" in r:
        sent[r["i"]] = r["send_ns"]
start, end = lines[0], lines[-1]
recs = [l for l in lines[1:] if "event" not in l]

print("injected (%s checksum): %s" % (mode.replace("--", ""), json.dumps(inj.get("kinds", {}))))
print("arrivals in the receiver namespace: %s; receiver Tcp InCsumErrors +%d" % (json.dumps(cnt), csum_err))
print("UTLS_STATS: %s" % json.dumps(st))
check(irc == 0 and inj.get("packets", 0) > 0,
      "the injector forged %s segments (%s bytes) on source port %s"
      % (inj.get("packets"), inj.get("bytes"), inj.get("sport")))
check(all(k["packets"] > 0 for k in inj.get("kinds", {}).values()) and len(inj.get("kinds", {})) == 7,
      "every kind of forgery was sent")
check(src == 0, "the sender finished (exit %d)" % src)
check(rrc == 0, "the receiver finished (exit %d)" % rrc)
check(start.get("fork") == 1, "the receiver ran the fork (%s)" % start.get("libssl"))
check(end.get("event") == "end", "the receiver finished its log")
good = [r["i"] for r in recs if r.get("ok") == 1]
check(sorted(good) == list(range(count)),
      "zero lost: every record delivered (%d of %d, missing %s)" % (len(set(good)), count, end.get("missing")))
check(len(good) == len(set(good)) and end.get("duplicates") == 0, "no record delivered twice")
check(end.get("bad") == 0 and all(r.get("ok") == 1 for r in recs),
      "every record intact (bad %s)" % end.get("bad"))
forged = [r for r in recs if sent.get(r.get("i")) != r.get("send_ns")]
check(len(sent) == count and not forged,
      "zero forged: every delivered record is one the sender sent (%d not)" % len(forged))
ooo = sum(1 for r in recs if r.get("ooo") == 1)
check(ooo > 0, "records delivered out of order: %d" % ooo)
u, t = end.get("utls", {}), end.get("tap", {})
check(u.get("fallback", "").startswith("none"), "no fallback (%s)" % u.get("fallback"))
check(bool(st) and st.get("probes") == u.get("probes"),
      "full UTLS_STATS dumped through the preload module (probes %s)" % st.get("probes"))
lim = st.get("limits", {})
probes, hdrs = st.get("probes", -1), st.get("headers_found", 0)
ppr, ppk = lim.get("max_probes_per_record", 0), lim.get("max_probes_per_kib", 0)
check(0 <= probes <= hdrs * ppr,
      "probes %d <= headers_found %d x max_probes_per_record %d = %d" % (probes, hdrs, ppr, hdrs * ppr))
# A generous ceiling (a quarter of one core over the 8 s transfer); measured
# ~0.1 s. Unbounded probing (64 per forged header) would cost far more.
CPU_MAX_MS = 2000
BURST = 256  # UTLS_PROBE_BUDGET_BURST (lib/common/utls_common.h)
bound = BURST + t.get("payload_bytes", 0) * ppk / 1024
check(probes <= bound,
      "probe work bounded: probes %d <= %d + tap payload %d B x %d/KiB = %.0f "
      "(forged bytes alone allow %.0f; probe_limit_hits %s, soft_failures %s)"
      % (probes, BURST, t.get("payload_bytes", 0), ppk, bound,
         inj.get("bytes", 0) * ppk / 1024, st.get("probe_limit_hits"), st.get("soft_failures")))
cpu = st.get("cpu_user_ms", 1 << 30) + st.get("cpu_sys_ms", 0)
check(cpu <= CPU_MAX_MS,
      "receiver CPU %d ms (user %s + sys %s) <= %d ms for the whole %s s transfer"
      % (cpu, st.get("cpu_user_ms"), st.get("cpu_sys_ms"), CPU_MAX_MS, end.get("duration_s")))
fa, ga = cnt.get("forged", 0), cnt.get("genuine", 0)
check(fa >= 0.9 * inj.get("packets", 1) and ga >= count,
      "forged segments reached the receiver namespace: %d of %d (genuine %d)"
      % (fa, inj.get("packets", 0), ga))
# The tap's filter is the 4-tuple: it must have seen the forged arrivals
# beside the genuine ones (the counter and the tap may differ by the few
# packets around the moment each started).
check(t.get("packets", 0) >= ga + fa - 20 and t.get("packets", 0) - ga >= 0.95 * fa,
      "the tap captured the forgeries: packets %d, genuine arrivals %d, so about %d forged "
      "(malformed %s, ring_drops %s)" % (t.get("packets", 0), ga, t.get("packets", 0) - ga,
                                         t.get("malformed"), t.get("ring_drops")))
if mode != "--good-checksum":
    check(csum_err >= 0.95 * fa,
          "the kernel's TCP rejected them: InCsumErrors +%d for %d forged arrivals" % (csum_err, fa))
finish()
PY
PRC=$?
[ "$PRC" = 0 ] && echo "PASS ($(( $(date +%s) - T0 )) s)"
[ "$PRC" = 0 ]

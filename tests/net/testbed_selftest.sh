#!/usr/bin/env bash
# Self-test of tools/testbed (ctest label net): RTT accuracy, seeded and
# deterministic loss, TCP through a bottleneck, NFQUEUE timing at 10k
# packets/s, idempotent up, refusal of foreign namespaces, and a teardown that
# leaves nothing behind (also when the test fails: trap).
# Needs root; without it prints "SKIP: needs root" and exits 77.
set -uo pipefail

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root"
    exit 77
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TB=$ROOT/tools/testbed/testbed
PROBE=$ROOT/tools/testbed/probe.py
PREFIX=tbself
FOREIGN=tbselff
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
export UTLS_NFQ_DELAY=${UTLS_NFQ_DELAY:-$ROOT/build/tools/testbed/nfq-delay}

WORK=$(mktemp -d /tmp/testbed-selftest.XXXXXX)
FAILS=0
T0=$EPOCHREALTIME
BG_PIDS=()

elapsed() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }
log() { echo "[$(elapsed)s] $*"; }
pass() { log "PASS: $*"; }
fail() { log "FAIL: $*"; FAILS=$((FAILS + 1)); }
fatal() { log "FATAL: $*"; exit 1; }
tb() { "$TB" --prefix "$PREFIX" "$@"; }
jget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]])' "$1" "$2"; }
fcheck() { awk "BEGIN{exit !($1)}"; }

cleanup() {
    local rc=$?
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    "$TB" --prefix "$PREFIX" -q down 2>/dev/null || true
    # the foreign namespace is created by this test, bare, so it is ours to remove
    [ -e "/run/netns/$FOREIGN-rtr" ] && ip netns del "$FOREIGN-rtr" 2>/dev/null
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -x "$UTLS_NFQ_DELAY" ] || fatal "nfq-delay not built ($UTLS_NFQ_DELAY); build the tree first"

# ---------------------------------------------------------------- helpers

# udp_burst COUNT PPS -> $WORK/sink.json
udp_burst() {
    local count=$1 pps=$2 i
    rm -f "$WORK/sink.json" "$WORK/ready"
    tb exec receiver -- "$PY" "$PROBE" udp-sink --port 9000 --expect "$count" --idle 1.0 \
        --timeout 20 --out "$WORK/sink.json" --ready "$WORK/ready" >/dev/null &
    local sink=$!
    BG_PIDS+=("$sink")
    for i in $(seq 1 200); do [ -f "$WORK/ready" ] && break; sleep 0.01; done
    tb exec sender -- "$PY" "$PROBE" udp-send "$(tb addr receiver)" --port 9000 -c "$count" \
        --pps "$pps" >"$WORK/send.json"
    wait "$sink"
}

# daemon_stats DIR KEY: the value of KEY in the last stats line of the daemon
daemon_stats() {
    local dir=$1 key=$2 pid
    pid=$(cat "/run/utls-testbed/$PREFIX/$dir.pid")
    kill -USR1 "$pid"
    sleep 0.1
    grep 'stats(' "/run/utls-testbed/$PREFIX/$dir.log" | tail -1 |
        tr ' ' '\n' | sed -n "s/^$key\(<=\)\{0,1\}=\{0,1\}//p" | head -1
}

snapshot_root() {
    { ip -o link show | awk -F': ' '{print $2}' | sort
      ip route show; ip -6 route show
      nft list ruleset 2>/dev/null; } >"$1"
}

# ---------------------------------------------------------------- start

snapshot_root "$WORK/root.before"
tb -q down >/dev/null 2>&1 || true

log "up --rtt 100"
t=$EPOCHREALTIME
tb up --rtt 100 || fatal "testbed up failed"
log "setup took $(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}') s"

# ---- idempotent up: same daemons, same state
fingerprint() {
    local ns
    for ns in "$PREFIX-snd" "$PREFIX-rtr" "$PREFIX-rcv"; do
        ip -n "$ns" -br addr; ip -n "$ns" route; tc -n "$ns" qdisc
    done
    cat "/run/utls-testbed/$PREFIX/"*.pid "/run/utls-testbed/$PREFIX/params" \
        "/run/utls-testbed/$PREFIX/"*.conf
}
fingerprint >"$WORK/fp1"
tb -q up --rtt 100 || fatal "second up failed"
fingerprint >"$WORK/fp2"
if diff "$WORK/fp1" "$WORK/fp2" >/dev/null; then pass "up twice = same state"; else
    fail "second up changed the state"; diff "$WORK/fp1" "$WORK/fp2"; fi

# ---- RTT
tb exec sender -- "$PY" "$PROBE" ping "$(tb addr receiver)" -c 50 -i 0.02 >"$WORK/ping.json"
rtt=$(jget "$WORK/ping.json" rtt_avg_ms); rmin=$(jget "$WORK/ping.json" rtt_min_ms)
rmax=$(jget "$WORK/ping.json" rtt_max_ms); recv=$(jget "$WORK/ping.json" received)
log "ping rtt avg=$rtt min=$rmin max=$rmax received=$recv/50"
if fcheck "$rtt >= 95 && $rtt <= 105 && $recv == 50"; then pass "RTT 100 ms: $rtt ms"; else
    fail "RTT $rtt ms (want 100 +- 5, all 50 replies)"; fi

# ---- seeded random loss, 10 %, forward only
tb -q set --loss 10 --seed 42 || fatal "set --loss failed"
udp_burst 1000 2000
loss=$(jget "$WORK/sink.json" loss_pct); cp "$WORK/sink.json" "$WORK/loss1.json"
log "seeded 10% loss: measured $loss% of 1000 datagrams"
if fcheck "$loss >= 7 && $loss <= 13"; then pass "loss 10%: $loss%"; else fail "loss $loss% (want 10 +- 3)"; fi
# the same seed again gives the same drops
tb -q set --loss 10 --seed 42
udp_burst 1000 2000
if [ "$(jget "$WORK/sink.json" missing)" = "$(jget "$WORK/loss1.json" missing)" ]; then
    pass "same seed, same lost packets"; else fail "seeded loss is not reproducible"; fi
# ACKs/replies unharmed: reverse direction has no loss by default
tb exec sender -- "$PY" "$PROBE" ping "$(tb addr receiver)" -c 100 -i 0.005 >"$WORK/ping2.json"
log "ping under 10% forward loss: $(jget "$WORK/ping2.json" received)/100 replies"

# ---- deterministic patterns
tb -q set --loss-pattern every:10
udp_burst 100 1000
missing=$(jget "$WORK/sink.json" missing)
if [ "$missing" = "[10, 20, 30, 40, 50, 60, 70, 80, 90, 100]" ]; then pass "every:10 drops exactly every 10th"; else
    fail "every:10 dropped $missing"; fi
tb -q set --loss-pattern list:3,5,7-9
udp_burst 50 1000
missing=$(jget "$WORK/sink.json" missing)
if [ "$missing" = "[3, 5, 7, 8, 9]" ]; then pass "list:3,5,7-9 drops exactly those"; else
    fail "list:3,5,7-9 dropped $missing"; fi

# ---- TCP through delay, loss and a 20 Mbit/s bottleneck
tb -q set --clear --rtt 20 --loss 2 --seed 1 --rate 20 --queue 100 || fatal "set for TCP failed"
rm -f "$WORK/tcp.json" "$WORK/ready"
tb exec receiver -- "$PY" "$PROBE" tcp-sink --port 9001 --timeout 30 --out "$WORK/tcp.json" \
    --ready "$WORK/ready" >/dev/null &
sink=$!; BG_PIDS+=("$sink")
for i in $(seq 1 200); do [ -f "$WORK/ready" ] && break; sleep 0.01; done
tb exec sender -- timeout 40 "$PY" "$PROBE" tcp-send "$(tb addr receiver)" --port 9001 \
    --bytes 3000000 >"$WORK/tcpsend.json"
wait "$sink"
if [ -f "$WORK/tcp.json" ] && [ "$(jget "$WORK/tcp.json" sha256)" = "$(jget "$WORK/tcpsend.json" sha256)" ]; then
    mbit=$(jget "$WORK/tcp.json" mbit_s)
    pass "TCP 3 MB through 20 ms / 2% loss / 20 Mbit/s: intact, $(printf %.1f "$mbit") Mbit/s"
    fcheck "$mbit <= 21" || fail "TCP at $mbit Mbit/s exceeds the 20 Mbit/s bottleneck"
else
    fail "TCP transfer failed or corrupted"
fi
fdrop=$(daemon_stats fwd dropped)
log "forward daemon dropped $fdrop segments during the TCP transfer"
fcheck "${fdrop:-0} > 0" || fail "no TCP segment was dropped at 2% loss"

# ---- NFQUEUE throughput and timing: 10 000 packets/s for 1 s
# Every burst must arrive whole. The release timing is the daemon's, but a
# second in which another tenant of the VM holds the CPU makes any burst
# late (CI: p99 1.2 and 7.3 ms in two runs a minute apart, then 3 passes of
# 3 on the same machine): up to three bursts are tried, and the timing
# fails only if none of them is on time.
timing=late
for try in 1 2 3; do
    tb -q set --clear --rtt 20
    udp_burst 10000 10000
    got=$(jget "$WORK/sink.json" received); pps=$(jget "$WORK/send.json" pps)
    late_avg=$(daemon_stats fwd late_avg_us); late_p99=$(daemon_stats fwd late_p99_us)
    late_max=$(daemon_stats fwd late_max_us)
    log "10k pps, burst $try: sent at $(printf %.0f "$pps") pps, received $got/10000; release lateness avg=${late_avg}us p99<=${late_p99}us max=${late_max}us"
    if [ "$got" != 10000 ]; then timing=lost; break; fi
    if grep -q 'warning: SCHED_FIFO' "/run/utls-testbed/$PREFIX/fwd.log"; then timing=unasserted; break; fi
    if fcheck "${late_p99:-99999} <= 1000"; then timing=ok; break; fi
done
[ "$timing" != lost ] && pass "no packet lost at 10k pps" || fail "lost $((10000 - got)) packets at 10k pps"
case $timing in
    ok) pass "release timing p99 <= 1 ms (burst $try)" ;;
    unasserted) log "note: nfq-delay runs without SCHED_FIFO here; timing not asserted" ;;
    late) fail "release lateness p99 > 1 ms in three bursts (last ${late_p99}us)" ;;
esac

# ---- a foreign namespace with a testbed name is left alone
ip netns add "$FOREIGN-rtr"
if "$TB" --prefix "$FOREIGN" -q up >/dev/null 2>&1; then fail "up ran over a foreign namespace"; else
    pass "up refuses a foreign namespace"; fi
"$TB" --prefix "$FOREIGN" -q down >/dev/null 2>&1
[ -e "/run/netns/$FOREIGN-rtr" ] && pass "down left the foreign namespace alone" || fail "down removed a foreign namespace"
ip netns del "$FOREIGN-rtr"

# ---- teardown
t=$EPOCHREALTIME
tb down || fail "down failed"
log "teardown took $(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}') s"
left=$(ip netns list | awk '{print $1}' | grep "^$PREFIX-" || true)
[ -z "$left" ] && pass "no namespaces left" || fail "namespaces left: $left"
procs=$(pgrep -f "nfq-delay .*/utls-testbed/$PREFIX/" || true)
[ -z "$procs" ] && pass "no daemons left" || fail "daemons left: $procs"
[ ! -e "/run/utls-testbed/$PREFIX" ] && pass "state directory removed" || fail "state directory left"
snapshot_root "$WORK/root.after"
if diff "$WORK/root.before" "$WORK/root.after" >/dev/null; then pass "root namespace links, routes and nft ruleset unchanged"; else
    fail "root namespace changed:"; diff "$WORK/root.before" "$WORK/root.after"; fi

log "done: $FAILS failure(s)"
[ "$FAILS" = 0 ]

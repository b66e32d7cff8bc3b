#!/usr/bin/env bash
# tap_server.sh BINDIR SCENARIO [ISN]: examples/utls-server (the fork, --mode utls)
# through tools/testbed (100 ms RTT, 2% seeded loss), the load client in the
# sender namespace, in one of three scenarios of the process-wide tap:
#
#  privdrop    the server opens the tap as root, then drops to nobody with no
#              capabilities before it accepts anything: every connection is
#              tapped and gets records out of order; the worker proves it
#              could not open a packet socket any more.
#  prefork     3 workers (children of fork(), each dropping to nobody) accept
#              from one listening socket, 4 connections each, all sending at
#              once (crossing traffic): each worker serves only its own
#              connections (disjoint sets, every message intact, exactly
#              once), its capture saw the others' segments and gave them to
#              nobody, and out-of-order delivery happens.
#  forged_syn  tests/net/forge_syn.py, in the router, sends after every
#              genuine SYN a SYN with the same 4-tuple, another sequence
#              number and a wrong checksum, reaching the receiver before it
#              accepts: every record's stream_offset stays exact (records of
#              one size: offset - seq x wire length constant per
#              connection), out of order included.
#  dualstack   the server listens on [::] (an IPv6 socket that accepts IPv4):
#              its IPv4 connections are tapped (their packets are IPv4 and
#              their sockets' addresses IPv4-mapped IPv6).
#
# ISN is where the tap takes the connections' ISNs from: sockops (the
# default as root: the kernel's record at establishment, tap_sockops.c; the
# control socket is left unbound) or capture (UTLS_TAP_ISN=capture: the
# control socket reads them from the SYN-ACKs our kernel sends). Checked:
# every ISN came from there, and the server has one running packet socket
# (sockops) or two (capture).
# Exits 77 (skipped) without root; tears the testbed down whatever happens.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
net_require_root "network namespaces, the AF_PACKET tap, setuid"
[ -n "${1:-}" ] && [ -n "${2:-}" ] || { echo "usage: tap_server.sh BINDIR SCENARIO [ISN]"; exit 2; }
SCENARIO=$2
ISN=${3:-sockops}
case $ISN in
sockops) unset UTLS_TAP_ISN ;;
capture) export UTLS_TAP_ISN=capture ;;
*) echo "unknown ISN source $ISN"; exit 2 ;;
esac
net_init "tsv$$" "net-tap-$SCENARIO"
NET_PID_VARS="SERVER_PID FORGE_PID COUNT_PID"
SERVER_PID=
FORGE_PID=
COUNT_PID=
BIN=$1/utls-server
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
chmod 755 "$WORK"
: >"$WORK/serve.jsonl"
chmod 666 "$WORK/serve.jsonl"

SERVE_ARGS="--drop-to nobody"
LISTEN=0.0.0.0:4433
CONNS=4
RATE=100
case $SCENARIO in
privdrop) ;;
prefork) SERVE_ARGS="--drop-to nobody --workers 3 --worker-conns 4"; CONNS=12; RATE=200 ;;
forged_syn) SERVE_ARGS="--accept-delay-ms 1500" ;;
dualstack) SERVE_ARGS=""; LISTEN="[::]:4433" ;;
*) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac

net_testbed_up --rtt 100 --loss 2 --seed 4343
ADDR=$(net_addr receiver 4433)
if [ "$SCENARIO" = forged_syn ]; then
    "$TB" --prefix "$PREFIX" exec router -- "$PY" "$HERE/forge_syn.py" --iface snd --dport 4433 \
        --delay-ms 80 --out "$WORK/forge.json" &
    FORGE_PID=$!
    # Proof that the forged SYNs reach the receiver (TTL 200: inject.py's mark).
    "$TB" --prefix "$PREFIX" exec receiver -- "$PY" "$HERE/inject.py" count \
        --src "$("$TB" --prefix "$PREFIX" addr sender)" --dport 4433 --out "$WORK/count.json" &
    COUNT_PID=$!
    sleep 0.5
fi
# shellcheck disable=SC2086 # the option string is meant to split
"$TB" --prefix "$PREFIX" exec receiver -- "$BIN" serve --listen "$LISTEN" --mode utls \
    $SERVE_ARGS --ready "$WORK/ready" --out "$WORK/serve.jsonl" --quiet &
SERVER_PID=$!
net_wait_ready "$WORK/ready" server
# The packet sockets of the receiver's namespace, and the server's sockets
# (the load client has not started: the only utls-server is the server): a
# bound packet socket is running (R 1), an unbound one captures nothing.
"$TB" --prefix "$PREFIX" exec receiver -- cat /proc/net/packet >"$WORK/packet.txt"
for p in $(pgrep -x utls-server); do ls -l "/proc/$p/fd"; done 2>/dev/null |
    grep -o 'socket:\[[0-9]*\]' | tr -dc '0-9\n' >"$WORK/server-inodes.txt"
"$TB" --prefix "$PREFIX" exec sender -- "$BIN" load --connect "$ADDR" --conns $CONNS --rate $RATE \
    --size 1400 --duration-ms 6000 --out "$WORK/load.jsonl" --quiet ||
    { echo "FAIL: the load client failed"; cat "$WORK/load.jsonl"; exit 1; }
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SRC=$?
SERVER_PID=
if [ -n "$FORGE_PID" ]; then
    kill -TERM "$FORGE_PID" "$COUNT_PID"
    wait "$FORGE_PID" "$COUNT_PID"
    FORGE_PID=
    COUNT_PID=
fi
echo "server exit $SRC"
PYTHONPATH="$HERE" "$PY" - "$WORK" "$SCENARIO" "$CONNS" "$ISN" <<'PY'
import json, os, sys
from netcheck import check, finish
work, scenario, conns, isn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
load = [json.loads(l) for l in open(os.path.join(work, "load.jsonl"))][-1]
workers = [json.loads(l) for l in open(os.path.join(work, "serve.jsonl")) if l.strip()]
print("load:", json.dumps(load))
for w in workers:
    print("worker:", json.dumps({k: v for k, v in w.items() if k != "ids"}), "ids", w["ids"])
check(load["ready"] == conns and load["failed"] == 0, "all %d connections made" % conns)
check(len(workers) == (3 if scenario == "prefork" else 1), "one summary per worker")
total = lambda k: sum(w[k] for w in workers)
check(total("conns") == conns, "the server accepted %d connections" % total("conns"))
check(total("tapped") == conns and total("untapped") == 0, "every connection got a tap")
check(total("records") == load["sent"], "every message delivered (%d of %d)" % (total("records"), load["sent"]))
check(total("bad") == 0 and total("dup") == 0 and total("read_errors") == 0,
      "every message intact, none twice, no read error")
check(total("ooo") > 0, "records delivered out of order (%d)" % total("ooo"))
check(total("offset_errors") == 0, "every stream_offset consistent (%d errors)" % total("offset_errors"))
for w in workers:
    check(w["tap"]["ring_drops"] == 0 and w["tap"]["inbox_drops"] == 0,
          "worker %d: no ring or inbox drops" % w["worker"])
from_sockops = sum(w["tap"]["isn_from_sockops"] for w in workers)
from_capture = sum(w["tap"]["isn_from_kernel"] for w in workers)
if isn == "sockops":
    check(all(w["tap"]["isn_sockops"] == 1 for w in workers) and from_sockops == conns
          and from_capture == 0,
          "every ISN from the kernel's sock_ops record (%d), none captured (%d)"
          % (from_sockops, from_capture))
else:
    check(all(w["tap"]["isn_sockops"] == 0 for w in workers) and from_capture >= conns
          and from_sockops == 0,
          "every ISN captured from our kernel's SYN-ACKs (%d), none from sock_ops (%d)"
          % (from_capture, from_sockops))
mine = set(open(os.path.join(work, "server-inodes.txt")).read().split())
rows = [l.split() for l in open(os.path.join(work, "packet.txt")).read().splitlines()[1:]]
rows = [r for r in rows if len(r) > 8 and r[8] in mine]
running = sum(1 for r in rows if r[5] == "1")
print("the server's packet sockets:", len(rows), "running:", running)
if scenario != "prefork":  # (the workers open theirs after the snapshot)
    want = 1 if isn == "sockops" else 2
    check(running == want, "the server has %d running packet socket(s) (%d): %s"
          % (want, running, "the data socket only" if want == 1 else "data and control"))
if scenario in ("privdrop", "prefork"):
    for w in workers:
        check(w["uid"] != 0 and int(w["cap_eff"], 16) == 0 and w["can_open_packet_socket"] == 0,
              "worker %d runs as uid %d, CapEff %s, cannot open a packet socket"
              % (w["worker"], w["uid"], w["cap_eff"]))
if scenario == "prefork":
    ids = [set(w["ids"]) for w in workers]
    union = set().union(*ids)
    check(sum(len(s) for s in ids) == len(union) and union == set(range(conns)),
          "each connection served by exactly one worker: %s" % [sorted(s) for s in ids])
    for w in workers:
        check(w["conns"] > 0 and w["records"] > 0, "worker %d served connections" % w["worker"])
        check(w["tap"]["foreign"] > 0,
              "worker %d's capture saw other workers' segments and gave them to no connection (%d)"
              % (w["worker"], w["tap"]["foreign"]))
if scenario == "forged_syn":
    forge = json.load(open(os.path.join(work, "forge.json")))
    count = json.load(open(os.path.join(work, "count.json")))
    print("forge:", forge, "at the receiver:", count)
    check(forge["forged"] >= conns, "a forged SYN after every genuine one (%d)" % forge["forged"])
    check(count["forged"] >= conns, "the forged SYNs reached the receiver (%d)" % count["forged"])
finish()
PY
PRC=$?
[ "$SRC" = 0 ] || echo "FAIL: server exit $SRC"
[ "$SRC" = 0 ] && [ "$PRC" = 0 ]

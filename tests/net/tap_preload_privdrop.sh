#!/usr/bin/env bash
# tap_preload_privdrop.sh LIBDIR: an unmodified Python TLS server
# (examples/preload/receiver.py) started as root with the fork preloaded and
# UTLS_MODE=unordered,tap, which drops to nobody (setgroups, setgid, setuid:
# no capability left) before it creates its SSL context, listens or accepts:
# the library opened the process-wide tap when it was loaded, so the
# connection is still tapped and messages arrive out of order over the
# testbed (100 ms RTT, 2% loss). Every message exactly once. Exits 77 without
# root.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
net_require_root "network namespaces, the AF_PACKET tap, setuid"
LIB=${1:?usage: tap_preload_privdrop.sh LIBDIR}/libssl.so.3
net_init "tpp$$" net-tap-preload-privdrop
NET_PID_VARS=RECV_PID
RECV_PID=
chmod 755 "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=tap \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null || { echo "FAIL: openssl req"; exit 1; }
chmod 644 "$WORK/key.pem"
COUNT=500
net_testbed_up --rtt 100 --loss 2 --seed 4545
ADDR=$("$TB" --prefix "$PREFIX" addr receiver)
"$TB" --prefix "$PREFIX" exec receiver -- env LD_PRELOAD="$LIB" UTLS_MODE=unordered,tap,all \
    "$PY" -c '
import os, runpy, sys
os.setgroups([]); os.setgid(65534); os.setuid(65534)
assert os.getuid() == 65534
cap = [l for l in open("/proc/self/status") if l.startswith("CapEff:")][0].split()[1]
print("uid", os.getuid(), "CapEff", cap, file=sys.stderr, flush=True)
sys.argv = [sys.argv[1], "--port", "4433", "--cert", sys.argv[2], "--key", sys.argv[3]]
runpy.run_path(sys.argv[0], run_name="__main__")
' "$ROOT/examples/preload/receiver.py" "$WORK/cert.pem" "$WORK/key.pem" \
    >"$WORK/recv.out" 2>"$WORK/recv.err" &
RECV_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/recv.out" 2>/dev/null && break; sleep 0.1; done
"$TB" --prefix "$PREFIX" exec sender -- "$PY" "$ROOT/examples/preload/sender.py" --host "$ADDR" \
    --port 4433 --count $COUNT --size 1000 --interval 0.01 || { echo "FAIL: sender"; exit 1; }
wait "$RECV_PID"
RRC=$?
RECV_PID=
cat "$WORK/recv.err"
"$PY" - "$WORK/recv.out" "$WORK/recv.err" "$COUNT" <<'PY'
import sys
seqs = [int(l) for l in open(sys.argv[1]) if l.strip().isdigit()]
err = open(sys.argv[2]).read()
count = int(sys.argv[3])
fails = []
def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok: fails.append(what)
check("uid 65534 CapEff 0000000000000000" in err, "the server ran as nobody with no capability")
check("cannot be opened" not in err, "no tap-unavailable notice")
check(sorted(seqs) == list(range(count)), "every message exactly once (%d)" % len(seqs))
ooo = sum(1 for i in range(len(seqs)) if seqs[i] != i)
check(ooo > 0, "messages delivered out of order (%d not in their place)" % ooo)
sys.exit(1 if fails else 0)
PY
PRC=$?
[ "$RRC" = 0 ] || echo "FAIL: receiver exit $RRC"
[ "$RRC" = 0 ] && [ "$PRC" = 0 ]

#!/bin/bash
# tests/evloop/socat.sh BUILD PREFIX: a program we did not write (issue 19,
# point 2). Debian's socat (linked with the system libssl; its loop waits in
# select/poll, then SSL_read) terminates TLS and pipes the plaintext into
# stamp.py, over the testbed (100 ms RTT, 5% loss, seeded). Twice, the same
# path and seed: plain (stock libssl) and with the fork and libutls-evloop.so
# preloaded and UTLS_MODE=unordered,tap,port=4433. The preloaded socat must have
# mapped exactly those two libraries (/proc/PID/maps), deliver every message
# once and intact, deliver some out of order (records past a hole), and have
# a smaller share of messages later than one-way delay + RTT than stock.
# Needs root and socat (exit 77 without).
set -u
build=$1 prefix=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
tb="$src/tools/testbed/testbed --prefix $prefix -q"
count=150 size=1426
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root"; exit 77; fi
socat=$(command -v socat) || { echo "SKIP: socat is not installed (tools/install-deps.sh)"; exit 77; }
ldd "$socat" | grep -q 'libssl.so.3 => /lib\|libssl.so.3 => /usr/lib' ||
    { echo "FAIL: $socat does not link the system libssl"; exit 1; }
dir=$(mktemp -d)
trap '$tb down >/dev/null 2>&1; rm -rf "$dir"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/k.pem" \
    -out "$dir/c.pem" -days 1 -subj /CN=socat >/dev/null 2>&1 || { echo "openssl req failed"; exit 1; }

run() { # run NAME PRELOAD
    local name=$1 preload=$2 addr pid maps
    $tb down >/dev/null 2>&1
    $tb up --rtt 100 --loss 5 --seed 5 >/dev/null || { echo "testbed up failed"; exit 1; }
    addr=$($tb addr receiver)
    # ${libpath}: the 3.5 build's libcrypto beside the fork (socat links
    # libcrypto itself; the system's 3.0 one would be loaded first).
    $tb exec receiver -- env ${preload:+LD_PRELOAD="$preload" UTLS_MODE=unordered,tap,port=4433 $libpath} \
        "$socat" -b 65536 "OPENSSL-LISTEN:4433,reuseaddr,cert=$dir/c.pem,key=$dir/k.pem,verify=0" \
        "SYSTEM:/usr/bin/python3 $src/tests/evloop/stamp.py $count $size $dir/$name.log" \
        2>"$dir/$name.err" &
    for _ in $(seq 100); do
        pid=$(pgrep -n -f "OPENSSL-LISTEN:4433,reuseaddr,cert=$dir/c.pem") && break
        sleep 0.05
    done
    sleep 0.3
    cp "/proc/$pid/maps" "$dir/$name.maps" 2>/dev/null
    $tb exec sender -- "$build/examples/utls-stream/utls-stream-stock" send --mode tls \
        --connect "$addr:4433" --out "$dir/$name.send" --interval 20 --count $count --size $size \
        --require stock --quiet --timeout 60 || echo "$name: sender failed"
    wait
    cat "$dir/$name.err"
}

libpath=
[ -e "$build/lib/libcrypto.so.3" ] && libpath=LD_LIBRARY_PATH=$build/lib
run stock ""
run utls "$build/lib/libssl.so.3 $build/lib/libutls-evloop.so"
/usr/bin/python3 - "$dir" $count "$(readlink -f "$build/lib/libssl.so.3")" <<'PY'
import json, sys
d, count, fork = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rc = 0
def load(name):
    return [json.loads(l) for l in open("%s/%s.log" % (d, name))]
maps = open("%s/utls.maps" % d).read()
libs = sorted(set(l.split()[-1] for l in maps.splitlines() if "libssl.so" in l or "libutls-evloop" in l))
print("socat (preloaded) mapped:", ", ".join(libs))
if fork not in libs or \
        not any(l.endswith("libutls-evloop.so") for l in libs) or \
        any(l.startswith(("/usr/lib", "/lib")) and "libssl" in l for l in libs):
    print("FAIL: the preloaded socat did not map the fork and libutls-evloop.so alone"); rc = 1
res = {}
for name in ("stock", "utls"):
    recs = load(name)
    idx = [r["i"] for r in recs if r["ok"]]
    late = sum(1 for r in recs if r["ok"] and (r["recv_ns"] - r["send_ns"]) / 1e6 > 50 + 100)
    inversions = sum(1 for a, b in zip(idx, idx[1:]) if b < a)
    res[name] = (len(set(idx)), len(idx), late / count, inversions)
    print("%s: %d distinct of %d, %d delivered, late>RTT share %.3f, %d out of order"
          % (name, len(set(idx)), count, len(idx), late / count, inversions))
    if len(set(idx)) != count or len(idx) != count or len(recs) != count:
        print("FAIL: %s: not every message exactly once and intact" % name); rc = 1
if res["utls"][3] == 0:
    print("FAIL: the preloaded socat delivered nothing out of order"); rc = 1
if not res["utls"][2] < res["stock"][2]:
    print("FAIL: the preloaded socat is not earlier than stock"); rc = 1
sys.exit(rc)
PY

#!/usr/bin/env bash
# smoke.sh MODE SRCDIR OUTDIR LIBDIR — build utls-substreams the way a user
# would (CMake, find_package(utls)), send 400 messages over 4 streams on
# loopback in MODE (tls: the stock build with the system libssl;
# utls_streams: the fork with the tap and sub-streams) and check that every
# message arrived exactly once, intact and in its stream's order, from the
# library the mode calls for. utls_streams needs root (CAP_NET_RAW for the
# tap): without it the test is skipped (exit 77).
set -euo pipefail
mode=$1 src=$2 out=$3 lib=$4
if [ "$mode" = utls_streams ] && [ "$(id -u)" != 0 ]; then
    echo "SKIP: utls_streams mode needs root (the tap opens an AF_PACKET socket)"; exit 77
fi
rm -rf "$out" && mkdir -p "$out"
cmake -S "$src" -B "$out/build" -G Ninja -Dutls_DIR="$lib/cmake/utls" >/dev/null
cmake --build "$out/build" >/dev/null
case $mode in
    tls) bin=$out/build/utls-substreams-stock require=stock ;;
    utls_streams) bin=$out/build/utls-substreams require=fork ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
recv_pid=
trap '[ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null; true' EXIT
"$bin" recv --mode "$mode" --listen 127.0.0.1:0 --count 400 --streams 4 --require "$require" \
    --ready "$out/ready" --out "$out/recv.jsonl" --timeout 60 --skip-without-tap --quiet &
recv_pid=$!
for _ in $(seq 200); do [ -s "$out/ready" ] && break; sleep 0.05; done
[ -s "$out/ready" ] || { echo "the receiver did not start"; exit 1; }
"$bin" send --mode "$mode" --connect "127.0.0.1:$(cat "$out/ready")" --count 400 --streams 4 \
    --interval 4 --require "$require" --out "$out/send.jsonl" --timeout 60 --quiet
set +e
wait "$recv_pid"; rc=$?
set -e
recv_pid=
[ "$rc" = 77 ] && { echo "SKIP: no CAP_NET_RAW for the tap"; exit 77; }
tail -1 "$out/recv.jsonl"
[ "$rc" = 0 ] || { echo "the receiver failed (exit $rc)"; exit 1; }
/usr/bin/python3 - "$out/recv.jsonl" "$mode" "$lib" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
start, end, msgs = lines[0], lines[-1], lines[1:-1]
mode, lib = sys.argv[2], sys.argv[3]
assert start["event"] == "start" and end["event"] == "end", "log incomplete"
if mode == "utls_streams":
    assert start["fork"] == 1 and start["libssl"].startswith(lib), start["libssl"]
    assert end["utls"]["fallback"].startswith("none"), end["utls"]["fallback"]
    assert end["streams"]["messages_received"] == 400, end["streams"]
else:
    assert start["fork"] == 0 and not start["libssl"].startswith(lib), start["libssl"]
for k in range(4):
    qs = [m["q"] for m in msgs if m.get("ok") == 1 and m["s"] == k]
    assert qs == list(range(100)), "stream %d: %s" % (k, qs[:20])
assert end["duplicates"] == 0 and end["bad"] == 0 and end["order_violations"] == 0
print("ok: %s mode, 4 streams x 100 messages once, intact, in order, libssl %s"
      % (mode, start["libssl"]))
PY

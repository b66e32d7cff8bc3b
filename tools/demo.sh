#!/usr/bin/env bash
# demo.sh BUILD — the headline demonstration (`make demo`).
#
# As root: Minion's streaming experiment, short. Three network-namespace
# testbeds (tools/testbed: sender -> router -> receiver, 100 ms RTT, 2% seeded
# loss) carry the same stream at the same time: 1000 records, one every 20 ms,
# over stock TLS (the system libssl, in order), uTLS (the fork with
# SSL_MODE_UNORDERED and the tap) and DTLS over UDP. It prints a side-by-side
# table, writes the latency CDF plot, a pcap of the uTLS run taken on the
# receiver (tcpdump --immediate-mode) with its TLS key log, and tears every
# testbed down, also on failure or Ctrl-C. About 40 s.
#
# Without root (no namespaces, no AF_PACKET tap) it runs the in-process lossy
# network instead (examples/unordered) and says so.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
fork=$build/lib/libssl.so.3
out=$build/demo
[ -f "$fork" ] || { echo "demo: $fork not built; run make first" >&2; exit 1; }
mkdir -p "$out"
t0=$SECONDS

if [ "$(id -u)" != 0 ]; then
    echo "demo: not root, so no network namespaces and no AF_PACKET tap: running the"
    echo "in-process lossy network instead (examples/unordered: a toy network inside one"
    echo "process loses every fifth TCP segment; run 'sudo make demo' for the real network)."
    echo
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    PKG_CONFIG_PATH=$build/lib/pkgconfig
    export PKG_CONFIG_PATH
    # shellcheck disable=SC2046
    cc -Wall "$src"/examples/unordered/unordered.c $(pkg-config --cflags --libs utls) \
        -o "$tmp/utls-unordered"
    "$tmp/utls-unordered"
    exit $?
fi

bindir=$build/examples/utls-stream
for b in utls-stream utls-stream-stock; do
    [ -x "$bindir/$b" ] || cmake --build "$build" --target "$b" >/dev/null
done
nfq=${UTLS_NFQ_DELAY:-$build/tools/testbed/nfq-delay}
[ -x "$nfq" ] || cmake --build "$build" --target nfq-delay >/dev/null 2>&1 || true
[ -x "$nfq" ] && export UTLS_NFQ_DELAY=$nfq
command -v tcpdump >/dev/null || { echo "demo: tcpdump is missing (make deps)" >&2; exit 1; }

prefix=udemo
cleanup() {
    local k
    for k in 0 1 2; do
        "$src/tools/testbed/testbed" --prefix "$prefix$k" -q down >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "uTLS demo: $(/usr/bin/python3 -c 'import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); l.UTLS_version.restype=ctypes.c_char_p; print(l.UTLS_version(2).decode())' "$fork")"
echo "records every 20 ms over a lossy 100 ms path: stock TLS vs uTLS vs DTLS (about 40 s)"
echo
/usr/bin/python3 "$src/bench/latency/run.py" --build "$build" --demo "$out" --prefix "$prefix" \
    --count "${DEMO_COUNT:-1000}" --interval 20 --rtt 100 --loss 2 --seed "${DEMO_SEED:-1}"
echo
# The one tshark command that lists, from the capture alone, the records uTLS
# delivered out of order (wireshark/ooo_records.py; the test
# wireshark.demo.ooo_command runs what it prints). The port is run.py's.
port=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import run; print(run.PORT)' \
    "$src/bench/latency")
if cmd=$(/usr/bin/python3 "$src/wireshark/ooo_records.py" --build "$build" --pcap "$out/utls.pcap" \
        --keylog "$out/utls.keys" --port "$port" --prepare 2>&1); then
    echo "The records uTLS delivered out of order, from the capture and key log alone (the build"
    echo "tree's Wireshark plugin: tshark as root ignores WIRESHARK_PLUGIN_DIR, so it runs as nobody):"
    echo
    echo "$cmd"
else
    echo "demo: no out-of-order listing: $cmd"
fi
echo
echo "demo: done in $((SECONDS - t0)) s; testbeds removed."

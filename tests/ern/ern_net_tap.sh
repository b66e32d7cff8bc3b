#!/usr/bin/env bash
# ern_net_tap.sh ERN_NET — out-of-sequence sending under explicit record
# numbers over tools/testbed (ctest ern.net_seal_tap, labels ern and net).
#
# Runs tests/ern/ern_net's two connections (shuffled sealed batches with
# drops, a replay; a record a window ahead) from the sender namespace to the
# receiver namespace over 100 ms RTT with 2% seeded loss, the receiver with
# SSL_MODE_UNORDERED reading first from the socket, then through the tap
# (records then also arrive past TCP holes), for TLS 1.3 and TLS 1.2 AES-GCM.
# ern_net checks everything itself and exits 1 on any failed check; with the
# tap this script also requires records delivered out of order. The testbed
# is torn down whatever happens. Needs root; without it exits 77 (skipped).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../net/lib.sh"
net_require_root "network namespaces, the AF_PACKET tap"
BIN=${1:?usage: ern_net_tap.sh ERN_NET}
net_init "uern$$" ern-net-tap
NET_PID_VARS=RECV_PID
RECV_PID=
RRC=1

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
net_testbed_up --rtt 100 --loss 2 --seed 4243
ADDR=$("$TB" --prefix "$PREFIX" addr receiver):4433
rc=0
versions=("" --tls12)
for version in "${versions[@]}"; do
    for how in "" --tap; do
        rm -f "$WORK/ready"
        # shellcheck disable=SC2086 # empty options vanish
        "$TB" --prefix "$PREFIX" exec receiver -- "$BIN" recv --listen "$ADDR" $how $version \
            --ready "$WORK/ready" >"$WORK/recv.jsonl" &
        RECV_PID=$!
        net_wait_ready "$WORK/ready" receiver
        # shellcheck disable=SC2086
        "$TB" --prefix "$PREFIX" exec sender -- "$BIN" send --connect "$ADDR" $version ||
            { echo "FAIL: the sender failed (${how:-socket} ${version:-tls1.3})"; rc=1; }
        net_wait_receiver
        [ "$RRC" = 0 ] || { echo "FAIL: receiver exit $RRC (${how:-socket} ${version:-tls1.3})"; rc=1; }
        if [ "$how" = --tap ]; then
            ooo=$(sed -n 's/.*"out_of_order":\([0-9]*\).*/\1/p' "$WORK/recv.jsonl" | head -1)
            if [ "${ooo:-0}" -gt 0 ]; then
                echo "ok: $ooo records delivered out of order through the tap (${version:-tls1.3})"
            else
                echo "FAIL: no record delivered out of order through the tap (${version:-tls1.3})"
                rc=1
            fi
        fi
        head -2 "$WORK/recv.jsonl"
    done
done
[ "$rc" = 0 ] && echo "PASS: ern_net over the testbed, socket and tap, TLS 1.3 and 1.2"
exit $rc

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
. "$(dirname "${BASH_SOURCE[0]}")/../common/smoke_lib.sh"
smoke_root_for utls_streams
smoke_build
case $mode in
    tls) bin=$out/build/utls-substreams-stock require=stock ;;
    utls_streams) bin=$out/build/utls-substreams require=fork ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
smoke_run "$bin" "--count 400 --streams 4 --quiet" "--count 400 --streams 4 --interval 4 --quiet"
smoke_check utls_streams <<'PY'
from smoke_log import read_run
mode, start, end, msgs = read_run()
if mode == "utls_streams":
    assert end["streams"]["messages_received"] == 400, end["streams"]
for k in range(4):
    qs = [m["q"] for m in msgs if m.get("ok") == 1 and m["s"] == k]
    assert qs == list(range(100)), "stream %d: %s" % (k, qs[:20])
assert end["duplicates"] == 0 and end["bad"] == 0 and end["order_violations"] == 0
print("ok: %s mode, 4 streams x 100 messages once, intact, in order, libssl %s"
      % (mode, start["libssl"]))
PY

#!/usr/bin/env bash
# smoke.sh MODE SRCDIR OUTDIR LIBDIR — build utls-stream the way a user would
# (CMake, find_package(utls)), then stream 200 records over loopback in MODE
# (tls: the stock build with the system libssl; utls: the fork with the tap)
# and check that every record arrived exactly once and intact, from the
# library the mode calls for. utls needs root (CAP_NET_RAW for the tap):
# without it the test is skipped (exit 77).
set -euo pipefail
mode=$1 src=$2 out=$3 lib=$4
. "$(dirname "${BASH_SOURCE[0]}")/../common/smoke_lib.sh"
smoke_root_for utls
smoke_build
fork_bin=$out/build/utls-stream stock_bin=$out/build/utls-stream-stock
# ldd's output is captured first: `ldd | grep -q` under pipefail fails at
# random when grep exits early and ldd gets SIGPIPE.
fork_ldd=$(ldd "$fork_bin")
stock_ldd=$(ldd "$stock_bin")
grep -qF "libssl.so.3 => $lib/libssl.so.3" <<<"$fork_ldd" ||
    { echo "utls-stream is not linked to the fork in $lib"; echo "$fork_ldd"; exit 1; }
grep -q 'libssl.so.3 => /.*lib.*/libssl.so.3' <<<"$stock_ldd" &&
    ! grep -qF "$lib/libssl.so.3" <<<"$stock_ldd" ||
    { echo "utls-stream-stock is not linked to the system libssl"; echo "$stock_ldd"; exit 1; }
case $mode in
    tls) bin=$stock_bin require=stock ;;
    utls) bin=$fork_bin require=fork ;;
    dtls) bin=$stock_bin require=stock ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
smoke_run "$bin" "--count 200" "--count 200 --interval 2"
# The library the receiver reported, and every record once and intact.
smoke_check utls <<'PY'
from smoke_log import read_run
mode, start, end, recs = read_run()
if mode == "utls":
    assert end["tap"]["packets"] > 0, "the tap captured nothing"
idx = sorted(r["i"] for r in recs if r["ok"] == 1)
assert idx == list(range(200)), "records missing or repeated"
assert end["duplicates"] == 0 and end["bad"] == 0
print("ok: %s mode, 200 records once and intact, libssl %s" % (mode, start["libssl"]))
PY

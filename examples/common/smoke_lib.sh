# examples/common/smoke_lib.sh — what the streaming examples' smoke tests
# (utls-stream/smoke.sh, utls-substreams/smoke.sh) share. Sourced after
# `set -euo pipefail` and `mode=$1 src=$2 out=$3 lib=$4`:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../common/smoke_lib.sh"
#   smoke_root_for utls          # skip (77) without root in that mode
#   smoke_build                  # $out/build, as a user would build it
#   bin=... require=fork|stock
#   smoke_run "$bin" "RECV_ARGS" "SEND_ARGS"
#   smoke_check FORK_MODE <<'PY'  # Python checks of $out/recv.jsonl
#   ... (smoke_log.py: read_run) ...
#   PY

# smoke_root_for MODE: exits 77 (ctest: skipped) when $mode is MODE and this
# is not root (the tap opens an AF_PACKET socket).
smoke_root_for() {
    if [ "$mode" = "$1" ] && [ "$(id -u)" != 0 ]; then
        echo "SKIP: $1 mode needs root (the tap opens an AF_PACKET socket)"
        exit 77
    fi
}

# smoke_build: a fresh $out; $src configured and built in $out/build with
# CMake and find_package(utls) from $lib.
smoke_build() {
    rm -rf "$out" && mkdir -p "$out"
    cmake -S "$src" -B "$out/build" -G Ninja -Dutls_DIR="$lib/cmake/utls" >/dev/null
    cmake --build "$out/build" >/dev/null
}

# smoke_run BIN "RECV_ARGS" "SEND_ARGS": over loopback, runs
# `BIN recv --mode $mode --listen 127.0.0.1:0 RECV_ARGS` in the background
# (ready file $out/ready, log $out/recv.jsonl, --skip-without-tap), then
# `BIN send --mode $mode --connect 127.0.0.1:PORT SEND_ARGS` (log
# $out/send.jsonl), both with --require $require --timeout 60, and waits for
# the receiver. Prints the receiver log's first and last lines. Exits 77 if
# the receiver skipped (no CAP_NET_RAW), 1 if it did not start or failed; a
# failed sender fails the script (set -e). The args strings split on spaces.
smoke_run() {
    local bin=$1 recv_args=$2 send_args=$3 rc
    smoke_recv_pid=
    trap '[ -n "$smoke_recv_pid" ] && kill "$smoke_recv_pid" 2>/dev/null; true' EXIT
    # shellcheck disable=SC2086 # the option strings are meant to split
    "$bin" recv --mode "$mode" --listen 127.0.0.1:0 $recv_args --require "$require" \
        --ready "$out/ready" --out "$out/recv.jsonl" --timeout 60 --skip-without-tap &
    smoke_recv_pid=$!
    for _ in $(seq 200); do [ -s "$out/ready" ] && break; sleep 0.05; done
    [ -s "$out/ready" ] || { echo "the receiver did not start"; exit 1; }
    # shellcheck disable=SC2086
    "$bin" send --mode "$mode" --connect "127.0.0.1:$(cat "$out/ready")" $send_args \
        --require "$require" --out "$out/send.jsonl" --timeout 60
    set +e
    wait "$smoke_recv_pid"; rc=$?
    set -e
    smoke_recv_pid=
    [ "$rc" = 77 ] && { echo "SKIP: no CAP_NET_RAW for the tap"; exit 77; }
    head -1 "$out/recv.jsonl"
    tail -1 "$out/recv.jsonl"
    [ "$rc" = 0 ] || { echo "the receiver failed (exit $rc)"; exit 1; }
}

# smoke_check FORK_MODE: runs the Python program on stdin with smoke_log.py
# importable; read_run(...) there reads $out/recv.jsonl as the run of $mode,
# from the fork in $lib when $mode is FORK_MODE, else the system libssl.
smoke_check() {
    PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")" /usr/bin/python3 - "$out/recv.jsonl" "$mode" "$lib" "$1"
}

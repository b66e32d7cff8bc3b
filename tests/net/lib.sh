# tests/net/lib.sh — the testbed boilerplate the tests/net scripts share.
#
# Sourced (not run) by stream_tap.sh, ucobs_tap.sh, substreams_tap.sh and
# forged_segments.sh, right after `set -uo pipefail`:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   net_require_root "network namespaces, the AF_PACKET tap"
#   net_init PREFIX WORKNAME     # HERE ROOT TB PY WORK, the cleanup trap
#   NET_PID_VARS="RECV_PID"      # variables holding pids to kill on exit
#   net_testbed_up --rtt 100 --loss 2 --seed 4242
# (or, for a streaming example run by net_run_stream:
#   net_stream_init "${1:-}" utls-stream PREFIX WORKNAME
#   net_testbed_up ...; ADDR=$(net_addr receiver 4433)
#   net_run_stream "$BIN" "$ADDR" "RECV_ARGS" "SEND_ARGS")
#   ... start the receiver with --ready "$WORK/ready" ...
#   net_wait_ready "$WORK/ready" receiver
#
# Why one copy: every network test must fail the same way when the testbed
# cannot be brought up or a peer does not start, and must leave nothing behind
# whatever happens (the other engineers' testbeds share this kernel). The
# cleanup trap is the part that has to be right; here it is written once.
# The scripts still call "$TB" --prefix "$PREFIX" exec ... themselves, not
# through a shell function: a backgrounded function runs in a subshell, so $!
# would be that subshell's pid, and a kill (the counter's TERM in
# forged_segments.sh, the trap's) would miss the real process.

# net_require_root REASON: exits 77 (ctest: skipped) unless run as root.
net_require_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "SKIP: needs root ($1)"
        exit 77
    fi
}

# net_init PREFIX WORKNAME: sets HERE (tests/net), ROOT (the repository), TB
# (tools/testbed/testbed), PREFIX (the testbed's namespaces are PREFIX-*), PY
# (python3) and WORK (a fresh /tmp/WORKNAME.XXXXXX directory), and installs the
# EXIT trap: kill every pid named by NET_PID_VARS, take the testbed down, FAIL
# (exit 1) if any PREFIX-* namespace is left, and remove WORK (kept, and
# named, when KEEP_WORK is set). INT/TERM exit 130 through the same trap.
net_init() {
    HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
    ROOT=$(cd "$HERE/../.." && pwd)
    TB=$ROOT/tools/testbed/testbed
    PREFIX=$1
    PY=/usr/bin/python3
    [ -x "$PY" ] || PY=$(command -v python3)
    WORK=$(mktemp -d "/tmp/$2.XXXXXX")
    NET_PID_VARS=
    trap net_cleanup EXIT
    trap 'exit 130' INT TERM
}

# net_cleanup: the EXIT trap installed by net_init; keeps the script's exit
# status unless the teardown left namespaces behind.
net_cleanup() {
    local rc=$? v
    for v in $NET_PID_VARS; do
        [ -n "${!v:-}" ] && kill "${!v}" 2>/dev/null
    done
    "$TB" --prefix "$PREFIX" -q down >/dev/null 2>&1
    if grep -q "^$PREFIX-" <<<"$(ip netns list)"; then
        echo "FAIL: namespaces of $PREFIX left behind after teardown"
        rc=1
    fi
    if [ -n "${KEEP_WORK:-}" ]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
    exit $rc
}

# net_stream_init BINDIR PROG PREFIX WORKNAME: net_init PREFIX WORKNAME for a
# test of a streaming example: BIN is BINDIR/PROG (FAIL and exit 1 if it is
# not built), RECV_PID (net_run_stream's receiver) is killed on exit. A
# missing BINDIR is a usage error (exit 2).
net_stream_init() {
    [ -n "${1:-}" ] || { echo "usage: $(basename "${BASH_SOURCE[-1]}") BINDIR"; exit 2; }
    net_init "$3" "$4"
    NET_PID_VARS=RECV_PID
    RECV_PID=
    BIN=$1/$2
    [ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
}

# net_addr NAMESPACE PORT: prints "ADDRESS:PORT" of that testbed namespace
# (receiver, sender).
net_addr() {
    echo "$("$TB" --prefix "$PREFIX" addr "$1"):$2"
}

# net_testbed_up UP_ARGS...: brings the testbed up (quietly); FAIL and exit 1
# if it cannot.
net_testbed_up() {
    "$TB" --prefix "$PREFIX" -q up "$@" || { echo "FAIL: testbed up"; exit 1; }
}

# net_wait_ready FILE WHAT [FILE WHAT]...: waits up to 10 s until every FILE
# is non-empty (the peers' --ready files); FAIL "the WHAT did not start" and
# exit 1 for the first one that is still empty.
net_wait_ready() {
    local _ f all
    for _ in $(seq 200); do
        all=1
        for f in $(printf '%s\n' "$@" | sed -n 'p;n'); do [ -s "$f" ] || all=; done
        [ -n "$all" ] && break
        sleep 0.05
    done
    while [ $# -ge 2 ]; do
        [ -s "$1" ] || { echo "FAIL: the $2 did not start"; exit 1; }
        shift 2
    done
}

# net_run_stream BIN ADDR "RECV_ARGS" "SEND_ARGS": one run of a streaming
# example (utls-stream, utls-substreams) over the testbed. Starts
# `BIN recv --listen ADDR RECV_ARGS` in the receiver namespace in the
# background (RECV_PID; log WORK/recv.jsonl), waits for its ready file, runs
# `BIN send --connect ADDR SEND_ARGS` in the sender namespace (log
# WORK/send.jsonl), both with --require fork --quiet, then net_wait_receiver
# (sets RRC). RECV_ARGS and SEND_ARGS are split on spaces. FAIL and exit 1 if
# the receiver does not start or the sender fails.
net_run_stream() {
    local bin=$1 addr=$2 recv_args=$3 send_args=$4
    # shellcheck disable=SC2086 # the option strings are meant to split
    "$TB" --prefix "$PREFIX" exec receiver -- "$bin" recv --listen "$addr" $recv_args \
        --require fork --ready "$WORK/ready" --out "$WORK/recv.jsonl" --quiet &
    RECV_PID=$!
    net_wait_ready "$WORK/ready" receiver
    # shellcheck disable=SC2086
    "$TB" --prefix "$PREFIX" exec sender -- "$bin" send --connect "$addr" $send_args \
        --require fork --out "$WORK/send.jsonl" --quiet ||
        { echo "FAIL: the sender failed"; exit 1; }
    net_wait_receiver
}

# net_stream_test BINDIR PROG PREFIX WORKNAME PORT "UP_ARGS" "ARGS" "SEND_ARGS":
# the run of a streaming-example test over the testbed, up to its checks:
# root (else exit 77), net_stream_init, the testbed up with UP_ARGS, the
# receiver listening on PORT of the receiver namespace (ADDR), then
# net_run_stream with ARGS for the receiver and ARGS SEND_ARGS for the
# sender (the mode, count and sizes both ends must agree on are written
# once). The caller checks the logs (WORK/recv.jsonl, WORK/send.jsonl).
net_stream_test() {
    net_require_root "network namespaces, the AF_PACKET tap"
    net_stream_init "$1" "$2" "$3" "$4"
    # shellcheck disable=SC2086 # the testbed options are meant to split
    net_testbed_up $6
    ADDR=$(net_addr receiver "$5")
    net_run_stream "$BIN" "$ADDR" "$7" "$7 $8"
}

# net_wait_receiver: waits for RECV_PID, sets RRC to its exit status, clears
# RECV_PID (nothing left to kill) and prints the status and the last line of
# WORK/recv.jsonl (the receiver's summary).
net_wait_receiver() {
    wait "$RECV_PID"
    RRC=$?
    RECV_PID=
    echo "receiver exit $RRC"
    tail -1 "$WORK/recv.jsonl"
}

# net_verdict PRC: the script's result: success only if the receiver (RRC)
# and the checks (PRC) both exited 0; says FAIL for a failed receiver.
net_verdict() {
    [ "$RRC" = 0 ] || echo "FAIL: receiver exit $RRC"
    [ "$RRC" = 0 ] && [ "$1" = 0 ]
}

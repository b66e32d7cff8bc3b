#!/usr/bin/env bash
# security35.sh run --prog P --valgrind V --libcrypto L --workdir D
#               --expect clean|error NAME=LIBSSL...
#
# Runs an attack program of this folder (set_ssl_ctx: CVE-2026-72897;
# dtls_retransmit: CVE-2026-84782) under valgrind once per libssl.so.3
# given, each beside the same libcrypto.so.3 (LD_LIBRARY_PATH: a directory
# with links to exactly that pair). For each it checks that the program
# mapped that libssl (its JSON line), that the attack situation arose (the
# programs exit 2 otherwise: that fails in both modes), and the outcome:
#   --expect clean  exit 0 (the program saw safe behaviour) and no invalid
#                   read or write under valgrind: the fixed fork, Debian
#                   13's libssl
#   --expect error  the program saw the bug (exit 1) or valgrind reported an
#                   invalid access (exit 99): a libssl without the fix
#                   (negative.sh)
# Prints one line per library; fails if any does not match.
set -euo pipefail
cmd=${1:?usage: security35.sh run ...}
shift
[ "$cmd" = run ] || { echo "security35.sh: unknown command $cmd" >&2; exit 1; }
prog= valgrind= libcrypto= workdir= expect=
libs=()
while [ $# -gt 0 ]; do
    case "$1" in
    --prog) prog=$2; shift 2 ;;
    --valgrind) valgrind=$2; shift 2 ;;
    --libcrypto) libcrypto=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    *=*) libs+=("$1"); shift ;;
    *) echo "security35.sh: unknown argument $1" >&2; exit 1 ;;
    esac
done
case "$expect" in clean|error) ;; *) echo "security35.sh: --expect clean or error" >&2; exit 1 ;; esac
command -v "$valgrind" >/dev/null 2>&1 ||
    { echo "FAIL: valgrind not found ($valgrind): apt-get install valgrind (tools/install-deps.sh)" >&2; exit 1; }
[ ${#libs[@]} -gt 0 ] || { echo "security35.sh: no library given" >&2; exit 1; }
mkdir -p "$workdir"
fail=0
for spec in "${libs[@]}"; do
    name=${spec%%=*}
    lib=$(realpath "${spec#*=}")
    dir=$workdir/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    ln -s "$lib" "$dir/libssl.so.3"
    ln -s "$(realpath "$libcrypto")" "$dir/libcrypto.so.3"
    rc=0
    # --error-exitcode: any invalid access, uninitialised use or bad free
    # fails the run; leaks are not this test's subject.
    LD_LIBRARY_PATH=$dir OPENSSL_CONF=/dev/null "$valgrind" --error-exitcode=99 --leak-check=no \
        --log-file="$dir/valgrind.log" "$prog" >"$dir/out.json" 2>"$dir/stderr.txt" || rc=$?
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["libssl"])' "$dir/out.json" 2>/dev/null || echo "?")
    summary="$(cat "$dir/out.json" 2>/dev/null | tr -d '\n') exit=$rc"
    if [ "$got" = "?" ] || [ "$(realpath "$got" 2>/dev/null || echo "$got")" != "$lib" ]; then
        echo "FAIL $name: the program mapped $got, not $lib ($summary)"
        cat "$dir/stderr.txt"
        fail=1
        continue
    fi
    if [ "$rc" = 2 ]; then
        echo "FAIL $name: the attack did not reach the server ($summary)"
        cat "$dir/stderr.txt"
        fail=1
        continue
    fi
    invalid=$(grep -cE 'Invalid (read|write)' "$dir/valgrind.log" || true)
    if [ "$expect" = clean ]; then
        if [ "$rc" = 0 ] && [ "$invalid" = 0 ]; then
            echo "ok   $name: safe, no memory error under valgrind ($summary)"
        else
            echo "FAIL $name: expected safe behaviour ($summary, $invalid invalid accesses under valgrind)"
            cat "$dir/stderr.txt"
            grep -A12 -E '^==[0-9]+== [A-Z]' "$dir/valgrind.log" | head -60
            fail=1
        fi
    else
        if { [ "$rc" = 1 ] || [ "$rc" = 99 ]; } && { [ "$rc" = 1 ] || [ "$invalid" != 0 ]; }; then
            echo "ok   $name: the bug shows, as expected without the fix ($summary, $invalid invalid accesses under valgrind)"
            grep -m1 -A10 -E 'Invalid (read|write)' "$dir/valgrind.log" || true
        else
            echo "FAIL $name: expected the bug to show ($summary, $invalid invalid accesses under valgrind)"
            fail=1
        fi
    fi
done
exit $fail

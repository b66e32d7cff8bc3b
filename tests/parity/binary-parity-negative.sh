#!/usr/bin/env bash
# binary-parity-negative.sh OUTDIR SYSTEM_LIBSSL: binary-parity.sh without
# openssl-patch/security/ must fail, naming exactly the functions those
# fixes change. Exit 0 when it does; 1 otherwise; 77 when binary-parity.sh
# cannot compare here.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: binary-parity-negative.sh OUTDIR SYSTEM_LIBSSL}
mkdir -p "$out/empty-series"
echo "# no security fixes: the base as Debian's served series leaves it" >"$out/empty-series/series"
UTLS_SECURITY_DIR=$out/empty-series bash "$here/binary-parity.sh" "$out" "$2" >"$out/compare.log" 2>&1
rc=$?
grep -v '^  prepare.sh' "$out/compare.log"
[ "$rc" = 77 ] && exit 77
if [ "$rc" != 1 ]; then
    echo "FAIL: without the security fixes the comparison returned $rc, expected 1 (differences)"
    exit 1
fi
got=$(sed -n 's/.*where the local build has \([a-z0-9_]*\) (.*/\1/p' "$out/compare.log" | sort | tr '\n' ' ')
want="dtls1_handle_timeout dtls1_retransmit_message tls1_change_cipher_state tls1_enc "
if [ "$got" != "$want" ]; then
    echo "FAIL: the functions that differ are '$got', expected '$want'"
    exit 1
fi
echo "PASS: without openssl-patch/security/ exactly the functions of CVE-2026-75806 and CVE-2026-84782 differ"

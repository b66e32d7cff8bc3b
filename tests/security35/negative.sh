#!/usr/bin/env bash
# negative.sh BUILD35 OUTDIR — the security35 tests must fail without
# openssl-patch/3.5/security/. Run once by hand (it builds a libssl of its
# own, a few minutes on 2 cores); its output is recorded in
# tests/security35/negative-run.txt. Needs `make BASE=3.5 build` and
# `cd build-3.5 && ctest -L security35` first (the attack programs, Debian
# 13's unpacked libssl and the tlslite-ng venv).
#
# 1. prepare.sh --stock builds the 3.5 stock tree (upstream 3.5.7 + Debian's
#    3.5.7-1~deb13u2 series) into OUTDIR with an EMPTY security series,
#    configured as Debian does, and OpenSSL's make links its libssl.so.3
#    against BUILD35's libcrypto.so.3 (copied in; `make -o` keeps make from
#    rebuilding libcrypto: the series touches ssl/ only).
# 2. The same attacks as the security35 tests, against that library ("nosec")
#    and, as the control, against BUILD35/stock/libssl.so.3 (the same tree
#    WITH the series, "stock"):
#      dtls_retransmit, set_ssl_ctx   nosec must show the bug, stock must not
#      parity dtls12 / tls12_aead     the short-record cases against Debian
#                                     13's libssl: nosec must differ, stock
#                                     must not
# Exit 0 only if every one of these holds.
set -euo pipefail
build=$(cd "${1:?usage: negative.sh BUILD35 OUTDIR}" && pwd)
mkdir -p "${2:?usage: negative.sh BUILD35 OUTDIR}"
out=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
t=$build/tests/security35
deb13=$t/debian13/libssl.so.3
for f in "$deb13" "$t/security35_set_ssl_ctx" "$t/security35_dtls_retransmit" "$build/lib/libcrypto.so.3" \
    "$build/stock/libssl.so.3" "$build/tests/parity/parity_server"; do
    [ -e "$f" ] || { echo "negative.sh: $f missing: make BASE=3.5 build; cd build-3.5 && ctest -L security35" >&2; exit 1; }
done

mkdir -p "$out/no-security"
printf '# empty: the 3.5 tree without openssl-patch/3.5/security/ (tests/security35/negative.sh)\n' \
    >"$out/no-security/series"
UTLS_BASE_FILE=$repo/openssl-patch/3.5/BASE UTLS_SECURITY_DIR=$out/no-security \
    bash "$repo/openssl-patch/prepare.sh" --stock "$out"
. "$repo/openssl-patch/3.5/BASE"
bs=$out/openssl-$UPSTREAM_VERSION-stock/build_shared
cp "$build/lib/libcrypto.so.3" "$bs/libcrypto.so.3"
ln -sfn libcrypto.so.3 "$bs/libcrypto.so"
make -C "$bs" -s -j"$(nproc)" -o libcrypto.so.3 -o libcrypto.so libssl.so.3
nosec=$bs/libssl.so.3
stock=$build/stock/libssl.so.3
echo "negative.sh: nosec = $nosec (SHA-256 $(sha256sum <"$nosec" | cut -d' ' -f1))"
echo "negative.sh: stock = $stock (SHA-256 $(sha256sum <"$stock" | cut -d' ' -f1))"

fail=0
run() {
    echo
    echo "### $*"
    "$@" || { echo "### FAILED: $*"; fail=1; }
}
for prog in dtls_retransmit set_ssl_ctx; do
    common=(bash "$here/security35.sh" run --prog "$t/security35_$prog" --valgrind valgrind
        --libcrypto "$build/lib/libcrypto.so.3" --workdir "$out/$prog")
    run "${common[@]}" --expect error nosec="$nosec"
    run "${common[@]}" --expect clean stock="$stock"
done
parity=(python3 "$repo/tests/parity/parity.py" --system "$deb13" --system-preload --fork-is-stock --ccm8-seclevel 0
    --openssl /usr/bin/openssl --server "$build/tests/parity/parity_server"
    --dtls-client "$build/tests/parity/parity_dtls_client" --venv "$build/tests/parity/tlslite-venv")
for g in dtls12 tls12_aead; do
    run "${parity[@]}" --fork "$nosec" --workdir "$out/$g-nosec" run --group "$g" --only short_len --expect-diff
    run "${parity[@]}" --fork "$stock" --workdir "$out/$g-stock" run --group "$g" --only short_len
done
echo
[ "$fail" = 0 ] && echo "negative.sh: every test fails without the series and passes with it" ||
    echo "negative.sh: FAILED (see above)"
exit "$fail"

#!/usr/bin/env bash
# debian13-libssl.sh BASE_FILE LIBCRYPTO OUTDIR — Debian 13's real libssl.so.3
# (the package openssl-patch/3.5/BASE names, DEBIAN_LIBSSL_DEB), verified and
# unpacked into OUTDIR, as the reference the security35 tests compare the
# 3.5 fork with.
#
# The package is fetched and verified by tests/abi/extract-debian-syms.sh
# (pinned SHA-256, and trixie's InRelease, gpgv, -> Packages.xz -> the
# package); this script only unpacks the verified file. Its libssl.so.3 needs
# GLIBC <= 2.34 and runs here beside the 3.5 build's libcrypto.so.3 (the
# package's own libcrypto needs GLIBC 2.38 and does not load on Debian 12):
# OUTDIR/libcrypto.so.3 is a link to LIBCRYPTO, so that
# LD_LIBRARY_PATH=OUTDIR gives a program exactly that pair.
# Exit 0 and prints OUTDIR/libssl.so.3; 1 with the reason; 77 when the
# package is neither cached nor reachable (the tests then skip, and say so).
set -euo pipefail
base_file=${1:?usage: debian13-libssl.sh BASE_FILE LIBCRYPTO OUTDIR}
libcrypto=${2:?usage: debian13-libssl.sh BASE_FILE LIBCRYPTO OUTDIR}
out=${3:?usage: debian13-libssl.sh BASE_FILE LIBCRYPTO OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1090
. "$base_file"
rc=0
bash "$here/../abi/extract-debian-syms.sh" "$base_file" >/dev/null 2>"$out.verify.log" || rc=$?
if [ "$rc" != 0 ]; then
    cat "$out.verify.log" >&2
    exit "$rc"
fi
deb=${UTLS_OPENSSL_CACHE:-${HOME:-/root}/.cache/utls}/$DEBIAN_LIBSSL_DEB
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
dpkg-deb -x "$deb" "$out.tmp/pkg"
lib=$out.tmp/pkg/usr/lib/x86_64-linux-gnu/libssl.so.3
[ -f "$lib" ] || { echo "debian13-libssl.sh: $DEBIAN_LIBSSL_DEB has no libssl.so.3" >&2; exit 1; }
cp "$lib" "$out.tmp/libssl.so.3"
cp "$out.tmp/pkg/usr/share/doc/libssl3t64/changelog.Debian.gz" "$out.tmp/changelog.Debian.gz"
rm -rf "$out.tmp/pkg"
ln -s "$(cd "$(dirname "$libcrypto")" && pwd)/$(basename "$libcrypto")" "$out.tmp/libcrypto.so.3"
rm -rf "$out"
mv "$out.tmp" "$out"
# It must really load here, with that libcrypto, and make a context.
LD_LIBRARY_PATH=$out python3 -c '
import ctypes, sys
ssl = ctypes.CDLL(sys.argv[1])
ssl.TLS_method.restype = ctypes.c_void_p
ssl.SSL_CTX_new.restype = ctypes.c_void_p
ssl.SSL_CTX_new.argtypes = [ctypes.c_void_p]
sys.exit(0 if ssl.SSL_CTX_new(ssl.TLS_method()) else 1)' "$out/libssl.so.3" ||
    { echo "debian13-libssl.sh: $out/libssl.so.3 does not load (or make an SSL_CTX) with $libcrypto" >&2; exit 1; }
echo "debian13-libssl.sh: $DEBIAN_LIBSSL_DEB verified and unpacked, libssl.so.3 SHA-256 $(sha256sum <"$out/libssl.so.3" | cut -d' ' -f1)" >&2
echo "$out/libssl.so.3"

#!/usr/bin/env bash
# extract-debian-syms.sh BASE_FILE — prints the symbols Debian's libssl.so.3
# exports ("NAME NODE" lines, as check-abi.sh lists them) for a base whose
# distribution library is not installed here (the 3.5 base: Debian 13's
# libssl3t64 on a Debian 12 machine).
#
# The package BASE names (DEBIAN_LIBSSL_DEB) is fetched from its pool
# (DEBIAN_POOL_URI) into prepare.sh's cache and verified twice: the pinned
# SHA-256 (DEBIAN_LIBSSL_DEB_SHA256), and Debian's signed chain: the suite's
# InRelease (DEBIAN_DISTS_URI, gpgv against debian-archive-keyring) lists the
# SHA-256 of main/binary-amd64/Packages.xz, which lists the package's.
# Exit 0 with the list on stdout; 1 with the reason on stderr; 77 when the
# archive cannot be reached and nothing is cached (the test then skips).
set -euo pipefail
base_file=${1:?usage: extract-debian-syms.sh BASE_FILE}
# shellcheck disable=SC1090
. "$base_file"
for v in DEBIAN_LIBSSL_DEB DEBIAN_LIBSSL_DEB_SHA256 DEBIAN_POOL_URI DEBIAN_DISTS_URI; do
    [ -n "${!v:-}" ] || { echo "extract-debian-syms.sh: $base_file does not set $v" >&2; exit 1; }
done
cache=${UTLS_OPENSSL_CACHE:-${HOME:-/root}/.cache/utls}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
dists=$cache/dists/$(printf '%s' "$DEBIAN_DISTS_URI" | sed 's|^[a-z]*://||; s|[/:]|_|g')
deb=$cache/$DEBIAN_LIBSSL_DEB
mkdir -p "$dists"
fetch() { /usr/lib/apt/apt-helper download-file "$1" "$2.part" ${3:+"SHA256:$3"} >/dev/null 2>&1 && mv "$2.part" "$2"; }
sha() { sha256sum <"$1" | cut -d' ' -f1; }

if [ ! -s "$deb" ] || [ "$(sha "$deb")" != "$DEBIAN_LIBSSL_DEB_SHA256" ]; then
    fetch "$DEBIAN_POOL_URI/$(printf '%s' "$DEBIAN_LIBSSL_DEB" | sed 's/~/%7e/g')" "$deb" "$DEBIAN_LIBSSL_DEB_SHA256" || {
        echo "extract-debian-syms.sh: cannot fetch $DEBIAN_LIBSSL_DEB (offline?)" >&2
        exit 77
    }
fi
[ "$(sha "$deb")" = "$DEBIAN_LIBSSL_DEB_SHA256" ] || { echo "extract-debian-syms.sh: $deb does not match the pinned SHA-256" >&2; exit 1; }

# The signed chain, from the suite's current metadata (cached; fetched again
# when the cached index no longer lists the package).
pk=$dists/main_binary-amd64_Packages.xz
# Not `xzcat | grep -q`: an early exit would SIGPIPE xzcat under pipefail.
listed() { [ -s "$pk" ] && grep -q "^SHA256: $DEBIAN_LIBSSL_DEB_SHA256\$" < <(xzcat "$pk" 2>/dev/null); }
if [ ! -s "$dists/InRelease" ] || ! listed; then
    fetch "$DEBIAN_DISTS_URI/InRelease" "$dists/InRelease" && fetch "$DEBIAN_DISTS_URI/main/binary-amd64/Packages.xz" "$pk" || {
        echo "extract-debian-syms.sh: cannot fetch $DEBIAN_DISTS_URI metadata (offline?)" >&2
        exit 77
    }
fi
gpgv --keyring "$keyring" "$dists/InRelease" >/dev/null 2>&1 ||
    { echo "extract-debian-syms.sh: the signature on $dists/InRelease does not verify" >&2; exit 1; }
want=$(awk '/^SHA256:/ { s = 1; next } /^[A-Za-z]/ { s = 0 } s && $3 == "main/binary-amd64/Packages.xz" { print $1 }' "$dists/InRelease")
[ "$(sha "$pk")" = "$want" ] ||
    { echo "extract-debian-syms.sh: Packages.xz does not match the SHA-256 the signed InRelease lists" >&2; exit 1; }
listed || { echo "extract-debian-syms.sh: the signed Packages.xz does not list $DEBIAN_LIBSSL_DEB with the pinned SHA-256" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
lib=$tmp/usr/lib/x86_64-linux-gnu/libssl.so.3
[ -f "$lib" ] || { echo "extract-debian-syms.sh: $DEBIAN_LIBSSL_DEB has no libssl.so.3" >&2; exit 1; }
echo "SONAME $(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')" >&2
readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' |
    sed 's/@@*/ /' | awk 'NF == 1 { $2 = $1 } { print $1, $2 }' | sort -u

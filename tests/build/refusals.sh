#!/usr/bin/env bash
# refusals.sh CASE TARBALL — run prepare.sh on a deliberately bad input and
# print what it says; tests/expect-fail.sh then checks that it refused for the
# right reason. Each case works in a temporary directory of its own.
set -euo pipefail
case_name=${1:?case}
good=${2:?verified tarball}
# Debian's verified packaging, as prepare.sh left it (debian.tar.xz, .dsc).
good_debian=${3:-}
good_dsc=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
prepare=$here/../../openssl-patch/prepare.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UTLS_OPENSSL_CACHE=$tmp/cache

. "$here/../../openssl-patch/BASE"
run() { bash "$prepare" "$tmp/out"; }

case "$case_name" in
corrupted)
    # One flipped byte in the middle of the compressed data.
    cp "$good" "$tmp/bad.tar.gz"
    size=$(stat -c %s "$tmp/bad.tar.gz")
    printf '\x5a' | dd of="$tmp/bad.tar.gz" bs=1 seek=$((size / 2)) conv=notrunc status=none
    UTLS_OPENSSL_TARBALL=$tmp/bad.tar.gz UTLS_PREPARE_VERIFY_ONLY=1 run
    ;;
truncated)
    head -c $(($(stat -c %s "$good") - 4096)) "$good" >"$tmp/short.tar.gz"
    UTLS_OPENSSL_TARBALL=$tmp/short.tar.gz UTLS_PREPARE_VERIFY_ONLY=1 run
    ;;
repacked)
    # Same files, same version, recompressed: readable, but not the pinned bytes.
    mkdir "$tmp/x"
    tar -C "$tmp/x" -xzf "$good"
    tar -C "$tmp/x" -czf "$tmp/repacked.tar.gz" "openssl-$UPSTREAM_VERSION"
    UTLS_OPENSSL_TARBALL=$tmp/repacked.tar.gz UTLS_PREPARE_VERIFY_ONLY=1 run
    ;;
wrong-version)
    # An OpenSSL source tarball of another release (its VERSION.dat says 3.0.21).
    mkdir -p "$tmp/x/openssl-3.0.21"
    tar -xzOf "$good" --wildcards '*/VERSION.dat' | sed 's/^PATCH=.*/PATCH=21/' >"$tmp/x/openssl-3.0.21/VERSION.dat"
    tar -C "$tmp/x" -czf "$tmp/openssl_3.0.21.orig.tar.gz" openssl-3.0.21
    UTLS_OPENSSL_TARBALL=$tmp/openssl_3.0.21.orig.tar.gz UTLS_PREPARE_VERIFY_ONLY=1 run
    ;;
old-libcrypto)
    # A base newer than the installed libcrypto.
    sed 's/^MIN_LIBCRYPTO=.*/MIN_LIBCRYPTO=3.0.99/' "$here/../../openssl-patch/BASE" >"$tmp/BASE"
    UTLS_BASE_FILE=$tmp/BASE UTLS_OPENSSL_TARBALL=$good UTLS_PREPARE_VERIFY_ONLY=1 run
    ;;
patch-does-not-apply)
    # A patch against lines that are not in 3.0.22.
    mkdir "$tmp/patches"
    cat >"$tmp/patches/0001-bad.patch" <<'PATCH'
--- a/ssl/ssl_lib.c
+++ b/ssl/ssl_lib.c
@@ -1,3 +1,3 @@
-This line is not in OpenSSL.
+Nor is this one.
 Nor this.
PATCH
    echo 0001-bad.patch >"$tmp/patches/series"
    UTLS_PATCH_DIR=$tmp/patches UTLS_OPENSSL_TARBALL=$good \
        UTLS_DEBIAN_PATCHES=$good_debian UTLS_DEBIAN_DSC=$good_dsc run
    ;;
debian-tampered)
    # Debian's patch series with one byte changed.
    cp "$good_debian" "$tmp/debian.tar.xz"
    size=$(stat -c %s "$tmp/debian.tar.xz")
    printf '\x5a' | dd of="$tmp/debian.tar.xz" bs=1 seek=$((size / 2)) conv=notrunc status=none
    UTLS_OPENSSL_TARBALL=$good UTLS_DEBIAN_PATCHES=$tmp/debian.tar.xz UTLS_DEBIAN_DSC=$good_dsc run
    ;;
dsc-forged)
    # The .dsc still lists the right SHA-256, but its signed text was changed
    # (one more uploader): the uploader's signature no longer verifies.
    sed 's/^\(Uploaders: .*\)$/\1, Mallory <mallory@example.invalid>/' "$good_dsc" >"$tmp/forged.dsc"
    UTLS_OPENSSL_TARBALL=$good UTLS_DEBIAN_PATCHES=$good_debian UTLS_DEBIAN_DSC=$tmp/forged.dsc run
    ;;
*)
    echo "refusals.sh: unknown case $case_name" >&2
    exit 2
    ;;
esac

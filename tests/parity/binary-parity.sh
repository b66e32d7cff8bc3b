#!/usr/bin/env bash
# binary-parity.sh OUTDIR SYSTEM_LIBSSL: is the fork's base the system's libssl?
#
# Builds the stock libssl.so.3 the fork is made from -- the verified upstream
# tarball, Debian's patch series, openssl-patch/security/, none of uTLS --
# with Debian's own Configure target and build flags, and compares its
# machine code function by function with the system's libssl.so.3
# (fde_compare.py). Equal function sizes mean the fork's base carries the
# same changes as the distribution's build; a difference names the function
# a distribution fix touched that we do not carry (or the reverse).
#
# Exit 0: same; 1: differences (listed); 77: cannot be checked here (the
# system library is not the Debian version BASE names, so it is not the
# build to compare with; tools/check-base.sh reports that case on its own).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: binary-parity.sh OUTDIR SYSTEM_LIBSSL}
system=${2:?usage: binary-parity.sh OUTDIR SYSTEM_LIBSSL}
. "$repo/openssl-patch/BASE"

have=$(dpkg-query -W -f='${Version}' libssl3 2>/dev/null || true)
if [ "$have" != "$DEBIAN_VERSION" ]; then
    echo "SKIP: the system libssl3 is '${have:-not installed}', not $DEBIAN_VERSION (openssl-patch/BASE): no reference build to compare with"
    exit 77
fi

bash "$repo/openssl-patch/prepare.sh" --stock "$out" | sed 's/^/  /'
bs=$out/openssl-$UPSTREAM_VERSION-stock/build_shared
# The objects libssl.so.3 is made of, from the configured Makefile.
objs=$(awk '/^libssl\.so\.3:/ { f = 1 } f { print; if ($0 !~ /\\$/) exit }' "$bs/Makefile" |
    tr -d '\\' | sed 's/^libssl\.so\.3://' | tr ' ' '\n' | grep '\.o$')
echo "binary-parity: compiling $(wc -l <<<"$objs") libssl objects with Debian's flags"
make -C "$bs" -s -j"$(nproc)" $objs >"$out/stock-make.log" 2>&1 || {
    tail -20 "$out/stock-make.log"
    echo "FAIL: the stock libssl objects do not compile"
    exit 1
}
# Linked as debian/rules links it (no -Bsymbolic, -z relro -z now), against
# the system libcrypto; only the code is compared, not the link.
ldflags=$(DEB_BUILD_MAINT_OPTIONS="$DEBIAN_BUILD_MAINT_OPTIONS" dpkg-buildflags --get LDFLAGS)
# shellcheck disable=SC2086
(cd "$bs" && cc -shared -o libssl.so.3 -Wl,-soname=libssl.so.3 -Wl,--version-script=libssl.ld \
    $ldflags $objs -lcrypto)
python3 "$here/fde_compare.py" "$system" "$bs/libssl.so.3"

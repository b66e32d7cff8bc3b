#!/usr/bin/env bash
# check-base.sh: is the fork as patched as the system's libssl3?
#
# openssl-patch/BASE names the Debian version of libssl3 whose fixes the fork
# carries (DEBIAN_VERSION). When the distribution ships a newer one -- a
# security update -- the fork lacks its fixes until someone rebases it, and
# preloading it would downgrade the program's TLS. `make test` runs this
# first, so that it never passes over that silently. One line either way.
#
# UTLS_SYSTEM_LIBSSL3_VERSION overrides what dpkg reports (for tests).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../openssl-patch/BASE"

have=${UTLS_SYSTEM_LIBSSL3_VERSION:-$(dpkg-query -W -f='${Version}' libssl3 2>/dev/null || true)}
if [ -z "$have" ]; then
    echo "check-base: FAIL: no libssl3 package installed; run tools/install-deps.sh" >&2
    exit 1
fi
if dpkg --compare-versions "$have" gt "$DEBIAN_VERSION"; then
    echo "check-base: FAIL: the system libssl3 is $have, newer than $DEBIAN_VERSION that the fork matches (openssl-patch/BASE): rebase the fork to $have (README.md, \"Security updates\")" >&2
    exit 1
fi
if dpkg --compare-versions "$have" lt "$DEBIAN_VERSION"; then
    echo "check-base: FAIL: the system libssl3 is $have, older than $DEBIAN_VERSION that the fork matches: the parity tests need that one (apt-get install libssl3=$DEBIAN_VERSION libssl-dev=$DEBIAN_VERSION openssl=$DEBIAN_VERSION)" >&2
    exit 1
fi
echo "check-base: the fork matches the system libssl3 $have"

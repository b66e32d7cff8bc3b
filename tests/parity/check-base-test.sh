#!/usr/bin/env bash
# check-base-test.sh CHECK_BASE: tools/check-base.sh passes for the version
# BASE names and fails with one line for a newer and an older one.
set -uo pipefail
check=${1:?usage: check-base-test.sh CHECK_BASE}
. "$(dirname "$check")/../openssl-patch/BASE"
fail=0
expect() {  # expect RC TEXT VERSION: exit RC and one line that contains TEXT
    local out rc
    out=$(UTLS_SYSTEM_LIBSSL3_VERSION=$3 bash "$check" 2>&1)
    rc=$?
    if [ "$rc" != "$1" ] || [ "$(wc -l <<<"$out")" != 1 ] || ! grep -qF -- "$2" <<<"$out"; then
        echo "FAIL: version $3: exit $rc, output: $out"
        fail=1
    else
        echo "ok: version $3: $out"
    fi
}
expect 0 "matches the system libssl3 $DEBIAN_VERSION" "$DEBIAN_VERSION"
# A Debian security update of the same upstream version, and a new upstream.
expect 1 "newer than $DEBIAN_VERSION that the fork matches (openssl-patch/BASE): rebase the fork to $DEBIAN_VERSION.1" "$DEBIAN_VERSION.1"
expect 1 "rebase the fork to 9.9.9-1" "9.9.9-1"
expect 1 "older than $DEBIAN_VERSION" "3.0.11-1~deb12u1"
exit $fail

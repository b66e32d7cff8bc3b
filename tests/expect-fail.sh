#!/usr/bin/env bash
# expect-fail.sh PATTERN CMD... — passes only if CMD exits 1 and prints PATTERN:
# proof that a check can fail for the reason it exists, not for any reason.
set -uo pipefail
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 1 ]; then
    echo "expect-fail: expected exit 1, got $rc"
    exit 1
fi
if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "expect-fail: the failure did not mention /$pattern/"
    exit 1
fi
echo "expect-fail: failed as it should (/$pattern/)"

#!/usr/bin/env bash
# same-headers.sh DIR — every header OpenSSL's Configure generated for the fork
# equals the one Debian's libssl-dev installed (configuration.h is the one
# that records the build options).
set -uo pipefail
dir=${1:?generated include dir}
fail=0 n=0
for h in "$dir"/openssl/*.h; do
    b=$(basename "$h")
    sys=/usr/include/openssl/$b
    [ "$b" = configuration.h ] && sys=/usr/include/x86_64-linux-gnu/openssl/configuration.h
    if [ ! -f "$sys" ]; then
        echo "no system copy of $b"
        fail=1
    elif ! cmp -s "$h" "$sys"; then
        echo "DIFFERENT: $b"
        diff "$sys" "$h" | head -20
        fail=1
    fi
    n=$((n + 1))
done
[ $n -gt 20 ] || { echo "only $n generated headers found in $dir"; fail=1; }
[ $fail = 0 ] && echo "all $n generated headers equal the system's (configuration.h included)"
exit $fail

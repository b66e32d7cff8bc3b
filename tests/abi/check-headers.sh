#!/usr/bin/env bash
# check-headers.sh CC CXX INCLUDE_DIR — every part of the uTLS API
# (<openssl/utls_*.h>) and the umbrella <openssl/utls.h> compiles on its own,
# as C and as C++, with warnings as errors: a program may include any one of
# them alone. Also: the umbrella includes every part there is.
set -uo pipefail
cc=${1:?cc} cxx=${2:?c++} inc=${3:?include dir}
fail=0 n=0
for h in "$inc"/openssl/utls.h "$inc"/openssl/utls_*.h; do
    b=$(basename "$h")
    for lang in c c++; do
        compiler=$cc
        [ $lang = c++ ] && compiler=$cxx
        if ! printf '#include <openssl/%s>\nint main(void) { return 0; }\n' "$b" |
            "$compiler" -x $lang -fsyntax-only -Wall -Wextra -Werror -I "$inc" -; then
            echo "FAIL: <openssl/$b> does not compile alone as $lang"
            fail=1
        fi
    done
    n=$((n + 1))
    if [ "$b" != utls.h ] && ! grep -q "^# include <openssl/$b>" "$inc/openssl/utls.h"; then
        echo "FAIL: <openssl/utls.h> does not include <openssl/$b>"
        fail=1
    fi
done
[ $fail = 0 ] && echo "check-headers: $n headers compile alone as C and C++; utls.h includes every part"
exit $fail

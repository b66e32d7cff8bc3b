#!/usr/bin/env bash
# tap_notice.sh FORK PYTHON: an unmodified program that is asked for the tap
# (UTLS_MODE=unordered,tap) and cannot have it -- no CAP_NET_RAW -- runs
# normally, in order, and says so in exactly one line on stderr however many
# SSL_CTXs it makes; UTLS_QUIET=1 silences the line; with CAP_NET_RAW there is
# none. "unordered" without a scope word (port=, alpn=, sni=, all) is refused
# in one line, however many SSL_CTXs, and the program runs in order. Python's
# ssl module is the unmodified program (two SSL_CTX_new()s).
set -uo pipefail
fork=${1:?usage: tap_notice.sh FORK PYTHON}
py=${2:?usage: tap_notice.sh FORK PYTHON}
prog='import ssl; ssl.create_default_context(); ssl.create_default_context(); print("program ran")'
want='uTLS: UTLS_MODE/UTLSMode asks for the tap, but it cannot be opened (the tap needs CAP_NET_RAW'
unpriv=()
if [ "$(id -u)" = 0 ]; then
    unpriv=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all --bounding-set=-all)
fi
fail=0
check() {  # check LABEL EXPECTED_LINES OUTPUT
    local n
    n=$(grep -c '^uTLS: ' <<<"$3")
    if ! grep -q '^program ran$' <<<"$3"; then
        echo "FAIL ($1): the program did not run normally:"; echo "$3"; fail=1
    elif [ "$n" != "$2" ]; then
        echo "FAIL ($1): $n uTLS line(s) on stderr, expected $2:"; echo "$3"; fail=1
    elif [ "$2" = 1 ] && ! grep -qF "$want" <<<"$3"; then
        echo "FAIL ($1): the line does not say why:"; echo "$3"; fail=1
    else
        echo "ok ($1): $n line(s)$( [ "$2" = 1 ] && printf ': %s' "$(grep '^uTLS: ' <<<"$3")")"
    fi
}
out=$("${unpriv[@]}" env LD_PRELOAD="$fork" UTLS_MODE=unordered,tap,port=4433 "$py" -c "$prog" 2>&1)
check "no CAP_NET_RAW" 1 "$out"
out=$("${unpriv[@]}" env LD_PRELOAD="$fork" UTLS_MODE=unordered,tap,port=4433 UTLS_QUIET=1 "$py" -c "$prog" 2>&1)
check "no CAP_NET_RAW, UTLS_QUIET=1" 0 "$out"
out=$("${unpriv[@]}" env LD_PRELOAD="$fork" UTLS_MODE=unordered,all "$py" -c "$prog" 2>&1)
check "no tap asked for" 0 "$out"
want='uTLS: UTLS_MODE/UTLSMode "unordered" names no connections (add port=N, alpn=NAME, sni=NAME or all): every connection runs in order.'
out=$(env LD_PRELOAD="$fork" UTLS_MODE=unordered,tap "$py" -c "$prog" 2>&1)
check "no scope: refused" 1 "$out"
out=$(env LD_PRELOAD="$fork" UTLS_MODE=unordered,tap UTLS_QUIET=1 "$py" -c "$prog" 2>&1)
check "no scope, UTLS_QUIET=1" 0 "$out"
if [ "$(id -u)" = 0 ]; then
    out=$(env LD_PRELOAD="$fork" UTLS_MODE=unordered,tap,port=4433 "$py" -c "$prog" 2>&1)
    check "root, the tap opens" 0 "$out"
fi
exit $fail

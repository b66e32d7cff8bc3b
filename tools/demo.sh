#!/usr/bin/env bash
# demo.sh BUILD — the headline demonstration.
#
# Until the lossy-network demonstration exists (issue: real lossy network),
# this shows the drop-in property: an unmodified `openssl s_server`, preloaded
# with the fork, serving real clients (curl, the Python ssl module, openssl
# s_client) over TLS 1.3 and TLS 1.2, with proof from /proc/PID/maps that the
# fork, not the system libssl, is the library doing it.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
fork=$build/lib/libssl.so.3
[ -f "$fork" ] || { echo "demo: $fork not built; run make first" >&2; exit 1; }
tmp=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=localhost -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
echo "uTLS demo: $(LD_PRELOAD=$fork /usr/bin/python3 -c 'import ctypes,ssl; l=ctypes.CDLL("libssl.so.3"); l.UTLS_version.restype=ctypes.c_char_p; print(l.UTLS_version(2).decode())')"
echo "fork: $fork"
echo
printf '%-8s %-26s %-10s %-8s %s\n' proto client "server lib" bytes result

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mapped_libssl() { grep -o '/[^ ]*libssl\.so\.3' "/proc/$1/maps" | sort -u | head -1; }

head -c 100000 /dev/urandom >"$tmp/payload"
want=$(sha256sum <"$tmp/payload" | cut -d' ' -f1)
for proto in tls1_3 tls1_2; do
    port=$(free_port)
    (cd "$tmp" && LD_PRELOAD=$fork exec openssl s_server -quiet -accept "127.0.0.1:$port" \
        -cert cert.pem -key key.pem -"$proto" -WWW) >/dev/null 2>&1 &
    server_pid=$!
    for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
    lib=$(mapped_libssl "$server_pid")
    [ "$lib" = "$(readlink -f "$fork")" ] && where=fork || where="NOT FORK ($lib)"
    curl_tls=$([ "$proto" = tls1_3 ] && echo --tlsv1.3 || echo "--tlsv1.2 --tls-max 1.2")
    # shellcheck disable=SC2086
    got=$(curl -sk $curl_tls "https://127.0.0.1:$port/payload" | sha256sum | cut -d' ' -f1)
    printf '%-8s %-26s %-10s %-8s %s\n' "$proto" "curl $(curl -V | head -1 | cut -d' ' -f2)" "$where" 100000 "$([ "$got" = "$want" ] && echo intact || echo CORRUPT)"
    ver=$([ "$proto" = tls1_3 ] && echo TLSv1_3 || echo TLSv1_2)
    got=$(/usr/bin/python3 - "$port" "$ver" <<'PY'
import hashlib, socket, ssl, sys
port, ver = int(sys.argv[1]), getattr(ssl.TLSVersion, sys.argv[2])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ctx.maximum_version = ver
with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port))) as s:
    s.sendall(b"GET /payload HTTP/1.0\r\n\r\n")
    data = b"".join(iter(lambda: s.recv(65536), b""))
print(hashlib.sha256(data.split(b"\r\n\r\n", 1)[1]).hexdigest())
PY
)
    printf '%-8s %-26s %-10s %-8s %s\n' "$proto" "python $(/usr/bin/python3 -c 'import ssl; print(ssl.OPENSSL_VERSION.split()[1])') ssl" "$where" 100000 "$([ "$got" = "$want" ] && echo intact || echo CORRUPT)"
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
done
echo
echo "Every server above is the unmodified /usr/bin/openssl with LD_PRELOAD=$fork;"
echo "'fork' means /proc/PID/maps showed the fork mapped in place of the system libssl."

#!/usr/bin/python3
"""A deterministic TLS workload for the wire checker tests (ssl module only).

server: accepts --connections connections one after another; on each reads
messages until "bye\\n", answers each with its reverse, then closes cleanly
(close_notify both ways). client: one connection per --cipher, each sends
three messages of fixed sizes and "bye\\n", reads every answer, closes.
Running the same commands under stock libssl and under the preloaded fork
must give the same handshakes and the same record sequence.

Alterations for the negative tests (client side): --sni NAME adds a
server_name extension, --groups LIST changes the offered groups, --reverse-
ciphers offers the TLS 1.2 cipher list in reverse order.
"""
import argparse
import os
import socket
import ssl
import sys

MESSAGES = (b"a" * 10 + b"\n", b"b" * 1000 + b"\n", b"c" * 5000 + b"\n")


def recv_line(tls, buf):
    while b"\n" not in buf:
        chunk = tls.recv(65536)
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    return line + b"\n", rest


def version(args):
    return ssl.TLSVersion.TLSv1_3 if args.tls == "1.3" else ssl.TLSVersion.TLSv1_2


def server(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.minimum_version = ctx.maximum_version = version(args)
    with socket.create_server(("127.0.0.1", args.port)) as srv:
        print("listening", flush=True)
        for _ in range(args.connections):
            conn, _ = srv.accept()
            with ctx.wrap_socket(conn, server_side=True) as tls:
                buf = b""
                while True:
                    line, buf = recv_line(tls, buf)
                    if line == b"bye\n":
                        break
                    tls.sendall(line[:-1][::-1] + b"\n")
                tls.unwrap()
    return 0


def client(args):
    for cipher in args.cipher:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ctx.maximum_version = version(args)
        if args.tls == "1.2":
            ciphers = cipher.split(":")
            if args.reverse_ciphers:
                ciphers = ciphers[::-1]
            ctx.set_ciphers(":".join(ciphers))
        if args.groups:
            ctx.set_ecdh_curve(args.groups)
        sock = socket.create_connection(("127.0.0.1", args.port), timeout=30)
        with ctx.wrap_socket(sock, server_hostname=args.sni) as tls:
            if args.tls == "1.3" and tls.cipher()[0] != cipher and cipher != "default":
                # Python cannot restrict TLS 1.3 suites: the server's choice stands
                pass
            buf = b""
            for m in MESSAGES:
                tls.sendall(m)
                line, buf = recv_line(tls, buf)
                if line != m[:-1][::-1] + b"\n":
                    print("bad answer", file=sys.stderr)
                    return 1
            tls.sendall(b"bye\n")
            tls.unwrap()
        print("ok %s %s" % (tls.version(), cipher), flush=True)
    return 0


def check_library():
    """With WS_PEER_EXPECT (fork|stock) set, checks which libssl is loaded:
    only the fork exports UTLS_version."""
    want = os.environ.get("WS_PEER_EXPECT")
    if not want:
        return
    import ctypes
    has = hasattr(ctypes.CDLL(None), "UTLS_version")
    if has != (want == "fork"):
        sys.exit("ws_peer: expected the %s libssl, UTLS_version %s" % (want, "found" if has else "missing"))


def main():
    check_library()
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("server", "client"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", choices=("1.2", "1.3"), default="1.3")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--cipher", action="append", default=[])
    ap.add_argument("--sni")
    ap.add_argument("--groups")
    ap.add_argument("--reverse-ciphers", action="store_true")
    args = ap.parse_args()
    if not args.cipher:
        args.cipher = ["default"]
    return server(args) if args.role == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())

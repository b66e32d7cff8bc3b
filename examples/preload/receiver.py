#!/usr/bin/python3
"""An ordinary TLS server: the standard ssl module and nothing else.

It accepts one connection, reads one message per recv() and prints each
message's sequence number in the order it arrives, until the peer closes.
It knows nothing about uTLS. Run unchanged with the fork preloaded and
UTLS_MODE=unordered,tap,port=4433, a message whose TLS record arrived complete after a
lost TCP segment is returned before the lost one is retransmitted, so the
numbers can come out of order (see README.md).

  receiver.py --port 4433 --cert cert.pem --key key.pem [--tls 1.2|1.3]
"""
import argparse
import socket
import ssl
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--tls", choices=("1.2", "1.3"), default="1.3")
    args = ap.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    version = ssl.TLSVersion.TLSv1_3 if args.tls == "1.3" else ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = ctx.maximum_version = version

    with socket.create_server((args.bind, args.port)) as srv:
        print("listening", flush=True)
        conn, _ = srv.accept()
        with ctx.wrap_socket(conn, server_side=True) as tls:
            while True:
                msg = tls.recv(65536)
                if not msg:
                    tls.unwrap()  # answer the sender's close_notify
                    break
                # Each message starts "seq=000042 ". With the fork in unordered
                # mode a recv() returns exactly one TLS record, so one message;
                # stock OpenSSL may return several records' data in one call.
                for part in msg.split(b"seq=")[1:]:
                    print(int(part[:6]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

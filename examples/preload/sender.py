#!/usr/bin/python3
"""Sends --count messages over TLS, one TLS record each, numbered from 0.

  sender.py --host 10.0.0.2 --port 4433 --count 400 --size 1000 [--tls 1.3]
"""
import argparse
import socket
import ssl
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--size", type=int, default=1000, help="message bytes (one TLS record each, < 16384)")
    ap.add_argument("--interval", type=float, default=0.002, help="seconds between messages")
    ap.add_argument("--tls", choices=("1.2", "1.3"), default="1.3")
    ap.add_argument("--connect-timeout", type=float, default=10.0)
    args = ap.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the example's throwaway certificate
    version = ssl.TLSVersion.TLSv1_3 if args.tls == "1.3" else ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = ctx.maximum_version = version

    deadline = time.monotonic() + args.connect_timeout
    while True:
        try:
            sock = socket.create_connection((args.host, args.port), timeout=args.connect_timeout)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with ctx.wrap_socket(sock) as tls:
        for i in range(args.count):
            head = b"seq=%06d " % i
            tls.sendall(head + b"x" * (args.size - len(head)))
            if args.interval:
                time.sleep(args.interval)
        # close_notify, then wait for the receiver's: closing at once with
        # unread data (the server's session tickets) would make the kernel send
        # RST and drop segments still waiting for retransmission
        try:
            tls.unwrap()
        except (ssl.SSLError, OSError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

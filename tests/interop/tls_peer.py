#!/usr/bin/python3
"""A TLS peer built on the Python interpreter's own `ssl` module.

Run by preload_interop.py under the real interpreter (/usr/bin/python3), with
or without LD_PRELOAD of the fork. Standard library only.

Protocol with the driver (one line per event on stdout, flushed):
  server: "LISTENING <port>" once bound, then "HANDSHAKE <version>" after the
          handshake; waits for a line "GO" on stdin; receives exactly --recv
          bytes (written to --out), sends the file --send, closes, prints
          "RESULT <json>".
  client: connects to --port, "HANDSHAKE <version>", waits for "GO", sends the
          file --send, receives exactly --recv bytes (written to --out),
          closes, prints "RESULT <json>".
The RESULT carries what the process sees of itself: negotiated version and
cipher, the libssl files in /proc/self/maps, and UTLS_version(0) looked up
through ctypes in the libssl the `ssl` module is bound to (None when that
libssl is not the fork).
"""
import argparse
import ctypes
import hashlib
import json
import os
import socket
import ssl
import sys

VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def wait_go():
    line = sys.stdin.buffer.readline()
    if line.strip() != b"GO":
        raise SystemExit("tls_peer: expected GO on stdin, got %r" % line)


def libssl_in_maps():
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5]).startswith("libssl.so"):
                found.add(parts[5])
    return sorted(found)


def utls_version():
    """UTLS_version(0) from the libssl.so.3 already loaded (the one _ssl uses).

    RTLD_NOLOAD: never load a library here, only look at the one in use; the
    dynamic loader matches the name against the SONAME of loaded objects, so
    a preloaded fork at any path is found under "libssl.so.3"."""
    try:
        lib = ctypes.CDLL("libssl.so.3", mode=os.RTLD_NOLOAD)
    except OSError:
        return None
    try:
        fn = lib.UTLS_version
    except AttributeError:
        return None
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_int]
    return {"short": fn(0).decode(), "full": fn(2).decode()}


def recv_exact(s, n):
    chunks, got = [], 0
    while got < n:
        b = s.recv(min(65536, n - got))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def close_tls(s):
    # Send close_notify; the peer's answer is not part of what is checked.
    try:
        s.settimeout(5)
        s.unwrap().close()
    except (OSError, ValueError, ssl.SSLError):
        s.close()


def report(s, received, out):
    with open(out, "wb") as f:
        f.write(received)
    return {
        "version": s.version(),
        "cipher": s.cipher()[0],
        "received_len": len(received),
        "received_sha256": hashlib.sha256(received).hexdigest(),
        "libssl_maps": libssl_in_maps(),
        "utls_version": utls_version(),
        "openssl_version": ssl.OPENSSL_VERSION,
        "executable": os.path.realpath(sys.executable),
    }


def make_ctx(a, server):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = VERSIONS[a.tls]
    if server:
        ctx.load_cert_chain(a.cert, a.key)
    else:
        ctx.load_verify_locations(cafile=a.cert)  # self-signed: it is its own CA
    return ctx


def run_server(a):
    ctx = make_ctx(a, True)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    ls.settimeout(a.timeout)
    emit("LISTENING %d" % ls.getsockname()[1])
    conn, _ = ls.accept()
    ls.close()
    conn.settimeout(a.timeout)
    s = ctx.wrap_socket(conn, server_side=True)
    emit("HANDSHAKE %s" % s.version())
    wait_go()
    received = recv_exact(s, a.recv)
    with open(a.send, "rb") as f:
        s.sendall(f.read())
    result = report(s, received, a.out)
    close_tls(s)
    emit("RESULT " + json.dumps(result))


def run_client(a):
    ctx = make_ctx(a, False)
    sock = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
    s = ctx.wrap_socket(sock, server_hostname="localhost")
    emit("HANDSHAKE %s" % s.version())
    wait_go()
    with open(a.send, "rb") as f:
        s.sendall(f.read())
    received = recv_exact(s, a.recv)
    result = report(s, received, a.out)
    close_tls(s)
    emit("RESULT " + json.dumps(result))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["client", "server"])
    p.add_argument("--tls", choices=sorted(VERSIONS), required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key")
    p.add_argument("--port", type=int)
    p.add_argument("--send", required=True, help="file whose bytes are sent")
    p.add_argument("--recv", type=int, required=True, help="bytes to receive")
    p.add_argument("--out", required=True, help="file the received bytes go to")
    p.add_argument("--timeout", type=float, default=20.0)
    a = p.parse_args()
    (run_server if a.role == "server" else run_client)(a)


if __name__ == "__main__":
    main()

"""tlslite-ng peer for the ERN interop matrix (run by the venv's interpreter).

server: accepts one connection on 127.0.0.1 (port printed as "LISTENING n"),
answers each line with the line reversed (like `openssl s_server -rev`).
client: sends each line of --msgs, waits for each answer before sending the
next, writes the answers to stdout.  Both print "VERSION TLSv1.x" on stderr.
"""
import argparse
import socket
import sys

from tlslite.api import (HandshakeSettings, TLSConnection, X509CertChain,
                         parsePEMKey)

VNAME = {(3, 3): "TLSv1.2", (3, 4): "TLSv1.3"}


def settings(tls):
    s = HandshakeSettings()
    v = (3, 3) if tls == "1.2" else (3, 4)
    s.minVersion = s.maxVersion = v
    return s


def readline(conn, buf):
    while b"\n" not in buf:
        d = conn.read()
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\n") + 1
    return buf[:i], buf[i:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["client", "server"])
    ap.add_argument("--tls", choices=["1.2", "1.3"], required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--port", type=int)
    ap.add_argument("--msgs")
    a = ap.parse_args()
    if a.role == "server":
        chain = X509CertChain()
        chain.parsePemList(open(a.cert).read())
        key = parsePEMKey(open(a.key).read(), private=True)
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        print("LISTENING %d" % ls.getsockname()[1], flush=True)
        s, _ = ls.accept()
        conn = TLSConnection(s)
        conn.handshakeServer(certChain=chain, privateKey=key, settings=settings(a.tls))
        sys.stderr.write("VERSION %s\n" % VNAME.get(conn.version, conn.version))
        sys.stderr.flush()
        buf, n = b"", 0
        while True:
            line, buf = readline(conn, buf)
            if line is None:
                break
            conn.write(line.rstrip(b"\r\n")[::-1] + b"\n")
            n += 1
        sys.stderr.write("DONE %d lines\n" % n)
        try:
            conn.close()
        except Exception:
            pass
        return 0
    s = socket.create_connection(("127.0.0.1", a.port))
    conn = TLSConnection(s)
    conn.handshakeClientCert(serverName="localhost", settings=settings(a.tls))
    sys.stderr.write("VERSION %s\n" % VNAME.get(conn.version, conn.version))
    sys.stderr.flush()
    buf, n = b"", 0
    for line in open(a.msgs, "rb").read().splitlines(True):
        conn.write(line)
        ans, buf = readline(conn, buf)
        if ans is None:
            sys.stderr.write("connection closed before answer %d\n" % n)
            return 1
        sys.stdout.buffer.write(ans)
        sys.stdout.flush()
        n += 1
    sys.stderr.write("DONE %d lines\n" % n)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

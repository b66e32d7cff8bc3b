#!/usr/bin/python3
"""uCOBS dissector test (ctest label wireshark). Standard library only.

A real uCOBS session over kernel TCP, captured with tcpdump and dissected by
tshark with the project's plugin:

  * an independent uCOBS sender and receiver (this file: its own COBS
    encoder and decoder, written from the wire format, not from core/) talk
    over the loopback of a network namespace of our own (prefix ucd, MTU
    1500, segmentation offloads off so the capture shows real segments);
  * tshark must show every datagram sent, decoded, byte-identical, in order,
    with matching ucobs.index, in both directions (an empty datagram, one of
    mostly zero bytes, 254/508 non-zero bytes, more than one segment, the
    65535-byte maximum);
  * with the heuristic off nothing is decoded; ucobs.tcp.port and Decode As
    force it; two passes (-2) give the same; a first datagram longer than a
    segment is found at the stream start;
  * duplicated and reordered input: every packet twice (mergecap); a lossy
    session (nftables drops) with its retransmissions, and with the lost
    originals removed (editcap: holes, late data) -- each datagram once;
    without TCP reassembly, or with holes and no out-of-order reassembly,
    only datagrams that were sent; a randomly corrupted copy (editcap -E)
    raises no exception;
  * a TLS session (Python's ssl, i.e. the system OpenSSL) in the same
    namespace is not claimed;
  * a corrupted stream (non-canonical frames, a zero inside a frame, an
    oversized frame, duplicates, a truncated end) gives the expert items and
    no datagram that was not sent;
  * the project's own C sender (UTLS_ucobs_send, through examples/utls-stream
    --mode ucobs, with --c-sender): this file's independent receiver and
    tshark both get every datagram, byte-identical, with utls-stream's
    header and index in order -- the C framer, the Python codec and the
    dissector agree on the wire format;
  * self-check: tampered expectations must make the comparison fail.

tshark runs as the unprivileged user nobody with WIRESHARK_PLUGIN_DIR set to
the build tree's plugin directory: as root it would load only the global
plugin directory, which other builds may overwrite at any time.

Usage (ctest): ucobs_session.py run --tshark T --plugin BUILD/wireshark/plugins/4.0/epan/utls.so
                                   --prefix ucd
Internal: serve / send / tls-serve / tls-send (run inside the namespace).
Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from tcpdump_capture import TcpdumpCapture, missing_prerequisite

SKIP = 77
MAX_DATAGRAM = 65535
# Ports inside our own namespace (nothing else listens there). Neither is a
# port Wireshark assigns to a dissector (checked at run time), so TCP offers
# the payloads to the heuristics.
PORT_SESSION, SPORT_SESSION = 47001, 47002
PORT_TLS = 47011
PORT_BAD, SPORT_BAD = 47021, 47022
PORT_BIGFIRST, SPORT_BIGFIRST = 47031, 47032
PORT_LOSSY, SPORT_LOSSY = 47041, 47042
PORT_CSENDER = 47051
# The project's own sender (examples/utls-stream --mode ucobs, i.e.
# UTLS_ucobs_send in the fork): C_COUNT datagrams of C_SIZE bytes, larger than
# a segment, each starting with utls-stream's header (magic "strm", index,
# send time, length, 0; little-endian).
C_COUNT, C_SIZE, C_MAGIC = 30, 3000, 0x6d727473
# Every LOSS_EVERY-th data packet of the lossy session is dropped by
# nftables at the receiver's input hook, after tcpdump on lo saw it: the
# capture holds the lost packet and its retransmission (duplicate data, a
# sender-side view). Removing the lost originals from the capture (editcap)
# gives the receiver-side view: holes, then data arriving out of order.
# Deterministic, so the test always has loss.
LOSS_EVERY = 5
# The dissector's expert items (each appears once per occurrence in PDML).
EXPERTS = ("ucobs.non_canonical", "ucobs.oversized", "ucobs.undelimited.expert", "ucobs.truncated",
           "ucobs.retransmission")
# The session's datagrams from this index on are written in one write, so
# segments hold many frames and cut them at arbitrary places.
BATCH_FROM = 12


class Fail(Exception):
    pass


def log(*a):
    print(*a, flush=True)


# ---- COBS, written independently of core/src/cobs.c -------------------------

def cobs_encode(data):
    """Canonical COBS: blocks of code c (1..255) and c-1 non-zero bytes; the
    input's implicit final zero is not written, and a 255-block that ends the
    input is not followed by an empty block."""
    out = bytearray()
    block = bytearray()
    for b in data:
        if b == 0:
            out.append(len(block) + 1)
            out += block
            block = bytearray()
        else:
            block.append(b)
            if len(block) == 254:
                out.append(255)
                out += block
                block = bytearray()
    # The last block: a short block, or the empty final block -- except right
    # after a 255-block that consumed the end of the input.
    ended_full = len(data) > 0 and data[-1] != 0 and len(block) == 0
    if not ended_full:
        out.append(len(block) + 1)
        out += block
    return bytes(out)


def cobs_decode(enc):
    """Inverse of cobs_encode; raises ValueError on a non-canonical input."""
    if not enc:
        raise ValueError("empty")
    out = bytearray()
    i = 0
    prev_full = False
    while i < len(enc):
        c = enc[i]
        if c == 0:
            raise ValueError("zero")
        block = enc[i + 1:i + c]
        if len(block) != c - 1 or 0 in block:
            raise ValueError("block runs past the end")
        i += c
        last = i == len(enc)
        if last and c == 1 and prev_full:
            raise ValueError("empty block after a 255-block")
        out += block
        if not last and c != 255:
            out.append(0)
        prev_full = c == 255
    if len(out) > MAX_DATAGRAM:
        raise ValueError("oversized")
    return bytes(out)


def frame(data):
    return b"\x00" + cobs_encode(data) + b"\x00"


def split_frames(stream):
    """Datagrams of a uCOBS byte stream: maximal non-empty runs of non-zero
    bytes with a zero on both sides."""
    runs = stream.split(b"\x00")
    # runs[0] has no leading zero, runs[-1] no trailing one.
    return [cobs_decode(r) for r in runs[1:-1] if r]


def self_test_codec():
    cases = {b"": b"\x01", b"\x00": b"\x01\x01", b"\x11\x22\x00\x33": b"\x03\x11\x22\x02\x33",
             bytes(range(1, 255)): b"\xff" + bytes(range(1, 255)),
             bytes(range(1, 255)) + b"\x00": b"\xff" + bytes(range(1, 255)) + b"\x01\x01"}
    for raw, enc in cases.items():
        if cobs_encode(raw) != enc or cobs_decode(enc) != raw:
            raise Fail("COBS self-test failed on %r" % raw[:8])
    for bad in (b"\x05\x41\x42", b"\xff" + bytes(range(1, 255)) + b"\x01", b"\x02"):
        try:
            cobs_decode(bad)
        except ValueError:
            continue
        raise Fail("COBS self-test: %r decoded" % bad[:8])
    rng = random.Random(1)
    for n in list(range(0, 600)) + [65535]:
        d = bytes(rng.choice((0, 1, 255, rng.randrange(256))) for _ in range(n))
        if cobs_decode(cobs_encode(d)) != d:
            raise Fail("COBS round trip failed at %d bytes" % n)


# ---- the workload ------------------------------------------------------------

def session_datagrams():
    rng = random.Random(9)
    nz = lambda n: bytes(rng.randrange(1, 256) for _ in range(n))
    anyb = lambda n: bytes(rng.randrange(256) for _ in range(n))
    return [
        b"hello uCOBS",
        b"",                                      # the empty datagram: 00 01 00
        b"\x00" * 200 + b"x" + b"\x00" * 57,      # mostly zero bytes
        b"\x00",
        nz(254),                                  # one 255-block, no final block
        nz(508),                                  # two 255-blocks
        anyb(1000),                               # longer than 254
        anyb(5000),                               # more than one segment (MSS 1448)
        b"between",
        anyb(MAX_DATAGRAM),                       # the maximum
        nz(MAX_DATAGRAM),                         # the maximum, longest encoding
        b"last",
    ] + [rng.choice((b"", b"\x00", b"\x00\x00", nz(rng.randrange(1, 300)), anyb(rng.randrange(1, 300))))
         for _ in range(40)]


def bad_stream():
    """(chunks written one by one, datagrams a receiver gets, non-canonical
    frames, oversized frames)."""
    rng = random.Random(5)
    chunks = [
        frame(b"before"),
        b"\x00\x05\x41\x42\x00",                                 # code 5, 2 bytes
        b"\x00\xff" + bytes(range(1, 255)) + b"\x01\x00",        # empty block after a 255-block
        frame(b"middle"),
        b"\x00\x04\x61\x00\x62\x63\x04\x64\x65\x66\x00",         # a zero inside abc\0def: 2 bad frames
        b"\x00" + bytes(rng.randrange(1, 256) for _ in range(70000)) + b"\x00",  # oversized
        frame(b"after"),
        frame(b"dup"),
        frame(b"dup"),                                           # duplicates are two datagrams
        b"\x00\x06trunc",                                        # the stream ends inside a frame
    ]
    return chunks, [b"before", b"middle", b"after", b"dup", b"dup"], 4, 1


# ---- peers (run inside the namespace) -----------------------------------------

def recv_all(sock):
    buf = bytearray()
    while True:
        b = sock.recv(65536)
        if not b:
            return bytes(buf)
        buf += b


def accept_one(port):
    """Listens on 127.0.0.1:|port|, says "listening" on stdout (the test
    waits for that line before it starts the client) and returns the first
    connection."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    print("listening", flush=True)
    c, _ = ls.accept()
    return c


def cmd_serve(a):
    c = accept_one(a.port)
    stream = recv_all(c)
    got = split_frames(stream) if not a.raw else []
    with open(a.out, "w") as f:
        json.dump({"datagrams": [d.hex() for d in got], "stream_len": len(stream)}, f)
    if not a.raw:
        c.sendall(frame(("received %d datagrams" % len(got)).encode()))
    c.close()
    return 0


def cmd_send(a):
    with open(a.input) as f:
        chunks = [bytes.fromhex(h) for h in json.load(f)]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", a.sport))
    if a.raw:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.connect(("127.0.0.1", a.port))
    if a.raw:
        for c in chunks:
            s.sendall(c)
            time.sleep(0.05)  # one chunk per segment: the heuristic sees the first alone
    else:
        for c in chunks[:BATCH_FROM]:
            s.sendall(frame(c))  # one write per datagram
        s.sendall(b"".join(frame(c) for c in chunks[BATCH_FROM:]))
    s.shutdown(socket.SHUT_WR)
    reply = recv_all(s)
    s.close()
    with open(a.out, "w") as f:
        json.dump({"datagrams": [d.hex() for d in split_frames(reply)] if reply else []}, f)
    return 0


# 4 MiB of TLS: about 2900 segments, of which about 11 start with 0x00
# (none with probability 1e-5) -- the heuristic must decline those too.
TLS_SEND_CHUNKS, TLS_CHUNK = 256, 16384


def tls_payload_len():
    return TLS_SEND_CHUNKS * TLS_CHUNK + len(frame(b"uCOBS inside TLS is still TLS"))


def tls_serve(a, want):
    """tls_serve is the TLS server of the capture tests, run in the
    namespace: it loads a.cert/a.key, accepts one client on 127.0.0.1:a.port,
    reads until |want| bytes came or the client closed, and replies "got N".
    Returns 0 if N == |want|, else 1. Shared with utls_scope.py."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    c = accept_one(a.port)
    t = ctx.wrap_socket(c, server_side=True)
    n = 0
    while n < want:
        b = t.recv(65536)
        if not b:
            break
        n += len(b)
    t.sendall(("got %d" % n).encode())
    t.close()
    return 0 if n == want else 1


def tls_client(port):
    """tls_client returns a TLS socket connected to 127.0.0.1:|port| that
    does not verify the server (its certificate is a throwaway one); the
    caller owns and closes it. Shared with utls_scope.py."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)))


def cmd_tls_serve(a):
    return tls_serve(a, tls_payload_len())


def cmd_tls_send(a):
    t = tls_client(a.port)
    rng = random.Random(3)
    for _ in range(TLS_SEND_CHUNKS):
        t.sendall(rng.randbytes(TLS_CHUNK))
    # uCOBS framing inside TLS records stays TLS: encrypted, not claimed.
    t.sendall(frame(b"uCOBS inside TLS is still TLS"))
    reply = t.recv(100)
    t.close()
    return 0 if reply.startswith(b"got ") else 1


# ---- the driver -----------------------------------------------------------------

class Netns:
    def __init__(self, name):
        self.name = name
        subprocess.run(["ip", "netns", "add", name], check=True)
        try:
            self.x("ip", "link", "set", "lo", "mtu", "1500", "up")
            # Real segments in the capture: no GSO/TSO super-packets on lo.
            r = self.x("ethtool", "-K", "lo", "gso", "off", "tso", "off", "gro", "off", check=False)
            if r.returncode != 0:
                raise Fail("ethtool -K lo gso off tso off gro off failed in %s" % name)
        except BaseException:
            self.delete()
            raise

    def argv(self, *cmd):
        return ["ip", "netns", "exec", self.name] + list(cmd)

    def x(self, *cmd, check=True):
        return subprocess.run(self.argv(*cmd), check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def delete(self):
        subprocess.run(["ip", "netns", "del", self.name], stderr=subprocess.DEVNULL)


class Capture(TcpdumpCapture):
    """tcpdump --immediate-mode on the namespace's lo, stopped with SIGINT."""

    def __init__(self, ns, path, bpf):
        super().__init__(ns.argv("tcpdump", "-i", "lo", "-w", path, "--immediate-mode", "-U", "-n",
                                 "-Z", "root", bpf), path, path + ".log", Fail)

    def stop(self):
        super().stop()
        if os.path.exists(self.path):
            os.chmod(self.path, 0o644)


def run_captured(ns, pcap, port, server_argv, server_what, client_argv, client_what):
    """Runs server_argv (start_server) and then client_argv in |ns| while
    tcpdump captures TCP port |port| into |pcap|; both must exit 0 (finish)."""
    cap = Capture(ns, pcap, "tcp port %d" % port)
    try:
        srv = start_server(ns, server_argv)
        cli = subprocess.Popen(ns.argv(*client_argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        finish(cli, client_what)
        finish(srv, server_what)
    finally:
        cap.stop()


def start_server(ns, argv):
    p = subprocess.Popen(ns.argv(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode()
    if "listening" not in line:
        p.kill()
        raise Fail("server did not start: %s %s" % (line, p.stderr.read().decode(errors="replace")))
    return p


def finish(p, what, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise Fail("%s timed out" % what)
    if p.returncode != 0:
        raise Fail("%s exited %d: %s" % (what, p.returncode, err.decode(errors="replace")[-2000:]))


class Tshark:
    def __init__(self, a):
        self.a = a
        self.prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "env",
                       "HOME=/nonexistent", "WIRESHARK_PLUGIN_DIR=" + a.plugin_dir]

    def run(self, *args):
        r = subprocess.run(self.prefix + [self.a.tshark] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise Fail("tshark %s failed: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
        return r.stdout.decode(errors="replace")

    def packets(self, pcap, *opts):
        """Per packet: (tcp.srcport, [ucobs.datagram hex], [ucobs.index], [expert names], reassembled,
        tcp payload first byte or None)."""
        xml = self.run("-r", pcap, "-T", "pdml", *opts)
        out = []
        for pkt in ET.fromstring(xml).iter("packet"):
            sport, dgs, idx, experts, reasm, first = None, [], [], [], False, None
            for f in pkt.iter("field"):
                n = f.get("name")
                if n == "tcp.srcport" and sport is None:
                    sport = int(f.get("show"))
                elif n == "ucobs.datagram":
                    dgs.append(f.get("value") or "")
                elif n == "ucobs.index":
                    idx.append(int(f.get("show")))
                elif n == "tcp.reassembled.length":
                    reasm = True
                elif n == "tcp.payload" and first is None:
                    first = (f.get("value") or "")[:2]
                elif n in EXPERTS:
                    experts.append(n)
            out.append((sport, dgs, idx, experts, reasm, first))
        return out


def by_direction(packets, sport):
    dgs, idx = [], []
    for p in packets:
        if p[0] == sport:
            dgs += [bytes.fromhex(h) for h in p[1]]
            idx += p[2]
    return dgs, idx


def compare(what, want, got):
    """None when |got| equals |want| (same datagrams, same order), else a reason."""
    if len(want) != len(got):
        return "%s: %d datagrams, expected %d" % (what, len(got), len(want))
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return "%s: datagram %d differs (%d bytes, expected %d)" % (what, i, len(g), len(w))
    return None


def check(reason):
    if reason:
        raise Fail(reason)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def run_session(ns, work, me, name, port, sport, sent):
    """Runs the uCOBS receiver and sender in |ns| under tcpdump; checks what the
    live peers got (the receiver: |sent|; the sender: the receiver's reply).
    Returns the capture's path."""
    pcap = os.path.join(work, name + ".pcap")
    server_out, client_out = os.path.join(work, name + "-server.json"), os.path.join(work, name + "-client.json")
    sent_json = write_json(os.path.join(work, name + "-sent.json"), [d.hex() for d in sent])
    run_captured(ns, pcap, port, me + ["serve", "--port", str(port), "--out", server_out], "uCOBS receiver",
                 me + ["send", "--port", str(port), "--sport", str(sport), "--input", sent_json,
                       "--out", client_out], "uCOBS sender")
    with open(server_out) as f:
        server_got = [bytes.fromhex(h) for h in json.load(f)["datagrams"]]
    with open(client_out) as f:
        client_got = [bytes.fromhex(h) for h in json.load(f)["datagrams"]]
    check(compare("%s: the live receiver" % name, sent, server_got))
    check(compare("%s: the live sender's reply" % name, [("received %d datagrams" % len(sent)).encode()],
                  client_got))
    return pcap


def is_submultiset(part, whole):
    left = list(whole)
    for p in part:
        if p not in left:
            return False
        left.remove(p)
    return True


def is_subsequence(part, whole):
    it = iter(whole)
    return all(any(p == w for w in it) for p in part)


def prerequisites(a):
    """prerequisites returns False (after logging why: the caller exits SKIP)
    if a tool the capture tests run is missing or we are not root; raises Fail
    if the plugin |a.plugin| is missing or not in a DIR/X.Y/epan/ tree;
    otherwise sets a.plugin_dir (the DIR for WIRESHARK_PLUGIN_DIR) and
    returns True. Shared with utls_scope.py."""
    why = missing_prerequisite(("tcpdump", "ip", "ethtool", "nft", "setpriv", "openssl", "editcap",
                                "mergecap", a.tshark), "network namespaces and tcpdump need root")
    if why is not None:
        log("SKIP: " + why)
        return False
    if not os.path.isfile(a.plugin):
        raise Fail("no plugin at %s (build the utls_wireshark target)" % a.plugin)
    epan = os.path.dirname(os.path.abspath(a.plugin))
    if os.path.basename(epan) != "epan":
        raise Fail("%s is not in a DIR/X.Y/epan/ plugin tree" % a.plugin)
    a.plugin_dir = os.path.dirname(os.path.dirname(epan))
    return True


def check_ports_free(ts, ports):
    """check_ports_free raises Fail if this tshark assigns any TCP port of
    |ports| to a dissector (decode-as would then fight the test's own);
    returns None. Shared with utls_scope.py."""
    decodes = ts.run("-G", "decodes")
    for port in ports:
        if "tcp.port\t%d\t" % port in decodes:
            raise Fail("port %d is assigned to a dissector in this tshark: pick other test ports" % port)


def clean_up(ns, work, remove):
    """clean_up deletes the namespace |ns| and, if |remove|, the work
    directory |work|; otherwise it says where the work directory was kept
    (a failed run's captures, for a look). Returns None. Shared with
    utls_scope.py."""
    ns.delete()
    if remove:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("work directory kept: %s" % work)


def cmd_run(a):
    if not prerequisites(a):
        return SKIP
    self_test_codec()
    work = tempfile.mkdtemp(prefix="utls-ucobs-")
    os.chmod(work, 0o755)  # tshark runs as nobody
    ts = Tshark(a)
    protos = ts.run("-G", "protocols")
    if "\tucobs" not in protos:
        raise Fail("tshark did not load the plugin from %s" % a.plugin_dir)
    check_ports_free(ts, (PORT_SESSION, SPORT_SESSION, PORT_TLS, PORT_BAD, SPORT_BAD, PORT_BIGFIRST,
                          SPORT_BIGFIRST, PORT_LOSSY, SPORT_LOSSY))
    me = [a.python, os.path.abspath(__file__)]
    ns = Netns("%s%d" % (a.prefix, os.getpid()))
    ok = False
    try:
        # 1. A real uCOBS session.
        sent = session_datagrams()
        pcap = run_session(ns, work, me, "session", PORT_SESSION, SPORT_SESSION, sent)
        reply = [("received %d datagrams" % len(sent)).encode()]

        pk = ts.packets(pcap)
        c2s, c2s_idx = by_direction(pk, SPORT_SESSION)
        s2c, s2c_idx = by_direction(pk, PORT_SESSION)
        log("session: %d packets; tshark decoded %d + %d datagrams (sizes %s)"
            % (len(pk), len(c2s), len(s2c), [len(d) for d in c2s]))
        check(compare("tshark, client to server", sent, c2s))
        check(compare("tshark, server to client", reply, s2c))
        if c2s_idx != list(range(len(sent))) or s2c_idx != [0]:
            raise Fail("ucobs.index %s / %s, expected 0..%d / [0]" % (c2s_idx, s2c_idx, len(sent) - 1))
        experts = [e for p in pk for e in p[3]]
        if experts:
            raise Fail("expert items in a clean session: %s" % experts)
        if not any(p[4] and p[1] for p in pk):
            raise Fail("no datagram was reassembled from several segments")
        seglens = ts.run("-r", pcap, "-T", "fields", "-e", "tcp.len").split()
        if max(int(x) for x in seglens) > 1460:
            raise Fail("a segment of %s bytes: the capture shows GSO super-packets, not segments"
                       % max(int(x) for x in seglens))
        log("session: every datagram shown, byte-identical and in order; largest segment %s bytes"
            % max(int(x) for x in seglens))

        # 2. The heuristic is what found it; the port preference and Decode As force it.
        off = ts.packets(pcap, "--disable-heuristic", "ucobs_tcp")
        if any(p[1] for p in off):
            raise Fail("datagrams decoded with the ucobs_tcp heuristic disabled")
        for opts in (("-o", "ucobs.tcp.port:%d" % PORT_SESSION), ("-d", "tcp.port==%d,ucobs" % PORT_SESSION)):
            forced = ts.packets(pcap, "--disable-heuristic", "ucobs_tcp", *opts)
            check(compare("tshark %s" % " ".join(opts), sent, by_direction(forced, SPORT_SESSION)[0]))
        log("heuristic off: nothing decoded; ucobs.tcp.port and Decode As: every datagram")
        # Two passes (as the GUI does): the same datagrams and indexes.
        two = ts.packets(pcap, "-2")
        check(compare("tshark -2", sent, by_direction(two, SPORT_SESSION)[0]))
        if by_direction(two, SPORT_SESSION)[1] != list(range(len(sent))):
            raise Fail("tshark -2: ucobs.index %s" % by_direction(two, SPORT_SESSION)[1])
        multi = max(len(p[1]) for p in pk)
        if multi < 2:
            raise Fail("no packet holds more than one datagram: the batch was not coalesced")
        log("tshark -2: same datagrams and indexes; up to %d datagrams in one packet" % multi)

        # Without TCP reassembly: datagrams inside one segment are still shown,
        # those spanning segments are reported (truncated / undelimited), and
        # nothing is shown that was not sent.
        nr = ts.packets(pcap, "-o", "tcp.desegment_tcp_streams:FALSE")
        nr_got = by_direction(nr, SPORT_SESSION)[0]
        nr_experts = [e for p in nr for e in p[3]]
        log("session without TCP reassembly: %d of %d datagrams shown; expert items %s"
            % (len(nr_got), len(sent), sorted(set(nr_experts))))
        if not is_subsequence(nr_got, sent) or len(nr_got) < len(sent) // 2:
            raise Fail("without reassembly: datagrams that were not sent, or too few (%d)" % len(nr_got))
        if "ucobs.truncated" not in nr_experts or "ucobs.undelimited.expert" not in nr_experts:
            raise Fail("without reassembly: the cut datagrams are not reported")

        # Every packet twice (mergecap of the capture with itself): each
        # datagram is still shown exactly once.
        dup = os.path.join(work, "doubled.pcap")
        subprocess.run(["mergecap", "-w", dup, pcap, pcap], check=True, stdout=subprocess.DEVNULL)
        os.chmod(dup, 0o644)
        dp = ts.packets(dup)
        got, got_idx = by_direction(dp, SPORT_SESSION)
        check(compare("tshark, every packet twice", sent, got))
        if got_idx != list(range(len(sent))):
            raise Fail("every packet twice: ucobs.index %s" % got_idx)
        log("every packet twice: every datagram exactly once (%d packets)" % len(dp))

        # A session whose first datagram is longer than a segment: claimed by
        # the stream-start rule of the heuristic.
        rng = random.Random(11)
        big_first = [bytes(rng.randrange(256) for _ in range(5000)), b"second", b""]
        bpcap0 = run_session(ns, work, me, "bigfirst", PORT_BIGFIRST, SPORT_BIGFIRST, big_first)
        got = by_direction(ts.packets(bpcap0), SPORT_BIGFIRST)[0]
        check(compare("tshark, first datagram longer than a segment", big_first, got))
        log("first datagram longer than a segment: claimed at the stream start, %d datagrams shown" % len(got))

        # Loss: duplicated (retransmitted) and out-of-order segments in the
        # capture. Every datagram is shown exactly once, in order.
        nft = ("table inet ucd {\n chain in {\n  type filter hook input priority 0;\n"
               "  tcp dport %d tcp flags & (syn | fin | rst) == 0 meta length > 100 "
               "numgen inc mod %d == 2 counter drop\n }\n}\n" % (PORT_LOSSY, LOSS_EVERY))
        r = subprocess.run(ns.argv("nft", "-f", "-"), input=nft.encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise Fail("nft: %s" % r.stderr.decode(errors="replace"))
        try:
            lossy = run_session(ns, work, me, "lossy", PORT_LOSSY, SPORT_LOSSY, sent)
        finally:
            ns.x("nft", "delete", "table", "inet", "ucd", check=False)
        rows = [r.split("\t") for r in ts.run("-r", lossy, "-Y", "tcp.len > 0 and tcp.srcport == %d" % SPORT_LOSSY,
                                               "-T", "fields", "-e", "frame.number", "-e", "tcp.seq_raw",
                                               "-e", "tcp.analysis.retransmission",
                                               "-e", "tcp.analysis.fast_retransmission").splitlines()]
        first_at, originals = {}, []
        for num, seq, rt, frt in rows:
            if (rt or frt) and seq in first_at:
                originals.append(first_at.pop(seq))
            else:
                first_at.setdefault(seq, num)
        if not originals:
            raise Fail("the lossy session has no retransmission: nothing was tested")
        holes = os.path.join(work, "holes.pcap")
        subprocess.run(["editcap", lossy, holes] + originals, check=True, stdout=subprocess.DEVNULL)
        os.chmod(holes, 0o644)
        for cap_name, pc, opts in (("with duplicates", lossy, ()),
                                   ("with duplicates, out-of-order reassembly", lossy,
                                    ("-o", "tcp.reassemble_out_of_order:TRUE")),
                                   ("with holes, out-of-order reassembly", holes,
                                    ("-o", "tcp.reassemble_out_of_order:TRUE"))):
            lp = ts.packets(pc, *opts)
            got, got_idx = by_direction(lp, SPORT_LOSSY)
            check(compare("tshark, lossy session %s" % cap_name, sent, got))
            if got_idx != list(range(len(sent))):
                raise Fail("lossy session %s: ucobs.index %s" % (cap_name, got_idx))
            copies = sum(p[3].count("ucobs.retransmission") for p in lp)
            if pc == lossy and not opts:
                copies_seen = copies
        # Without out-of-order reassembly TCP hands on the segments after a
        # hole at once: the datagrams that start there are shown early (as a
        # uCOBS receiver on uTCP delivers them), the one cut by the hole is
        # reported. Each shown datagram was sent, none is shown twice.
        got_plain = by_direction(ts.packets(holes), SPORT_LOSSY)[0]
        if not is_submultiset(got_plain, sent):
            raise Fail("lossy session with holes, no out-of-order reassembly: a datagram that was not sent, "
                       "or one shown twice")
        log("lossy session: %d lost packets retransmitted; every datagram exactly once with the duplicates "
            "(%d retransmitted copies marked ucobs.retransmission), and with the holes "
            "(tcp.reassemble_out_of_order); %d of %d, some early, with holes and without it"
            % (len(originals), copies_seen, len(got_plain), len(sent)))

        # Random corruption of the capture (editcap -E): tshark neither
        # crashes nor reports a dissector bug.
        fuzzed = os.path.join(work, "fuzzed.pcap")
        # Ethernet, IPv4 and TCP with timestamps: 66 bytes left intact.
        subprocess.run(["editcap", "-E", "0.002", "-o", "66", pcap, fuzzed], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.chmod(fuzzed, 0o644)
        fz = ts.run("-r", fuzzed, "-T", "fields", "-e", "_ws.expert.message")
        bugs = [m for m in fz.splitlines() if "Dissector bug" in m or "Exception occurred" in m]
        if bugs:
            raise Fail("a dissector bug or exception on a corrupted capture: %s" % bugs[:3])
        flagged = sum(1 for m in fz.splitlines() if "not a canonical COBS" in m)
        log("corrupted copy of the session capture (editcap -E 0.002): no exception; %d packets with "
            "non-canonical frames" % flagged)

        # 3. TLS is not claimed.
        cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tpcap = os.path.join(work, "tls.pcap")
        cap = Capture(ns, tpcap, "tcp port %d" % PORT_TLS)
        try:
            srv = start_server(ns, me + ["tls-serve", "--port", str(PORT_TLS), "--cert", cert, "--key", key])
            cli = subprocess.Popen(ns.argv(*(me + ["tls-send", "--port", str(PORT_TLS)])),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            finish(cli, "TLS client")
            finish(srv, "TLS server")
        finally:
            cap.stop()
        claimed = ts.run("-r", tpcap, "-Y", "ucobs", "-T", "fields", "-e", "frame.number").split()
        tls_frames = ts.run("-r", tpcap, "-Y", "tls.record", "-T", "fields", "-e", "frame.number").split()
        if not tls_frames:
            raise Fail("the TLS capture holds no TLS record")
        if claimed:
            raise Fail("ucobs claimed TLS frames %s" % claimed[:10])
        # Without the TLS dissector nothing claims the conversation, so every
        # segment, including those that start with 0x00 inside a record, is
        # offered to the heuristics (a capture that begins mid-connection).
        rows = [r.split("\t") for r in ts.run("-r", tpcap, "--disable-protocol", "tls", "-T", "fields",
                                               "-e", "tcp.payload", "-e", "_ws.col.Protocol").splitlines()]
        zero_start = sum(1 for r in rows if r[0].startswith("00"))
        claimed = [r for r in rows if "ucobs" in r[1].lower()]
        log("TLS: %d packets, %d with TLS records; with TLS off, %d payloads start with 0x00; claimed by ucobs: "
            "none with TLS on, %d with TLS off" % (len(rows), len(tls_frames), zero_start, len(claimed)))
        if claimed:
            raise Fail("with the TLS dissector off, ucobs claimed %d TLS frames" % len(claimed))
        if zero_start == 0:
            raise Fail("no TLS segment starts with 0x00: the heuristic was not exercised (retry)")

        # 4. A corrupted stream: expert items, no datagram that was not sent.
        chunks, want_bad, want_noncanon, want_oversized = bad_stream()
        bpcap = os.path.join(work, "malformed.pcap")
        cap = Capture(ns, bpcap, "tcp port %d" % PORT_BAD)
        try:
            srv = start_server(ns, me + ["serve", "--raw", "--port", str(PORT_BAD), "--out",
                                         os.path.join(work, "bad-server.json")])
            cli = subprocess.Popen(ns.argv(*(me + ["send", "--raw", "--port", str(PORT_BAD), "--sport",
                                                   str(SPORT_BAD), "--input",
                                                   write_json(os.path.join(work, "bad.json"),
                                                              [c.hex() for c in chunks]),
                                                   "--out", os.path.join(work, "bad-client.json")])),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            finish(cli, "raw sender")
            finish(srv, "raw receiver")
        finally:
            cap.stop()
        for opts in ((), ("-d", "tcp.port==%d,ucobs" % PORT_BAD)):
            bp = ts.packets(bpcap, *opts)
            got = by_direction(bp, SPORT_BAD)[0]
            experts = [e for p in bp for e in p[3]]
            noncanon = experts.count("ucobs.non_canonical")
            oversized = experts.count("ucobs.oversized")
            log("malformed %s: datagrams %s; expert items %s"
                % (" ".join(opts) or "(heuristic)", [d[:8] for d in got], sorted(set(experts))))
            check(compare("tshark, corrupted stream", want_bad, got))
            if noncanon != want_noncanon:
                raise Fail("%d ucobs.non_canonical expert items, expected %d" % (noncanon, want_noncanon))
            if oversized != want_oversized:
                raise Fail("%d ucobs.oversized expert items, expected %d" % (oversized, want_oversized))
            if "ucobs.undelimited.expert" not in experts:
                raise Fail("the tail of the oversized frame is not reported as undelimited")

        # 5. Self-check: the comparison fails on tampered expectations.
        tampered = []
        t = list(sent)
        t[7] = t[7][:100] + bytes([t[7][100] ^ 1]) + t[7][101:]
        tampered.append(("one flipped bit", t))
        tampered.append(("one datagram dropped", sent[:3] + sent[4:]))
        tampered.append(("two datagrams swapped", sent[:1] + [sent[2], sent[1]] + sent[3:]))
        tampered.append(("an extra empty datagram", sent + [b""]))
        for what, t in tampered:
            if compare("self-check", t, c2s) is None:
                raise Fail("self-check: the comparison accepted %s" % what)
        log("self-check: tampered expectations are rejected (%d cases)" % len(tampered))
        # 9. The project's C sender: an independent receiver and tshark agree.
        if a.c_sender:
            pcap = os.path.join(work, "csender.pcap")
            server_out = os.path.join(work, "csender-server.json")
            run_captured(ns, pcap, PORT_CSENDER,
                         me + ["serve", "--port", str(PORT_CSENDER), "--out", server_out],
                         "uCOBS receiver (for the C sender)",
                         [a.c_sender, "send", "--mode", "ucobs", "--connect", "127.0.0.1:%d" % PORT_CSENDER,
                          "--count", str(C_COUNT), "--size", str(C_SIZE), "--interval", "2", "--quiet",
                          "--out", os.path.join(work, "csender-send.jsonl")],
                         "utls-stream --mode ucobs sender")
            with open(server_out) as f:
                got = [bytes.fromhex(h) for h in json.load(f)["datagrams"]]
            if len(got) != C_COUNT:
                raise Fail("C sender: the independent receiver decoded %d datagrams, expected %d"
                           % (len(got), C_COUNT))
            for i, d in enumerate(got):
                if (len(d) != C_SIZE or int.from_bytes(d[0:4], "little") != C_MAGIC
                        or int.from_bytes(d[4:8], "little") != i
                        or int.from_bytes(d[16:20], "little") != C_SIZE):
                    raise Fail("C sender: datagram %d is not utls-stream's record %d of %d bytes" % (i, i, C_SIZE))
            pk = ts.packets(pcap)
            # Client to server: every packet not sent from the server's port.
            c2s_pk = [p for p in pk if p[0] != PORT_CSENDER]
            c_dgs = [bytes.fromhex(h) for p in c2s_pk for h in p[1]]
            c_idx = [x for p in c2s_pk for x in p[2]]
            check(compare("tshark, the C sender's datagrams", got, c_dgs))
            if c_idx != list(range(C_COUNT)):
                raise Fail("C sender: ucobs.index %s, expected 0..%d" % (c_idx, C_COUNT - 1))
            experts = [e for p in pk for e in p[3]]
            if experts:
                raise Fail("C sender: expert items in a clean session: %s" % experts)
            log("C sender (UTLS_ucobs_send): %d datagrams of %d bytes decoded identically by the "
                "independent receiver and by tshark" % (C_COUNT, C_SIZE))
        else:
            log("C sender: not given (--c-sender), not checked")
        ok = True
        return 0
    finally:
        clean_up(ns, work, ok and not a.keep)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=("run", "serve", "send", "tls-serve", "tls-send"))
    ap.add_argument("--tshark", default="/usr/bin/tshark")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--plugin", default="", help="the built utls.so, in a tree DIR/X.Y/epan/ (WIRESHARK_PLUGIN_DIR=DIR)")
    ap.add_argument("--prefix", default="ucd")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--sport", type=int, default=0)
    ap.add_argument("--input", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--cert", default="")
    ap.add_argument("--key", default="")
    ap.add_argument("--raw", action="store_true", help="send/receive chunks as they are, without framing")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--c-sender", default="", help="examples/utls-stream binary (the fork's uCOBS sender)")
    a = ap.parse_args()
    if a.command != "run":
        return {"serve": cmd_serve, "send": cmd_send, "tls-serve": cmd_tls_serve, "tls-send": cmd_tls_send}[
            a.command](a)
    try:
        rc = cmd_run(a)
        log("PASS" if rc == 0 else "SKIPPED")
        return rc
    except (Fail, subprocess.CalledProcessError) as e:
        log("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())

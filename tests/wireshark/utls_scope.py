#!/usr/bin/python3
"""The utls postdissector stays silent on TCP streams that are not TLS
(ctest wireshark.utls.scope, label wireshark). Standard library only.

Real captures, made with tcpdump in a network namespace of our own (prefix
given with --prefix) by the peers of ucobs_session.py:

  * uCOBS sessions (no TLS at all): clean, lossy (nftables drops every
    LOSS_EVERY-th data packet at the receiver's input, so the capture holds
    the lost packets and their retransmissions) and the same with the lost
    originals cut out (editcap: holes, then data arriving out of order). The
    ucobs dissector must decode datagrams in them (they really are uCOBS) and
    the utls postdissector must add nothing: no uTLS tree, no utls.* field,
    no expert item, with one pass and with two;
  * a TLS session (Python's ssl, this file's tls-serve/tls-send: 3000
    records of 200 bytes, several whole records per segment) with loss
    (every 40th data packet) and holes, and crafted copies: a
    segment past a hole carried again with different bytes, and a record
    header overwritten in the middle of the stream. On TLS the plugin must
    still show records, flag out-of-order candidates in the holes capture
    (utls.ooo_candidate.expert), the conflicting copy (utls.conflict) and the
    broken header (utls.bad_header); the clean TLS session has no utls
    warning;
  * both in one file (mergecap): uTLS fields on the TLS connection's frames
    only.

tshark runs as nobody with WIRESHARK_PLUGIN_DIR set to the build tree's
plugin directory (as root it would load only the global one).

Usage (ctest): utls_scope.py --tshark T --plugin BUILD/.../epan/utls.so --prefix uws
Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ucobs_session as us  # noqa: E402  (its peers, namespace and capture helpers)

SKIP = 77
# Ports inside our own namespace; none is assigned to a dissector (checked).
PORT_UCOBS, SPORT_UCOBS = 47101, 47102
PORT_UCOBS_LOSSY, SPORT_UCOBS_LOSSY = 47111, 47112
PORT_TLS = 47121
PORT_TLS_LOSSY = 47131
# The plugin's expert items that are warnings (each bad on a clean stream).
# The TLS session: TLS_MESSAGES writes of TLS_MESSAGE_LEN bytes, one record
# each, written back to back so that TCP packs several whole records into a
# segment: segments that arrive past a hole then hold complete records (on
# loopback the hole fills within a few segments; 16 KiB records would
# rarely be complete before that).
TLS_MESSAGES, TLS_MESSAGE_LEN = 3000, 200
# Loss in it: every TLS_LOSS_EVERY-th data packet (about 12 of 500), few
# enough for editcap's limit on frame selections (512).
TLS_LOSS_EVERY = 40
UTLS_WARNINGS = ("utls.conflict", "utls.bad_header", "utls.held_limit", "utls.analysis_mismatch")


class Fail(Exception):
    pass


def log(*a):
    print(*a, flush=True)


def utls_view(ts, pcap, *opts):
    """Per packet: (tcp.srcport, tcp.dstport, [utls.* field names], ucobs datagrams)."""
    xml = ts.run("-r", pcap, "-T", "pdml", *opts)
    out = []
    for pkt in ET.fromstring(xml).iter("packet"):
        sport = dport = None
        names, dgs = [], 0
        for p in pkt.iter("proto"):
            if p.get("name") == "utls":
                names.append("utls")
        for f in pkt.iter("field"):
            n = f.get("name") or ""
            if n == "tcp.srcport" and sport is None:
                sport = int(f.get("show"))
            elif n == "tcp.dstport" and dport is None:
                dport = int(f.get("show"))
            elif n.startswith("utls."):
                names.append(n)
            elif n == "ucobs.datagram":
                dgs += 1
        out.append((sport, dport, names, dgs))
    return out


def nft_drop(ns, port, every):
    """Drops every |every|-th data packet toward |port| at the input hook
    (after tcpdump on lo saw it). Returns the table's name."""
    table = "uws%d" % port
    rules = ("table inet %s {\n chain in {\n  type filter hook input priority 0;\n"
             "  tcp dport %d tcp flags & (syn | fin | rst) == 0 meta length > 100 "
             "numgen inc mod %d == 2 counter drop\n }\n}\n" % (table, port, every))
    r = subprocess.run(ns.argv("nft", "-f", "-"), input=rules.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Fail("nft: %s" % r.stderr.decode(errors="replace"))
    return table


def cut_lost_originals(ts, pcap, out, sport_filter):
    """Writes |out|: |pcap| without the first copy of every retransmitted
    segment (the receiver's view: holes, then data out of order). A
    retransmission is a data segment whose sequence number was seen before in
    the same direction (loopback does not reorder; Wireshark flags a quick
    one as out-of-order, not as a retransmission, so its flags are not
    used). Returns how many were cut."""
    rows = [r.split("\t") for r in ts.run("-r", pcap, "-Y", "tcp.len > 0 and %s" % sport_filter,
                                           "-T", "fields", "-e", "frame.number",
                                           "-e", "tcp.seq_raw").splitlines()]
    first_at, originals = {}, []
    for num, seq in rows:
        if seq in first_at:
            originals.append(first_at.pop(seq))
        else:
            first_at[seq] = num
    if not originals:
        raise Fail("%s: no retransmission, nothing lost: the test would prove nothing" % pcap)
    subprocess.run(["editcap", "-F", "pcap", pcap, out] + originals, check=True, stdout=subprocess.DEVNULL)
    os.chmod(out, 0o644)
    return len(originals)


# ---- classic pcap editing (tcpdump -w writes it) ---------------------------------

def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xa1b2c3d4, 0xa1b23c4d):
        raise Fail("%s: not a little-endian classic pcap" % path)
    if struct.unpack("<I", data[20:24])[0] != 1:
        raise Fail("%s: not Ethernet (the loopback capture should be)" % path)
    recs, pos = [], 24
    while pos + 16 <= len(data):
        hdr = data[pos:pos + 16]
        incl = struct.unpack("<I", hdr[8:12])[0]
        recs.append([hdr, bytearray(data[pos + 16:pos + 16 + incl])])
        pos += 16 + incl
    return data[:24], recs


def write_pcap(path, head, recs):
    with open(path, "wb") as f:
        f.write(head)
        for hdr, body in recs:
            f.write(hdr)
            f.write(body)
    os.chmod(path, 0o644)


def payload_offset(frame):
    """Offset of the TCP payload in an Ethernet/IPv4 frame."""
    if struct.unpack("!H", frame[12:14])[0] != 0x0800 or frame[23] != 6:
        raise Fail("not an IPv4 TCP frame")
    ihl = (frame[14] & 15) * 4
    tcp = 14 + ihl
    return tcp + (frame[tcp + 12] >> 4) * 4


def frame_numbers(ts, pcap, dfilter):
    return [int(x) for x in ts.run("-r", pcap, "-Y", dfilter, "-T", "fields", "-e", "frame.number").split()]


def craft_conflict(ts, holes, out):
    """A copy of the first client-to-server segment that arrived past a hole,
    with one payload byte changed, right after it: TCP keeps the first copy;
    the plugin must flag the difference."""
    past = frame_numbers(ts, holes, "utls.past_hole and tcp.dstport == %d" % PORT_TLS_LOSSY)
    if not past:
        raise Fail("no utls.past_hole in the TLS holes capture: the plugin lost the TLS stream")
    head, recs = read_pcap(holes)
    k = past[0] - 1
    copy = [bytes(recs[k][0]), bytearray(recs[k][1])]
    off = payload_offset(copy[1]) + 10
    copy[1][off] ^= 0x5a
    write_pcap(out, head, recs[:k + 1] + [copy] + recs[k + 1:])
    return past[0]


def craft_bad_header(ts, clean, out):
    """Overwrites with 0x00 the content type of a client-to-server record
    header in the middle of the stream (one whose 5 bytes are in one segment).
    Returns (frame, stream offset)."""
    rows = [r.split("\t") for r in ts.run("-r", clean, "-Y", "tcp.dstport == %d and tcp.len > 0" % PORT_TLS,
                                           "-T", "fields", "-e", "frame.number", "-e", "tcp.seq",
                                           "-e", "tcp.len", "-e", "utls.record_offset",
                                           "-E", "occurrence=a", "-E", "aggregator=,").splitlines()]
    offsets = sorted(int(x) for r in rows if len(r) > 3 and r[3] for x in r[3].split(","))
    segs = [(int(r[0]), int(r[1]) - 1, int(r[2])) for r in rows]  # relative seq 1 = offset 0
    cands = []
    for o in offsets[len(offsets) // 2:]:
        for num, start, length in segs:
            if start <= o and o + 5 <= start + length:
                cands.append((num, start, o))
                break
    if not cands:
        raise Fail("no record header inside one segment in the second half of the TLS capture")
    num, start, target = cands[0]
    head, recs = read_pcap(clean)
    body = recs[num - 1][1]
    body[payload_offset(body) + (target - start)] = 0x00
    write_pcap(out, head, recs)
    return num, target


def capture_ucobs(ns, work, me, name, port, sport, lossy):
    table = nft_drop(ns, port, us.LOSS_EVERY) if lossy else None
    try:
        return us.run_session(ns, work, me, name, port, sport, us.session_datagrams())
    finally:
        if table:
            ns.x("nft", "delete", "table", "inet", table, check=False)


def capture_tls(ns, work, me, name, port, cert, key, lossy):
    pcap = os.path.join(work, name + ".pcap")
    table = nft_drop(ns, port, TLS_LOSS_EVERY) if lossy else None
    try:
        cap = us.Capture(ns, pcap, "tcp port %d" % port)
        try:
            srv = us.start_server(ns, me + ["tls-serve", "--port", str(port), "--cert", cert, "--key", key])
            cli = subprocess.Popen(ns.argv(*(me + ["tls-send", "--port", str(port)])),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            us.finish(cli, "TLS client")
            us.finish(srv, "TLS server")
        finally:
            cap.stop()
    finally:
        if table:
            ns.x("nft", "delete", "table", "inet", table, check=False)
    return pcap


def cmd_tls_serve(a):
    """TLS server in the namespace: reads until the client closes, replies
    with the byte count."""
    return us.tls_serve(a, TLS_MESSAGES * TLS_MESSAGE_LEN)


def cmd_tls_send(a):
    """TLS client: TLS_MESSAGES records of TLS_MESSAGE_LEN bytes, back to back."""
    t = us.tls_client(a.port)
    for i in range(TLS_MESSAGES):
        t.sendall(bytes([i & 0xff]) * TLS_MESSAGE_LEN)
    reply = t.recv(100)
    t.close()
    return 0 if reply.startswith(b"got ") else 1


def check_silent(ts, what, pcap, opts=()):
    view = utls_view(ts, pcap, *opts)
    noisy = [(i + 1, sorted(set(p[2]))) for i, p in enumerate(view) if p[2]]
    dgs = sum(p[3] for p in view)
    log("%s%s: %d packets, %d uCOBS datagrams decoded, %d packets with uTLS items%s"
        % (what, " " + " ".join(opts) if opts else "", len(view), dgs, len(noisy),
           " (first: frame %d %s)" % noisy[0] if noisy else ""))
    if dgs == 0:
        raise Fail("%s: no uCOBS datagram decoded: not a uCOBS capture" % what)
    if noisy:
        raise Fail("%s: the utls postdissector is not silent on a non-TLS stream: frame %d has %s"
                   % (what, noisy[0][0], noisy[0][1]))


def count(ts, pcap, dfilter, *opts):
    return len(ts.run("-r", pcap, *opts, "-Y", dfilter, "-T", "fields", "-e", "frame.number").split())


def run(a):
    if not us.prerequisites(a):
        return SKIP
    ts = us.Tshark(a)
    protos = ts.run("-G", "protocols")
    if "\tutls\t" not in protos and "\tutls\n" not in protos or "\tucobs" not in protos:
        raise Fail("tshark did not load the plugin from %s" % a.plugin_dir)
    us.check_ports_free(ts, (PORT_UCOBS, SPORT_UCOBS, PORT_UCOBS_LOSSY, SPORT_UCOBS_LOSSY, PORT_TLS,
                             PORT_TLS_LOSSY))
    work = tempfile.mkdtemp(prefix="utls-scope-")
    os.chmod(work, 0o755)  # tshark runs as nobody
    me = [a.python, os.path.join(HERE, "ucobs_session.py")]
    me_tls = [a.python, os.path.abspath(__file__)]
    ns = us.Netns("%s%d" % (a.prefix, os.getpid()))
    ok = False
    try:
        # 1. uCOBS: clean, lossy, with holes. Silent, one pass and two.
        clean = capture_ucobs(ns, work, me, "ucobs", PORT_UCOBS, SPORT_UCOBS, False)
        lossy = capture_ucobs(ns, work, me, "ucobs-lossy", PORT_UCOBS_LOSSY, SPORT_UCOBS_LOSSY, True)
        holes = os.path.join(work, "ucobs-holes.pcap")
        cut = cut_lost_originals(ts, lossy, holes, "tcp.srcport == %d" % SPORT_UCOBS_LOSSY)
        log("uCOBS captures: clean, lossy, and with %d lost originals cut out" % cut)
        for what, pcap in (("uCOBS", clean), ("uCOBS lossy", lossy), ("uCOBS with holes", holes)):
            check_silent(ts, what, pcap)
            check_silent(ts, what, pcap, ("-2",))
        check_silent(ts, "uCOBS with holes", holes, ("-o", "tcp.reassemble_out_of_order:TRUE"))

        # 2. TLS: the plugin still tracks it and flags its anomalies.
        cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tls = capture_tls(ns, work, me_tls, "tls", PORT_TLS, cert, key, False)
        tls_lossy = capture_tls(ns, work, me_tls, "tls-lossy", PORT_TLS_LOSSY, cert, key, True)
        tls_holes = os.path.join(work, "tls-holes.pcap")
        cut = cut_lost_originals(ts, tls_lossy, tls_holes, "tcp.dstport == %d" % PORT_TLS_LOSSY)
        records = count(ts, tls, "utls.record_offset")
        warnings = {w: count(ts, tls, w) for w in UTLS_WARNINGS}
        log("TLS clean: %d frames complete records; utls warnings %s" % (records, warnings))
        if records == 0:
            raise Fail("TLS clean: no utls.record_offset: the plugin no longer tracks TLS")
        if any(warnings.values()):
            raise Fail("TLS clean: utls warnings on a clean session: %s" % warnings)
        ooo = count(ts, tls_holes, "utls.ooo_candidate.expert")
        past = count(ts, tls_holes, "utls.past_hole")
        log("TLS with %d holes: %d segments past a hole, %d frames with out-of-order candidates"
            % (cut, past, ooo))
        if ooo == 0 or past == 0:
            raise Fail("TLS with holes: out-of-order candidates no longer flagged")
        conflict = os.path.join(work, "tls-conflict.pcap")
        at = craft_conflict(ts, tls_holes, conflict)
        n = count(ts, conflict, "utls.conflict")
        log("TLS with a differing copy of frame %d past a hole: %d utls.conflict" % (at, n))
        if n != 1:
            raise Fail("TLS conflict: %d utls.conflict expert items, expected 1" % n)
        bad = os.path.join(work, "tls-badheader.pcap")
        at, off = craft_bad_header(ts, tls, bad)
        frames = frame_numbers(ts, bad, "utls.bad_header")
        log("TLS with the record header at stream offset %d (frame %d) overwritten: utls.bad_header in %s"
            % (off, at, frames))
        if frames != [at]:
            raise Fail("TLS bad header: utls.bad_header in frames %s, expected [%d]" % (frames, at))

        # 3. Both in one capture: uTLS only on the TLS connection.
        mixed = os.path.join(work, "mixed.pcap")
        subprocess.run(["mergecap", "-a", "-w", mixed, holes, tls_holes], check=True,
                       stdout=subprocess.DEVNULL)
        os.chmod(mixed, 0o644)
        view = utls_view(ts, mixed)
        on_ucobs = [i + 1 for i, p in enumerate(view)
                    if p[2] and PORT_UCOBS_LOSSY in (p[0], p[1])]
        on_tls = [i + 1 for i, p in enumerate(view) if p[2] and PORT_TLS_LOSSY in (p[0], p[1])]
        ooo_mixed = sum(p[2].count("utls.ooo_candidate.expert") for p in view)
        log("mixed capture: uTLS items on %d TLS frames (%d out-of-order candidates), %d uCOBS frames"
            % (len(on_tls), ooo_mixed, len(on_ucobs)))
        if on_ucobs:
            raise Fail("mixed capture: uTLS items on uCOBS frames %s" % on_ucobs[:10])
        if not on_tls or ooo_mixed == 0:
            raise Fail("mixed capture: no uTLS items on the TLS connection")
        ok = True
        return 0
    finally:
        us.clean_up(ns, work, ok and not a.keep)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", nargs="?", default="run", choices=("run", "tls-serve", "tls-send"))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert", default="")
    ap.add_argument("--key", default="")
    ap.add_argument("--tshark", default="/usr/bin/tshark")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--plugin", default="",
                    help="the built utls.so, in a tree DIR/X.Y/epan/ (WIRESHARK_PLUGIN_DIR=DIR)")
    ap.add_argument("--prefix", default="uws")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    if a.command == "tls-serve":
        return cmd_tls_serve(a)
    if a.command == "tls-send":
        return cmd_tls_send(a)
    try:
        rc = run(a)
        log("PASS" if rc == 0 else "SKIPPED")
        return rc
    except (Fail, us.Fail, subprocess.CalledProcessError) as e:
        log("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The demo's capture in Wireshark (ctest wireshark.demo.ooo_command and
wireshark.demo.truncated, label wireshark). Standard library only.

Both make a demo-like capture with the demo's own code: bench/latency/run.py
(Setup, run_point) runs the utls mode alone on a testbed of its own (prefix
given with --prefix): utls-stream with the fork, SSL_MODE_UNORDERED and the
tap, COUNT records of 1426 bytes every 20 ms over 100 ms RTT and LOSS% seeded
loss, tcpdump on the receiver with whole packets (the demo's snap length) and
the TLS key log. tshark runs as nobody with the build tree's plugin, as the
demo's command does.

ooo: asks wireshark/ooo_records.py for the command `make demo` prints, runs
    that shell line as it is (bash -c) and checks that it lists records, one
    per stream offset, each decrypted with the key log to its 1426 bytes, and
    exactly those the receiver logged as delivered out of order (its
    per-record log: ooo=1, offset; its summary's count); that
    the command loads the build tree's plugin (tshark -G plugins under the
    same prefix) and that its options decrypt every record with the key log.
    The demo's own capture (BUILD/demo, if `make demo` ran) is checked the
    same way against its receiver log. Self-checks: a receiver set with one
    record less must not compare equal; without the key log no plaintext
    length is listed; without the build tree's plugin the command must not
    list anything.

truncated: cuts copies of the capture with editcap -s: 128 bytes (the old
    demo's snap length: each segment keeps its TLS record header) and the
    headers plus 5 bytes (from the second flight on, record headers fall in
    uncaptured bytes). On each copy the plugin must
      * mark exactly the cut data frames utls.truncated;
      * mark exactly the frames utls.past_hole that a hole tracker driven by
        TCP's sequence numbers and lengths (tcp.seq_raw, tcp.len) finds, the
        same frames as on the whole capture -- and not the many more that the
        captured lengths would give (checked to differ, so the test fails on
        a plugin that takes the captured length);
      * open holes where TCP analysis finds lost segments: the same
        tcp.analysis.lost_segment frames (those with data) as on the whole
        capture, each of them utls.past_hole, and no utls.analysis_mismatch;
      * at 128 bytes, find the same out-of-order records as on the whole
        capture; at headers + 5, report the record boundaries as unknown
        (utls.records_unknown).

Usage (ctest): demo_capture.py {ooo,truncated} --build BUILD --tshark T --prefix P
Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "wireshark"))
sys.path.insert(0, os.path.join(SRC, "bench", "latency"))
import ooo_records  # noqa: E402  (the command the demo prints)
from tcpdump_capture import missing_prerequisite  # noqa: E402

SKIP = 77


class Fail(Exception):
    pass


def log(*a):
    print(*a, flush=True)


# ---- the capture ------------------------------------------------------------------

def make_capture(a, work):
    """A demo-like capture through run.py's own code. Returns (pcap, keylog,
    receiver log, port)."""
    import run  # bench/latency/run.py: the demo's driver
    setup = run.Setup(a.build, work, a.prefix)
    setup.snaplen = 0  # as demo() sets it: whole packets
    keylog = os.path.join(work, "utls.keys")
    cfg = {"count": a.count, "interval_ms": 20, "size": 1426, "wire_record_bytes": 1426 + run.TLS13_OVERHEAD,
           "rtt_ms": 100, "loss_pct": a.loss, "loss_dir": "fwd", "seed": a.seed, "one_way_ms": 50,
           "sender_cc": "bbr"}
    try:
        res = run.run_point(setup, cfg, "cap", modes=("utls",), capture=("utls",), progress=False,
                            keylog=keylog)
    finally:
        run.cleanup(setup)
    rundir = os.path.join(work, "latency", "cap")
    pcap, recv_log = os.path.join(rundir, "utls.pcap"), os.path.join(rundir, "utls.recv.jsonl")
    if res["utls"].get("exit") != 0:
        raise Fail("the uTLS receiver exited %s (see %s)" % (res["utls"].get("exit"), recv_log))
    for p in (pcap, keylog, recv_log):
        if not os.path.getsize(p):
            raise Fail("%s is empty" % p)
    return pcap, keylog, recv_log, run.PORT


def receiver_ooo(recv_log):
    """(stream offsets of the records the receiver delivered out of order,
    its summary's out_of_order count, records received)."""
    offs, summary = [], None
    with open(recv_log) as f:
        for line in f:
            r = json.loads(line)
            if r.get("event") == "end":
                summary = r
            elif r.get("ok") == 1 and r.get("ooo") == 1:
                offs.append(r["offset"])
    if summary is None:
        raise Fail("%s has no summary line" % recv_log)
    return offs, summary["out_of_order"], summary["received"]


# ---- tshark -------------------------------------------------------------------------

def run_argv(argv, what):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise Fail("%s failed (exit %d): %s" % (what, r.returncode, r.stderr[-2000:]))
    return r.stdout


def tshark(a, *args):
    return run_argv(ooo_records.tshark_prefix(a.build) + list(args), "tshark " + " ".join(args))


def rows(a, pcap, flt, *fields, opts=()):
    out = tshark(a, "-r", pcap, *opts, "-Y", flt, "-T", "fields", "-E", "occurrence=a",
                 *[x for f in fields for x in ("-e", f)])
    return [line.split("\t") for line in out.splitlines()]


def frames(a, pcap, flt, opts=("-2",)):
    return set(int(r[0]) for r in rows(a, pcap, flt, "frame.number", opts=opts))


# ---- ooo ----------------------------------------------------------------------------

def compare_listing(listed, logged):
    """None when the listing's offsets are the receiver's out-of-order ones,
    else what differs."""
    if len(set(listed)) != len(listed):
        return "a record listed twice: %s" % sorted(x for x in set(listed) if listed.count(x) > 1)
    if set(listed) != set(logged):
        return ("listed, not logged: %s; logged, not listed: %s"
                % (sorted(set(listed) - set(logged)), sorted(set(logged) - set(listed))))
    return None


def check_listing(a, pcap, keylog, recv_log, port, what):
    cli = run_argv(["/usr/bin/python3", os.path.join(SRC, "wireshark", "ooo_records.py"), "--build", a.build,
                    "--pcap", pcap, "--keylog", keylog, "--port", str(port), "--prepare"],
                   "ooo_records.py")
    lines = cli.splitlines()
    if len(lines) != 1:
        raise Fail("ooo_records.py printed %d lines, not one command" % len(lines))
    cmd = lines[0]
    log("%s: the command:\n%s" % (what, cmd))
    out = run_argv(["bash", "-c", cmd], "the printed command")
    listing = ooo_records.parse(out)
    listed = [o for _, recs, _ in listing for o, _ in recs]
    plain = [p for _, _, ps in listing for p in ps]
    # The key log is applied: each listed record decrypted to its 1426 bytes.
    if plain != [1426] * len(listed):
        raise Fail("%s: plaintext lengths of the listed records: %s (want 1426 for each of %d)"
                   % (what, sorted(set(plain)), len(listed)))
    logged, summary_count, received = receiver_ooo(recv_log)
    log("%s: the command lists %d records in %d frames, each decrypted to 1426 bytes; the receiver "
        "logged %d out of order (summary %d) of %d"
        % (what, len(listed), len(listing), len(logged), summary_count, received))
    if not listed:
        raise Fail("%s: the command lists no out-of-order record" % what)
    if len(logged) != summary_count:
        raise Fail("%s: the receiver's log has %d ooo records, its summary says %d"
                   % (what, len(logged), summary_count))
    diff = compare_listing(listed, logged)
    if diff:
        raise Fail("%s: the listing is not what the receiver delivered out of order: %s" % (what, diff))
    # Self-check: one record less on the receiver's side must be noticed.
    if compare_listing(listed, logged[1:]) is None:
        raise Fail("self-check: a receiver set with one record less compared equal")
    return cmd, received


def cmd_ooo(a, work):
    pcap, keylog, recv_log, port = make_capture(a, work)
    cut = rows(a, pcap, "frame.cap_len < frame.len", "frame.number", opts=())
    if cut:
        raise Fail("the demo-like capture has %d truncated frames: not whole packets" % len(cut))
    cmd, received = check_listing(a, pcap, keylog, recv_log, port, "test capture")
    # The command loads the build tree's plugin.
    plugin = os.path.realpath(ooo_records.plugin_dir(a.build))
    loaded = [line for line in tshark(a, "-G", "plugins").splitlines() if line.startswith("utls.so")]
    if len(loaded) != 1 or plugin not in os.path.realpath(loaded[0].split("\t")[-1]):
        raise Fail("tshark under the command's prefix does not load %s/*/epan/utls.so: %s" % (plugin, loaded))
    # Its options decrypt every record with the key log, holes or not.
    plain = [v for r in rows(a, pcap, "tcp.dstport == %d && utls.plaintext_len" % port, "utls.plaintext_len",
                             opts=ooo_records.read_options(pcap, keylog)[2:])
             for v in r[0].split(",") if v]
    log("decrypted application data records toward the receiver: %d (received %d)" % (len(plain), received))
    if plain.count("1426") != received:
        raise Fail("with the command's options %d records decrypt to 1426 bytes, the receiver got %d"
                   % (plain.count("1426"), received))
    # Self-check: without the key log the plaintext column stays empty.
    nokeys = cmd.replace(" -o tls.keylog_file:" + os.path.abspath(keylog), "")
    if nokeys == cmd:
        raise Fail("self-check: the command does not apply the key log %s" % keylog)
    if any(ps for _, _, ps in ooo_records.parse(run_argv(["bash", "-c", nokeys], "the command without keys"))):
        raise Fail("self-check: plaintext lengths listed without the key log")
    # Self-check: without the build tree's plugin the command lists nothing.
    empty = os.path.join(work, "no-plugins")
    os.makedirs(os.path.join(empty, "4.0", "epan"), exist_ok=True)
    os.chmod(work, 0o755)
    bare = cmd.replace("WIRESHARK_PLUGIN_DIR=" + ooo_records.plugin_dir(a.build), "WIRESHARK_PLUGIN_DIR=" + empty)
    if bare == cmd:
        raise Fail("self-check: the command does not name the build tree's plugin directory")
    r = subprocess.run(["bash", "-c", bare], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == 0 and len(r.stdout.splitlines()) > 1:
        raise Fail("self-check: without the plugin the command still lists records")
    # The demo's own capture, if `make demo` ran.
    demo = os.path.join(os.path.abspath(a.build), "demo")
    files = [os.path.join(demo, "utls.pcap"), os.path.join(demo, "utls.keys"),
             os.path.join(demo, "latency", "demo", "utls.recv.jsonl")]
    if all(os.path.isfile(f) for f in files):
        check_listing(a, files[0], files[1], files[2], port, "the demo's capture")
    else:
        log("no capture of `make demo` in %s: only the test's capture checked" % demo)
    return 0


# ---- truncated ----------------------------------------------------------------------

def segments(a, pcap):
    """Per frame with TCP: (frame, stream, srcport, seq_raw, tcp.len, syn, captured payload bytes)."""
    out = []
    for r in rows(a, pcap, "tcp", "frame.number", "tcp.stream", "tcp.srcport", "tcp.seq_raw", "tcp.len",
                  "tcp.flags.syn", "frame.len", "frame.cap_len", opts=()):
        f, st, sp, seq, ln, syn, flen, clen = r
        ln = int(ln)
        captured = max(0, ln - (int(flen) - int(clen)))
        out.append((int(f), int(st), int(sp), int(seq), ln, syn in ("1", "True"), captured))
    return out


def holes(segs, captured_lengths=False):
    """The frames that arrive past a hole, and how many holes open (a segment
    beyond every byte seen), by sequence numbers and lengths: TCP's (tcp.len),
    or with |captured_lengths| what the capture kept of each segment -- the
    mistake the plugin must not make."""
    dirs, past, opened = {}, set(), 0
    for f, st, sp, seq, ln, syn, cap in segs:
        key = (st, sp)
        if syn:
            dirs[key] = {"base": seq + 1, "inorder": 0, "highest": 0, "held": []}
            continue
        d = dirs.get(key)
        n = cap if captured_lengths else ln
        if d is None or n == 0:
            continue
        off = (seq - d["base"]) & 0xffffffff
        end = off + n
        if off > d["highest"]:
            opened += 1
        d["highest"] = max(d["highest"], end)
        if end <= d["inorder"]:
            continue
        if off > d["inorder"]:
            past.add(f)
            d["held"].append((off, end))
            continue
        d["inorder"] = end
        moved = True
        while moved:
            moved = False
            for h in list(d["held"]):
                if h[0] <= d["inorder"]:
                    d["inorder"] = max(d["inorder"], h[1])
                    d["held"].remove(h)
                    moved = True
    return past, opened


def ooo_offsets(a, pcap, port):
    return sorted(int(v) for r in rows(a, pcap, "tcp.dstport == %d && utls.ooo_record" % port,
                                       "utls.ooo_record.offset", opts=("-2",))
                  for v in r[0].split(",") if v)


LOST_WITH_DATA = "(tcp.analysis.lost_segment && tcp.len > 0)"


def cmd_truncated(a, work):
    pcap, keylog, recv_log, port = make_capture(a, work)
    full_segs = segments(a, pcap)
    want_past, opened = holes(full_segs)
    full_past = frames(a, pcap, "utls.past_hole")
    # Lost segments before a frame that carries data: a lost tail (the
    # sender's close_notify) is "found" by TCP analysis on the next bare ACK
    # or FIN, which holds no record to mark past a hole. (Which segments the
    # seeded loss hits depends on the handshake's sizes: on the 3.5 base it
    # is the close_notify.)
    lost = frames(a, pcap, LOST_WITH_DATA)
    full_ooo = ooo_offsets(a, pcap, port)
    log("whole capture: %d frames past a hole (TCP's lengths: %d), %d holes opened, "
        "%d tcp.analysis.lost_segment, %d out-of-order records"
        % (len(full_past), len(want_past), opened, len(lost), len(full_ooo)))
    if not lost or not want_past:
        raise Fail("no loss in the test capture: nothing to check (raise --loss or --count)")
    if full_past != want_past:
        raise Fail("whole capture: utls.past_hole on %d frames, TCP's lengths give %d (differ: %s)"
                   % (len(full_past), len(want_past), sorted(full_past ^ want_past)[:20]))
    if opened != len(lost):
        raise Fail("holes opened by TCP's lengths (%d) != tcp.analysis.lost_segment frames (%d)"
                   % (opened, len(lost)))
    # The headers of a full-sized data frame toward the receiver, plus 5.
    hdr = min(int(r[0]) - int(r[1]) for r in rows(a, pcap, "tcp.dstport == %d && tcp.len > 1000" % port,
                                                     "frame.len", "tcp.len", opts=()))
    for snap, records_kept in ((128, True), (hdr + 5, False)):
        cut = os.path.join(work, "cut%d.pcap" % snap)
        run_argv(["editcap", "-s", str(snap), pcap, cut], "editcap -s %d" % snap)
        os.chmod(cut, 0o644)
        segs = segments(a, cut)
        truncated_data = set(f for f, st, sp, seq, ln, syn, cap in segs if cap < ln)
        past, opened_cut = holes(segs)
        bug_past, _ = holes(segs, captured_lengths=True)
        marked = frames(a, cut, "utls.truncated")
        got_past = frames(a, cut, "utls.past_hole")
        got_lost = frames(a, cut, LOST_WITH_DATA)
        both = frames(a, cut, "utls.past_hole && " + LOST_WITH_DATA)
        mismatch = frames(a, cut, "utls.analysis_mismatch")
        unknown = frames(a, cut, "utls.records_unknown")
        ooo = ooo_offsets(a, cut, port)
        log("snap length %d: %d data frames cut, %d marked utls.truncated; utls.past_hole %d (TCP's lengths "
            "%d, captured lengths %d); lost_segment %d, of them past_hole %d; analysis_mismatch %d; "
            "records_unknown %d; out-of-order records %d"
            % (snap, len(truncated_data), len(marked), len(got_past), len(past), len(bug_past), len(got_lost),
               len(both), len(mismatch), len(unknown), len(ooo)))
        if not truncated_data:
            raise Fail("editcap -s %d cut no data frame" % snap)
        if marked != truncated_data:
            raise Fail("-s %d: utls.truncated on %d frames, %d data frames are cut (differ: %s)"
                       % (snap, len(marked), len(truncated_data), sorted(marked ^ truncated_data)[:20]))
        if past != want_past or opened_cut != opened:
            raise Fail("-s %d: TCP's lengths changed in the cut copy" % snap)
        if bug_past == past:
            raise Fail("-s %d: captured lengths give the same holes: the check cannot tell" % snap)
        if got_past != want_past:
            raise Fail("-s %d: utls.past_hole on %d frames, TCP's lengths give %d (differ: %s)"
                       % (snap, len(got_past), len(want_past), sorted(got_past ^ want_past)[:20]))
        if got_lost != lost or both != lost:
            raise Fail("-s %d: tcp.analysis.lost_segment %d (whole capture %d), of them utls.past_hole %d"
                       % (snap, len(got_lost), len(lost), len(both)))
        if mismatch:
            raise Fail("-s %d: utls.analysis_mismatch on frames %s" % (snap, sorted(mismatch)[:20]))
        if records_kept:
            if ooo != full_ooo:
                raise Fail("-s %d: out-of-order records %s, whole capture %s" % (snap, ooo, full_ooo))
        elif not unknown:
            raise Fail("-s %d: record headers were cut, yet no utls.records_unknown" % snap)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=("ooo", "truncated"))
    ap.add_argument("--build", required=True)
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("--prefix", required=True, help="testbed prefix (its namespaces: PREFIX0-*)")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--loss", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    why = missing_prerequisite(("tcpdump", "editcap", "setpriv", "bash", a.tshark),
                               "the testbed (network namespaces), the tap and tcpdump need root")
    if why is not None:
        log("SKIP: " + why)
        return SKIP
    try:
        ooo_records.plugin_dir(a.build)
    except FileNotFoundError as e:
        log("FAIL: %s" % e)
        return 1
    work = tempfile.mkdtemp(prefix="utls-demo-capture-")
    os.chmod(work, 0o755)  # tshark runs as nobody
    ok = False
    try:
        rc = (cmd_ooo if a.command == "ooo" else cmd_truncated)(a, work)
        ok = rc == 0
        log("PASS" if ok else "FAIL")
        return rc
    except Fail as e:
        log("FAIL: %s" % e)
        return 1
    finally:
        if ok and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log("work directory kept: %s" % work)


if __name__ == "__main__":
    sys.exit(main())

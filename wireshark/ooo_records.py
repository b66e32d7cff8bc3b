#!/usr/bin/python3
"""ooo_records.py: the tshark command that lists, from a capture taken at a
uTLS receiver and its TLS key log, the records the receiver could deliver out
of order -- those whose last byte arrived while an earlier byte of the stream
was missing (utls.ooo_record, from the build tree's plugin). `make demo`
prints it for build/demo/utls.pcap; the test wireshark.demo.ooo_command runs
exactly what this prints. Standard library only.

One line per frame that completed such records: frame number, time, the
records' stream offsets, wire lengths and plaintext lengths (from the key
log), how long TCP made each wait (utls.ooo_wait) and the frame in which TCP
delivered it. With the key log, a record past a hole that decrypts to an
alert or a handshake message is not listed (utls.ooo_control instead): a
uTLS receiver processes those in order only.

  * The plugin comes from the build tree (WIRESHARK_PLUGIN_DIR). tshark
    ignores that variable when run as root (it then loads only the global
    plugin directory), so for root the command runs tshark as the
    unprivileged user nobody (setpriv), as tests/wireshark does.
  * nobody must be able to read the capture and the key log: prepare()
    makes the key log group nogroup, mode 0640 (not world-readable), and the
    capture 0644.
  * -o tcp.reassemble_out_of_order:TRUE: without it TCP hands segments past
    a hole to TLS at once and Wireshark's TLS decryption, which counts
    records in the order it sees them, fails from the first hole on. With
    it every record is decrypted (in the frame TCP delivers it); the uTLS
    postdissector sees each segment as it arrived either way.
  * -2: the frame in which a record completed past a hole is known only
    once the hole is filled, in a later frame.

Usage:
  ooo_records.py --build BUILD --pcap PCAP --keylog KEYS --port PORT [--prepare]
prints the command (one shell line); --prepare first sets the permissions.
"""
import argparse
import glob
import grp
import os
import shlex
import shutil
import sys

# What the listing shows, one column each.
FIELDS = ("frame.number", "frame.time_relative", "utls.ooo_record.offset", "utls.ooo_record.length",
          "utls.ooo_record.plaintext_len",
          "utls.ooo_wait", "utls.completes_ooo_record")
UNPRIVILEGED = ("nobody", "nogroup")


def plugin_dir(build):
    """The build tree's plugin directory (the DIR of DIR/X.Y/epan/utls.so)
    for WIRESHARK_PLUGIN_DIR; raises FileNotFoundError if utls.so was not
    built."""
    base = os.path.join(os.path.abspath(build), "wireshark", "plugins")
    if not glob.glob(os.path.join(base, "*", "epan", "utls.so")):
        raise FileNotFoundError("no uTLS Wireshark plugin under %s (needs wireshark-dev; "
                                "build the utls_wireshark target)" % base)
    return base


def tshark_prefix(build, as_root=None):
    """argv that runs tshark with the build tree's plugin loaded."""
    if as_root is None:
        as_root = os.geteuid() == 0
    tshark = shutil.which("tshark") or "/usr/bin/tshark"
    # -C /: a working directory nobody may not read (root's) makes tshark
    # warn that it cannot read files it looks for there.
    env = ["env", "-C", "/", "HOME=/nonexistent", "WIRESHARK_PLUGIN_DIR=" + plugin_dir(build)]
    if not as_root:
        return env + [tshark]
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, "--reuid=" + UNPRIVILEGED[0], "--regid=" + UNPRIVILEGED[1], "--clear-groups"] + env + [tshark]


def read_options(pcap, keylog):
    """tshark options: the capture in two passes, decrypted."""
    return ["-r", os.path.abspath(pcap), "-2", "-o", "tls.keylog_file:" + os.path.abspath(keylog),
            "-o", "tcp.reassemble_out_of_order:TRUE"]


def command(build, pcap, keylog, port, as_root=None):
    """The listing's argv: out-of-order records of the stream toward |port|
    (the receiver's)."""
    return (tshark_prefix(build, as_root) + read_options(pcap, keylog)
            + ["-Y", "tcp.dstport == %d && utls.ooo_record" % port, "-T", "fields", "-E", "header=y"]
            + [x for f in FIELDS for x in ("-e", f)])


def shell(argv):
    return " ".join(shlex.quote(x) for x in argv)


def prepare(pcap, keylog):
    """Lets the unprivileged user read the capture and the key log: the key
    log (secrets) becomes group nogroup, 0640; the capture 0644."""
    if os.geteuid() != 0:
        return
    os.chown(keylog, -1, grp.getgrnam(UNPRIVILEGED[1]).gr_gid)
    os.chmod(keylog, 0o640)
    os.chmod(pcap, 0o644)


def parse(text):
    """[(frame, [(offset, length)], [plaintext lengths])] from the listing's
    output (no plaintext lengths without the key log)."""
    rows = []
    lines = text.splitlines()
    if not lines or lines[0].split("\t") != list(FIELDS):
        raise ValueError("not the listing's header: %r" % (lines[:1],))
    for line in lines[1:]:
        cols = line.split("\t")
        offs = [int(x) for x in cols[2].split(",") if x]
        lens = [int(x) for x in cols[3].split(",") if x]
        plain = [int(x) for x in cols[4].split(",") if x]
        if len(offs) != len(lens):
            raise ValueError("offsets and lengths do not pair up: %r" % line)
        rows.append((int(cols[0]), list(zip(offs, lens)), plain))
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--pcap", required=True)
    ap.add_argument("--keylog", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--prepare", action="store_true", help="make both readable for nobody first")
    a = ap.parse_args(argv)
    try:
        cmd = command(a.build, a.pcap, a.keylog, a.port)
    except FileNotFoundError as e:
        print("ooo_records: %s" % e, file=sys.stderr)
        return 2
    if a.prepare:
        prepare(a.pcap, a.keylog)
    print(shell(cmd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

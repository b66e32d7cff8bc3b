#!/usr/bin/python3
"""Preload interop test driver (ctest label `interop`). Standard library only.

One run = one scenario: a TLS client and a TLS server, each of them an
unmodified program (openssl s_client / s_server, curl, the Python
interpreter's ssl module), each run either with LD_PRELOAD of the fork
("fork") or as installed ("stock"). The driver

  * makes a throwaway certificate and key with the openssl CLI,
  * starts the server on 127.0.0.1 (free port; readiness = the server process
    itself owns a LISTEN socket on it, found through /proc/PID/fd),
  * brings the client up to the end of its handshake and holds both there,
  * reads /proc/PID/maps of each process while it is alive: a "fork" process
    must map exactly the fork's libssl (real path) and not the system one, a
    "stock" process exactly the system libssl and not the fork,
  * sends 64 KiB of random bytes client -> server and a small random line plus
    16 KiB server -> client (curl: downloads both) and compares SHA-256,
  * checks the negotiated protocol version is the one requested,
  * for Python peers also checks from inside the process, through ctypes, that
    UTLS_version resolves in the libssl the ssl module uses (fork) or not
    (stock).

Every child gets PR_SET_PDEATHSIG(SIGKILL) and its own process group, which
the driver kills on any exit; the whole run is bounded by --deadline.

Failures are categorised (maps, version, data, inproc, process, timeout).
--expect-fail CATEGORY inverts the result: the run passes only if it fails in
that category -- this is how the negative self-tests prove the checks can fail.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

from interop_procs import (Failure, Proc, check_maps, free_port, listening_ports, log, run_driver,
                           wait_until)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from preload_env import preload_vars  # noqa: E402  (tests/common: the 3.5 build's libcrypto)

CATEGORIES = ("maps", "version", "data", "inproc", "process", "timeout", "setup")


# --------------------------------------------------------------------------
# /proc inspection (processes, maps, ports: interop_procs.py)

def check_lib(pr, cfg):
    """Assert from /proc/PID/maps, while pr is alive, which libssl it maps."""
    check_maps(pr, pr.lib, cfg.fork_real, cfg.system_real)


def blocked_reading_stdin(pid):
    """True when pid sits in read(0, ...): it is past the dynamic loader."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            s = f.read().split()
    except OSError:
        return False
    return len(s) >= 2 and s[0] == "0" and s[1] == "0x0"


# --------------------------------------------------------------------------
# The run

class Config:
    pass


def child_env(cfg, lib, side):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("LD_") or k.startswith("PYTHON") or k.startswith("UTLS_")
                   or k.lower().endswith("_proxy") or k == "SSLKEYLOGFILE")}
    env["HOME"] = cfg.work  # no ~/.curlrc, no user config
    swapped = side in cfg.swap
    if lib == "fork":
        # Sabotage (--swap-libs): a "fork" side really gets the system libssl.
        env.update(preload_vars(cfg.system_real if swapped else cfg.fork_real))
    elif swapped:
        env.update(preload_vars(cfg.fork_real))  # and a "stock" side gets the fork
    elif cfg.system_preload:
        env.update(preload_vars(cfg.system_real))  # a distribution's libssl not installed here
    return env


def spawn(cfg, name, argv, lib, cwd=None):
    side = name.split("_", 1)[0]  # "client" or "server"
    return Proc(name, argv, child_env(cfg, lib, side), cfg.work, lib=lib, cwd=cwd)


TLS_FLAG = {"1.2": "-tls1_2", "1.3": "-tls1_3"}
TLS_NAME = {"1.2": "TLSv1.2", "1.3": "TLSv1.3"}


def check_version(cfg, who, seen):
    want = TLS_NAME[cfg.expect_version]
    if seen != want:
        raise Failure("version", "%s negotiated %r, expected %r" % (who, seen, want))
    log("version OK: %s negotiated %s" % (who, seen))


def check_data(who, got, want):
    hg, hw = hashlib.sha256(got).hexdigest(), hashlib.sha256(want).hexdigest()
    if hg != hw:
        raise Failure("data", "%s received %d bytes sha256 %s, expected %d bytes sha256 %s"
                      % (who, len(got), hg, len(want), hw))
    log("data OK: %s received %d bytes intact (sha256 %s)" % (who, len(got), hg[:16]))


def check_inproc(cfg, who, result, lib):
    uv = result.get("utls_version")
    if lib == "fork":
        if not uv or uv.get("short") != cfg.utls_short:
            raise Failure("inproc", "%s: UTLS_version in the ssl module's libssl = %r, expected %r"
                          % (who, uv, cfg.utls_short))
    elif uv is not None:
        raise Failure("inproc", "%s (stock): UTLS_version unexpectedly resolves: %r" % (who, uv))
    log("in-process OK: %s UTLS_version = %r, self maps %s" % (who, uv, result.get("libssl_maps")))


def result_of(pr):
    for line in pr.out().decode("utf-8", "replace").splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise Failure("process", "%s printed no RESULT\n%s" % (pr.name, pr.tails()))


def line_value(pr, prefix, stream="out"):
    text = pr.out().decode("utf-8", "replace") if stream == "out" else pr.err()
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None


def start_server(cfg, kind, lib):
    if kind == "python":
        pr = spawn(cfg, "server_python", [cfg.python, cfg.peer, "server", "--tls", cfg.tls,
                                          "--cert", cfg.cert, "--key", cfg.key,
                                          "--send", cfg.down_send_file, "--recv", str(len(cfg.up)),
                                          "--out", os.path.join(cfg.work, "server_received")], lib)
        port = int(wait_until(lambda: line_value(pr, "LISTENING "), 20, "python server to listen", [pr]))
        wait_until(lambda: port in listening_ports(pr.pid), 5, "python server's LISTEN socket", [pr])
        return pr, port
    # openssl s_server; -quiet: its stdout is exactly the bytes it receives.
    for attempt in range(5):
        port = free_port()
        argv = [cfg.openssl, "s_server", "-quiet", "-accept", "127.0.0.1:%d" % port,
                "-cert", cfg.cert, "-key", cfg.key, TLS_FLAG[cfg.tls]]
        if kind == "s_server_www":
            argv += ["-WWW"]  # serves files from its cwd; killed at the end
        else:
            argv += ["-naccept", "1"]
        pr = spawn(cfg, "server_s_server", argv, lib, cwd=cfg.www if kind == "s_server_www" else None)
        try:
            wait_until(lambda: port in listening_ports(pr.pid), 20, "s_server to listen on %d" % port, [pr])
            return pr, port
        except Failure as f:
            if f.category == "process" and "in use" in pr.err() and attempt < 4:
                log("port %d taken, retrying" % port)
                Proc.all.remove(pr)
                continue
            raise
    raise Failure("setup", "no free port")


def run(cfg):
    server, port = start_server(cfg, cfg.server, cfg.server_lib)
    check_lib(server, cfg)

    # ---- client up to the end of its handshake (or, for curl, to main())
    if cfg.client == "s_client":
        client = spawn(cfg, "client_s_client",
                       [cfg.openssl, "s_client", "-brief", "-nocommands", "-no_ign_eof",
                        "-connect", "127.0.0.1:%d" % port, "-servername", "localhost",
                        "-CAfile", cfg.cert, "-verify_return_error", "-verify_hostname", "localhost",
                        TLS_FLAG[cfg.tls]], cfg.client_lib)
        wait_until(lambda: "CONNECTION ESTABLISHED" in client.err()
                   and line_value(client, "Protocol version:", "err"), 20,
                   "s_client handshake", [client])
        check_lib(client, cfg)
        check_version(cfg, "s_client", line_value(client, "Protocol version:", "err"))
    elif cfg.client == "python":
        client = spawn(cfg, "client_python",
                       [cfg.python, cfg.peer, "client", "--tls", cfg.tls, "--cert", cfg.cert,
                        "--port", str(port), "--send", cfg.up_send_file, "--recv", str(len(cfg.down)),
                        "--out", os.path.join(cfg.work, "client_received")], cfg.client_lib)
        wait_until(lambda: line_value(client, "HANDSHAKE "), 20, "python client handshake", [client])
        check_lib(client, cfg)
        check_version(cfg, "python client", line_value(client, "HANDSHAKE "))
    else:  # curl: reads its config (-K -) from stdin; hold it there, check, then release
        client = spawn(cfg, "client_curl",
                       [cfg.curl, "-q", "-sS", "-v", "--noproxy", "*", "--max-time", "20",
                        "--cacert", cfg.cert, "--resolve", "localhost:%d:127.0.0.1" % port,
                        "--tlsv%s" % cfg.tls, "--tls-max", cfg.tls, "-K", "-"], cfg.client_lib)
        wait_until(lambda: blocked_reading_stdin(client.pid), 20, "curl to read its config", [client])
        check_lib(client, cfg)

    if cfg.server == "python":
        wait_until(lambda: line_value(server, "HANDSHAKE "), 20, "python server handshake", [server])
        check_version(cfg, "python server", line_value(server, "HANDSHAKE "))
        server.write(b"GO\n")

    # ---- data
    if cfg.client == "curl":
        outs = [os.path.join(cfg.work, "curl_" + n) for n in ("payload.bin", "line.txt")]
        conf = "".join('url = "https://localhost:%d/%s"\noutput = "%s"\n' % (port, n, o)
                       for n, o in zip(("payload.bin", "line.txt"), outs))
        client.write(conf.encode())
        client.close_stdin()
        rc = client.wait(30)
        if rc != 0:
            raise Failure("process", "curl exited %d\n%s" % (rc, client.tails()))
        seen = re.findall(r"SSL connection using (\S+) ", client.err())
        if len(seen) != 2:
            raise Failure("version", "curl reported %d TLS connections, expected 2: %r\n%s"
                          % (len(seen), seen, client.tails()))
        for v in seen:
            check_version(cfg, "curl", v)
        for o, want in zip(outs, (cfg.payload_expected, cfg.line_expected)):
            with open(o, "rb") as f:
                check_data("curl (%s)" % os.path.basename(o), f.read(), want)
        return

    if cfg.client == "python":
        client.write(b"GO\n")
    else:
        client.write(cfg.up_send)  # s_client sends its stdin; stdin stays open

    if cfg.server in ("s_server",):
        wait_until(lambda: len(server.out()) >= len(cfg.up), 20, "s_server to receive the payload",
                   [server])
        server.write(cfg.down_send)  # s_server sends its stdin

    if cfg.client == "s_client":
        wait_until(lambda: len(client.out()) >= len(cfg.down), 20, "s_client to receive the reply",
                   [client])
        client.close_stdin()  # -no_ign_eof: EOF makes s_client close the connection
        rc = client.wait(20)
        if rc != 0:
            raise Failure("process", "s_client exited %d\n%s" % (rc, client.tails()))
        check_data("s_client", client.out(), cfg.down)
    else:
        rc = client.wait(20)
        if rc != 0:
            raise Failure("process", "python client exited %d\n%s" % (rc, client.tails()))
        res = result_of(client)
        check_version(cfg, "python client (end)", res["version"])
        check_inproc(cfg, "python client", res, client.lib)
        with open(os.path.join(cfg.work, "client_received"), "rb") as f:
            check_data("python client", f.read(), cfg.down)

    if cfg.server == "python":
        rc = server.wait(20)
        if rc != 0:
            raise Failure("process", "python server exited %d\n%s" % (rc, server.tails()))
        res = result_of(server)
        check_inproc(cfg, "python server", res, server.lib)
        with open(os.path.join(cfg.work, "server_received"), "rb") as f:
            check_data("python server", f.read(), cfg.up)
    else:
        rc = server.wait(20, "exit after its one connection")
        if rc != 0:
            raise Failure("process", "s_server exited %d\n%s" % (rc, server.tails()))
        check_data("s_server", server.out(), cfg.up)


def make_cert(cfg):
    cfg.cert = os.path.join(cfg.work, "cert.pem")
    cfg.key = os.path.join(cfg.work, "key.pem")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    r = subprocess.run([cfg.openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", cfg.key, "-out", cfg.cert, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       capture_output=True, env=env, timeout=20)
    if r.returncode != 0:
        raise Failure("setup", "openssl req failed: %s" % r.stderr.decode(errors="replace"))


def corrupt(b):
    return b[:len(b) // 2] + bytes([b[len(b) // 2] ^ 0x01]) + b[len(b) // 2 + 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fork", required=True, help="the fork's libssl.so.3")
    ap.add_argument("--system", required=True, help="the system libssl.so.3")
    ap.add_argument("--system-preload", action="store_true",
                    help="--system is not the libssl the programs link (Debian 13's for the 3.5 base, "
                         "tests/security35): a stock side preloads it, as a fork side the fork")
    ap.add_argument("--client", choices=["s_client", "python", "curl"], required=True)
    ap.add_argument("--server", choices=["s_server", "python"], required=True)
    ap.add_argument("--client-lib", choices=["fork", "stock"], default="fork")
    ap.add_argument("--server-lib", choices=["fork", "stock"], default="fork")
    ap.add_argument("--tls", choices=["1.2", "1.3"], required=True)
    ap.add_argument("--openssl", default="/usr/bin/openssl")
    ap.add_argument("--curl", default="/usr/bin/curl")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the real interpreter (not a pyenv shim)")
    ap.add_argument("--utls-version", default="0.1.0", help="expected UTLS_version(0) of the fork")
    ap.add_argument("--deadline", type=float, default=50.0)
    # Sabotage, for the negative self-tests.
    ap.add_argument("--expect-fail", choices=CATEGORIES,
                    help="pass only if the run fails with this category")
    ap.add_argument("--corrupt-payload", action="store_true",
                    help="send a payload with one bit flipped (data check must fail)")
    ap.add_argument("--expect-version", choices=["1.2", "1.3"],
                    help="version to assert (default: the one requested)")
    ap.add_argument("--swap-libs", choices=["client", "server", "both"],
                    help="run that side's fork as stock / its stock with the fork preloaded, "
                         "but check it as labelled (maps check must fail)")
    a = ap.parse_args()

    cfg = Config()
    cfg.client, cfg.server, cfg.tls = a.client, a.server, a.tls
    cfg.client_lib, cfg.server_lib = a.client_lib, a.server_lib
    cfg.expect_version = a.expect_version or a.tls
    cfg.utls_short = a.utls_version
    cfg.openssl, cfg.curl = a.openssl, a.curl
    cfg.python = os.path.realpath(a.python)
    cfg.peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls_peer.py")
    cfg.fork_real = os.path.realpath(a.fork)
    cfg.system_real = os.path.realpath(a.system)
    cfg.system_preload = a.system_preload
    cfg.swap = {"client": ["client"], "server": ["server"], "both": ["client", "server"]}.get(a.swap_libs, [])
    if cfg.client == "curl":
        cfg.server = "s_server_www"

    def body(work):
        cfg.work = work
        for f, what in ((cfg.fork_real, "fork"), (cfg.system_real, "system libssl")):
            if not os.path.isfile(f):
                raise Failure("setup", "%s not found: %s" % (what, f))
        progs = [cfg.openssl] + ([cfg.curl] if cfg.client == "curl" else []) + \
                ([cfg.python] if "python" in (cfg.client, cfg.server) else [])
        for prog in progs:
            with open(prog, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    raise Failure("setup", "%s is not an ELF executable (a shim?); "
                                           "LD_PRELOAD must reach the real program" % prog)
        log("scenario: client=%s(%s) server=%s(%s) TLS %s; fork=%s system=%s"
            % (cfg.client, cfg.client_lib, cfg.server, cfg.server_lib, cfg.tls,
               cfg.fork_real, cfg.system_real))
        make_cert(cfg)
        cfg.up = os.urandom(64 * 1024)
        cfg.down = b"uTLS interop line " + os.urandom(16).hex().encode() + b"\n" + os.urandom(16 * 1024)
        cfg.up_send = corrupt(cfg.up) if a.corrupt_payload else cfg.up
        cfg.down_send = cfg.down
        cfg.up_send_file = os.path.join(cfg.work, "up.bin")
        cfg.down_send_file = os.path.join(cfg.work, "down.bin")
        with open(cfg.up_send_file, "wb") as f:
            f.write(cfg.up_send)
        with open(cfg.down_send_file, "wb") as f:
            f.write(cfg.down_send)
        # For curl: files served by s_server -WWW.
        cfg.www = os.path.join(cfg.work, "www")
        os.mkdir(cfg.www)
        cfg.payload_expected = cfg.up
        cfg.line_expected = b"uTLS small line " + os.urandom(8).hex().encode() + b"\n"
        with open(os.path.join(cfg.www, "payload.bin"), "wb") as f:
            f.write(cfg.up_send)
        with open(os.path.join(cfg.www, "line.txt"), "wb") as f:
            f.write(cfg.line_expected)
        run(cfg)

    return run_driver(body, "utls-interop-", a.deadline, a.expect_fail)


if __name__ == "__main__":
    sys.exit(main())

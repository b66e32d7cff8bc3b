"""Child processes, readiness and verdicts shared by the interop drivers.

Used by tests/interop/preload_interop.py and tests/ern-interop/ern_interop.py
(which puts this directory on sys.path). Standard library only.

Every child gets PR_SET_PDEATHSIG(SIGKILL) and its own process group, which
run_driver() kills on any exit; the whole run is bounded by its deadline.
Failures carry a category; --expect-fail CATEGORY inverts the verdict, which
is how the negative self-tests prove that a check can fail.
"""
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)
_log_name = "interop"


class Failure(Exception):
    """Failure(category, message): a check failed; category names which one."""

    def __init__(self, category, message):
        super().__init__("[%s] %s" % (category, message))
        self.category = category


def set_log_name(name):
    """set_log_name(name): the prefix of every log() line of this driver."""
    global _log_name
    _log_name = name


def log(msg):
    """log(msg): one line "NAME: msg" on stdout (flushed: ctest shows it even
    when the driver is killed)."""
    sys.stdout.write("%s: %s\n" % (_log_name, msg))
    sys.stdout.flush()


def child_setup():
    """child_setup(): the preexec_fn of every child: between fork and exec it
    asks for SIGKILL when the driver dies (PR_SET_PDEATHSIG)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Proc:
    """Proc(name, argv, env, workdir, lib=None, cwd=None, stdin=True): a child
    whose stdout and stderr go to workdir/NAME.stdout and NAME.stderr; stdin
    is a pipe (or /dev/null when stdin is false). lib labels it for
    check_maps ("fork" or "stock"). Every Proc is in Proc.all for kill_all()."""
    all = []

    def __init__(self, name, argv, env, workdir, lib=None, cwd=None, stdin=True):
        self.name, self.lib, self.argv = name, lib, argv
        self.out_path = os.path.join(workdir, name + ".stdout")
        self.err_path = os.path.join(workdir, name + ".stderr")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                      stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True,
                                      preexec_fn=child_setup)
        Proc.all.append(self)
        self.pid = self.p.pid
        log("started %s (pid %d%s): %s" % (name, self.pid, ", " + lib if lib else "", " ".join(argv)))

    def alive(self):
        return self.p.poll() is None

    def out(self):
        with open(self.out_path, "rb") as f:
            return f.read()

    def err(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def write(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def close_stdin(self):
        try:
            if self.p.stdin:
                self.p.stdin.close()
        except OSError:
            pass

    def wait(self, timeout, what="exit"):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failure("timeout", "%s did not %s within %.0f s\n%s" % (self.name, what, timeout, self.tails()))

    def tails(self):
        o = self.out()[-800:]
        text = o.decode("utf-8", "replace") if b"\0" not in o else "<%d bytes binary>" % len(self.out())
        return "--- %s stdout (tail) ---\n%s\n--- %s stderr (tail) ---\n%s" % (
            self.name, text, self.name, self.err()[-1500:])

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.close_stdin()


def kill_all():
    """kill_all(): kills every Proc started (their process groups)."""
    for pr in Proc.all:
        pr.kill()


def wait_until(pred, timeout, what, procs=()):
    """wait_until(pred, timeout, what, procs): poll pred() until it is true and
    return its value; fail early if one of procs exits meanwhile."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        for pr in procs:
            if not pr.alive():
                v = pred()  # it may have finished its job just now
                if v:
                    return v
                raise Failure("process", "%s exited (rc %s) while waiting for %s\n%s"
                              % (pr.name, pr.p.returncode, what, pr.tails()))
        if time.monotonic() > end:
            raise Failure("timeout", "timed out after %.0f s waiting for %s\n%s"
                          % (timeout, what, "\n".join(pr.tails() for pr in procs)))
        time.sleep(0.02)


def free_port():
    """free_port(): a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_ports(pid):
    """listening_ports(pid): TCP ports on which process pid itself holds a
    LISTEN socket (its /proc/PID/fd socket inodes in /proc/PID/net/tcp*)."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            m = re.match(r"socket:\[(\d+)\]", t)
            if m:
                inodes.add(m.group(1))
    except OSError:
        return set()
    ports = set()
    for tbl in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        try:
            with open(tbl) as f:
                next(f)
                for line in f:
                    c = line.split()
                    if c[3] == "0A" and c[9] in inodes:
                        ports.add(int(c[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return ports


def mapped_libssl(pid):
    """mapped_libssl(pid): the paths of every libssl.so* in /proc/PID/maps (a
    deleted file keeps its " (deleted)" suffix)."""
    paths = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)
            if len(parts) == 6:
                path = parts[5]
                if os.path.basename(path.replace(" (deleted)", "")).startswith("libssl.so"):
                    paths.add(path)
    return paths


def check_maps(pr, lib, fork_real, system_real):
    """check_maps(pr, lib, fork_real, system_real): from /proc/PID/maps, while
    pr is alive, pr maps exactly fork_real (lib "fork") or system_real (any
    other lib) and never the other one; a Failure otherwise."""
    if not pr.alive():
        raise Failure("process", "%s exited before its maps could be read\n%s" % (pr.name, pr.tails()))
    try:
        paths = mapped_libssl(pr.pid)
    except OSError as e:
        raise Failure("process", "cannot read /proc/%d/maps of %s: %s" % (pr.pid, pr.name, e))
    if not pr.alive():  # the pid must still be ours when we read it
        raise Failure("process", "%s exited while its maps were read" % pr.name)
    real = {os.path.realpath(p) if not p.endswith(" (deleted)") else p for p in paths}
    want, other = (fork_real, system_real) if lib == "fork" else (system_real, fork_real)
    desc = "%s (pid %d, expected %s): libssl mapped = %s" % (pr.name, pr.pid, lib, sorted(paths))
    if real != {want} or other in real:
        raise Failure("maps", "%s; want exactly %s and never %s" % (desc, want, other))
    log("maps OK: " + desc)


def run_driver(body, work_prefix, deadline, expect_fail, keep_var=None):
    """run_driver(body, work_prefix, deadline, expect_fail, keep_var): call
    body(work) with a new temporary directory work; SIGALRM after deadline
    seconds (None: no deadline) is a timeout Failure; SIGTERM/SIGINT kill every
    Proc and exit. Afterwards every Proc is killed and work removed (kept when
    the environment variable keep_var is set). Returns the exit status: 0 for
    a pass, or with expect_fail for a Failure of exactly that category."""
    def on_alarm(signum, frame):
        raise Failure("timeout", "whole run exceeded its %g s deadline" % deadline)

    def on_term(signum, frame):
        kill_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if deadline is not None:
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, deadline)
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix=work_prefix)
    failure = None
    try:
        body(work)
    except Failure as f:
        failure = f
    except Exception as e:  # a bug or an unexpected error is a failure too
        failure = Failure("process", "%s: %s" % (type(e).__name__, e))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        kill_all()
        if keep_var and os.environ.get(keep_var):
            log("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    dt = time.monotonic() - t0
    if expect_fail:
        if failure is not None and failure.category == expect_fail:
            log("EXPECTED FAILURE observed (%.2f s): %s" % (dt, failure))
            log("PASS (negative self-test: the %s check fails when broken)" % expect_fail)
            return 0
        log("negative self-test did NOT fail in category %r as it must; got: %s"
            % (expect_fail, failure if failure else "success"))
        return 1
    if failure is not None:
        log("FAIL (%.2f s): %s" % (dt, failure))
        return 1
    log("PASS (%.2f s)" % dt)
    return 0

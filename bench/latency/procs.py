"""The child processes of a benchmark driver (bench/latency/run.py,
bench/tunnel/run.py): started through spawn() so that a failed run can stop
every one still alive (stop_all) instead of leaving servers in a namespace.
Thread-safe: the latency driver starts modes from several threads. Also the
check both drivers make before starting any: need_root().
"""
import os
import signal
import sys
import subprocess
import threading

_live = []
_lock = threading.Lock()


def spawn(cmd, **kw):
    """subprocess.Popen(cmd, **kw), remembered until stop() or forget()."""
    p = subprocess.Popen(cmd, **kw)
    with _lock:
        _live.append(p)
    return p


def forget(p):
    """Stops remembering |p| (it has been waited for)."""
    with _lock:
        if p in _live:
            _live.remove(p)


def stop(p, sig=signal.SIGTERM, wait=5):
    """Sends |sig| to |p| if it still runs, kills it after |wait| seconds,
    and forgets it."""
    if p.poll() is None:
        try:
            p.send_signal(sig)
            p.wait(wait)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    forget(p)


def stop_all(sig=signal.SIGKILL, wait=2):
    """Stops every process spawn() started that is still remembered."""
    with _lock:
        procs = list(_live)
    for p in procs:
        stop(p, sig, wait)


def need_root(name, why, smoke):
    """None when running as root. Otherwise the driver |name| cannot run
    (|why| says what needs root): a smoke test (|smoke|) is skipped, 77
    returned for ctest, after a SKIP line on stderr; a real run stops with
    SystemExit."""
    if os.geteuid() == 0:
        return None
    if smoke:
        sys.stderr.write("%s: SKIP: needs root (%s)\n" % (name, why))
        return 77
    raise SystemExit("%s: needs root (%s)" % (name, why))

"""The child processes of a benchmark driver (bench/latency/run.py,
bench/tunnel/run.py): started through spawn() so that a failed run can stop
every one still alive (stop_all) instead of leaving servers in a namespace.
Thread-safe: the latency driver starts modes from several threads.
"""
import signal
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

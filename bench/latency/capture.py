"""capture: waiting for a tcpdump started by a benchmark (bench/latency,
bench/streams) to have its capture open, so that no early packet is missed."""
import threading
import time


def wait_listening(p, timeout=10):
    """wait_listening reads the stderr (text) of the tcpdump process |p| until
    it says "listening on" (the capture is open) and returns True, then keeps
    draining stderr in the background so that tcpdump never blocks on it.
    Returns False if tcpdump exits or |timeout| seconds pass first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = p.stderr.readline()
        if "listening on" in line:
            threading.Thread(target=p.stderr.read, daemon=True).start()
            return True
        if not line and p.poll() is not None:
            break
    return False

"""The unrelated bulk TCP flow that bench/scale measures beside the tap
(run.py: beside the scale server's idle connections; ring_timer.py: beside
a bare packet socket): one MB-MiB transfer over 127.0.0.1, both ends child
processes, costed by their user + sys CPU."""
import os
import resource
import subprocess
import sys
import tempfile
import time

SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").close()
c, _ = s.accept(); n = 0
buf = bytearray(1 << 20)  # one buffer: no allocation per receive
while True:
    k = c.recv_into(buf)
    if not k: break
    n += k
print(n)
"""

SEND = r"""
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
buf = b"x" * (1 << 20)
for _ in range(int(sys.argv[2])): c.sendall(buf)
c.close()
"""


def children_cpu_ms():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000.0


def cpu_ms(mb, port, wrap=(), python=sys.executable):
    """CPU (ms, user + sys of both ends) and wall time (s) of an |mb|-MiB
    transfer to 127.0.0.1:|port|; each end runs as wrap + [python, ...]
    (wrap: for example a command that enters a network namespace). Raises
    RuntimeError if the sink did not get every byte."""
    with tempfile.TemporaryDirectory(prefix="bulkflow.") as work:
        ready = os.path.join(work, "ready")
        os.chmod(work, 0o777)  # the sink may run as another user
        before = children_cpu_ms()
        sink = subprocess.Popen(list(wrap) + [python, "-c", SINK, str(port), ready],
                                stdout=subprocess.PIPE, text=True)
        for _ in range(500):
            if os.path.exists(ready) or sink.poll() is not None:
                break
            time.sleep(0.02)
        t0 = time.monotonic()
        subprocess.run(list(wrap) + [python, "-c", SEND, str(port), str(mb)], check=True)
        out, _ = sink.communicate(timeout=300)
        wall = time.monotonic() - t0
    got = int(out.strip() or 0)
    if got != mb << 20:
        raise RuntimeError("bulk flow: %d of %d bytes" % (got, mb << 20))
    return children_cpu_ms() - before, wall

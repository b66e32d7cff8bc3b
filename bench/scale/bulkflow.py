"""The unrelated bulk TCP flow that bench/scale measures beside the tap
(run.py: beside the scale server's idle connections; ring_timer.py: beside
a bare packet socket): one MB-MiB transfer over 127.0.0.1 by the bulkflow
program (bench/scale/bulkflow.c: both ends in one process), costed by its
user + sys CPU."""
import os
import subprocess


def default_bin(build):
    """Where the build directory |build| has the bulkflow program."""
    return os.path.join(build, "bench", "scale", "bulkflow")


def cpu_ms(mb, port, binary, wrap=()):
    """CPU (ms, user + sys of both ends) and wall time (s) of an |mb|-MiB
    transfer to 127.0.0.1:|port| by the program |binary|, run as wrap +
    [binary, ...] (wrap: for example a command that enters a network
    namespace). Raises RuntimeError if it failed (the sink did not get
    every byte, or a socket call failed)."""
    r = subprocess.run(list(wrap) + [binary, str(port), str(mb)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("bulk flow: %s (exit %d)" % (r.stderr.strip(), r.returncode))
    cpu, wall = r.stdout.split()
    return float(cpu), float(wall)


def pair(i, mb, port, binary, wrap_of):
    """One pair: the flow in the receiver's namespace and in the sender's
    (the control), back to back, the receiver first when |i| is even.
    wrap_of(where) gives the command that enters namespace |where|. Returns
    {"receiver": cpu_ms, "sender": cpu_ms}."""
    got = {}
    for where in (("receiver", "sender") if i % 2 == 0 else ("sender", "receiver")):
        got[where] = cpu_ms(mb, port, binary, wrap=wrap_of(where))[0]
    return got

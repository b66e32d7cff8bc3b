"""The unrelated bulk TCP flow that bench/scale measures beside the tap
(run.py: beside the scale server's idle connections; ring_timer.py: beside
a bare packet socket): one MB-MiB transfer over 127.0.0.1 by the bulkflow
program (bench/scale/bulkflow.c: both ends in one process), costed by its
user + sys CPU."""
import os
import subprocess
import sys
import tempfile


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


def skb_frees_per_packet(mb, port, binary, wrap=()):
    """The kernel's socket-buffer frees (tracepoint skb:consume_skb) per
    packet sent (net:net_dev_queue), machine-wide, over one |mb|-MiB flow run
    as cpu_ms runs it, counted by perf stat (root). A packet socket that
    sees what the host sends gets a clone of each sent packet, freed after
    its filter: one more free per packet. Counts, not time: the machine's
    speed does not move it. Returns None without perf."""
    cmd = ["perf", "stat", "-x,", "-e", "skb:consume_skb,net:net_dev_queue", "-a", "--"]
    try:
        r = subprocess.run(cmd + list(wrap) + [binary, str(port), str(mb)], capture_output=True,
                           text=True)
    except FileNotFoundError:
        return None
    counts = {}
    for line in r.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].isdigit():
            counts[f[2]] = int(f[0])
    if r.returncode != 0 or not counts.get("net:net_dev_queue"):
        return None
    return counts.get("skb:consume_skb", 0) / counts["net:net_dev_queue"]


# Where the kernel runs an AF_PACKET socket's work on a packet: on receipt
# (tpacket_rcv with a ring, packet_rcv without; the filter runs inside) and
# on sending (dev_queue_xmit_nit, called for every packet sent while any
# socket is bound to every protocol, then cloning it for those that want
# it). A sample whose call chain holds one of them is the tap's.
PACKET_SOCKET_ENTRIES = ("tpacket_rcv", "packet_rcv", "packet_rcv_spkt", "dev_queue_xmit_nit")


def tap_samples(mb, port, binary, wrap=(), freq=3999):
    """Attribution, not timing: perf record -a -g (cpu-clock, |freq| Hz) over
    one flow run as cpu_ms runs it. Returns (samples, tap): the samples of
    the flow's process and of ksoftirqd (which takes over the flow's
    softirq work when it runs long), and those of them whose call chain
    holds a PACKET_SOCKET_ENTRIES function. Both halves of a ratio come
    from the same seconds, so the machine's speed, which moves a flow's
    CPU by 25% from one run to the next on some days, cancels. What it
    misses: the walk over the packet-type lists in the receive and send
    paths, inlined in their callers, and any cache cost. Returns None
    without perf, or if perf record failed (said on stderr)."""
    data = tempfile.NamedTemporaryFile(prefix="bulkflow-perf.", suffix=".data", delete=False)
    data.close()
    try:
        try:
            r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-a",
                                "-g", "-o", data.name, "--"] + list(wrap)
                               + [binary, str(port), str(mb)], capture_output=True, text=True)
        except FileNotFoundError:
            return None
        if r.returncode != 0:
            # perf itself may be refused (no perf events in a container):
            # no attribution then, which the caller reports as n/a.
            print("bulkflow: perf record failed (exit %d): %s"
                  % (r.returncode, r.stderr.strip()[-300:]), file=sys.stderr)
            return None
        out = subprocess.run(["perf", "script", "-i", data.name, "-F", "comm,ip,sym"],
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(data.name)
    samples = tap = 0
    for block in out.split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        comm = lines[0].strip()
        if comm != os.path.basename(binary)[:15] and not comm.startswith("ksoftirqd/"):
            continue
        samples += 1
        chain = {f.split(None, 1)[1].split("+")[0] for f in lines[1:] if len(f.split(None, 1)) > 1}
        if chain.intersection(PACKET_SOCKET_ENTRIES):
            tap += 1
    return samples, tap


def tap_samples_total(runs, mb, ports, binary, wrap=()):
    """tap_samples over |runs| flows (the i-th on port ports + i), summed:
    [samples, tap], or None if any gave none (no perf)."""
    total = [0, 0]
    for i in range(runs):
        one = tap_samples(mb, ports + i, binary, wrap)
        if one is None:
            return None
        total = [total[0] + one[0], total[1] + one[1]]
    return total


def concurrent_pair(i, mb, port, binary, wrap_of, cpu):
    """One pair run at the same time on one CPU: the flow in the receiver's
    namespace and in the sender's (the control), both pinned to CPU |cpu|
    (taskset), started together (the receiver's first when |i| is even).
    The two share the core's time slice by slice, so both see the same
    speed of the core, which on this bench's VMs moves by up to 40% within
    half a second (a fixed loop timed on each core at once) and makes
    flows timed one after the other differ by 30% (standard deviation of a
    pair's log ratio; 0.04 for two flows in one namespace run like this).
    Returns {"receiver": cpu_ms, "sender": cpu_ms}."""
    procs = {}
    for where in (("receiver", "sender") if i % 2 == 0 else ("sender", "receiver")):
        procs[where] = subprocess.Popen(["taskset", "-c", str(cpu)] + list(wrap_of(where))
                                        + [binary, str(port), str(mb)], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
    got = {}
    for where, p in procs.items():
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError("bulk flow (%s): %s (exit %d)" % (where, err.strip(), p.returncode))
        got[where] = float(out.split()[0])
    return got


def pair(i, mb, port, binary, wrap_of):
    """One pair: the flow in the receiver's namespace and in the sender's
    (the control), back to back, the receiver first when |i| is even.
    wrap_of(where) gives the command that enters namespace |where|. Returns
    {"receiver": cpu_ms, "sender": cpu_ms}."""
    got = {}
    for where in (("receiver", "sender") if i % 2 == 0 else ("sender", "receiver")):
        got[where] = cpu_ms(mb, port, binary, wrap=wrap_of(where))[0]
    return got

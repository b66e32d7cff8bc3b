"""tcpdump_capture.py: a tcpdump capture that is known to be listening before
the traffic starts and is stopped so that it loses no packet, and the check
of what a capture test needs before it starts (missing_prerequisite).

Shared by tests/wireshark/wire_tests.py, tests/wireshark/ucobs_session.py,
tests/wireshark/demo_capture.py and tests/ern-interop/ern_interop.py.
Standard library only.
"""
import os
import shutil
import signal
import subprocess
import time

# How long tcpdump may take to say "listening on" before the start fails.
START_TIMEOUT_S = 10
# How long a stopped tcpdump may take to write its file and exit.
STOP_TIMEOUT_S = 10


def missing_prerequisite(tools, need_root=None):
    """Why a capture test cannot run here (its caller then exits SKIP), or
    None: the first of |tools| that is not on PATH, else, when |need_root|
    (what needs root, as a sentence) is given and we are not root, that."""
    for tool in tools:
        if shutil.which(tool) is None:
            return "%s not installed (tools/install-deps.sh)" % tool
    if need_root is not None and os.geteuid() != 0:
        return need_root
    return None


class TcpdumpCapture:
    """TcpdumpCapture(argv, path, errpath, fail, **popen_kw): runs argv (a
    tcpdump command writing to path, with --immediate-mode -U), its stderr in
    errpath, and returns once it listens; otherwise stops it and raises
    fail(message). popen_kw go to subprocess.Popen."""

    def __init__(self, argv, path, errpath, fail, **popen_kw):
        self.path = path
        self.errpath = errpath
        self.err = open(errpath, "w+")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err, **popen_kw)
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end:
            self.err.seek(0)
            if "listening on" in self.err.read():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        with open(errpath) as f:
            raise fail("tcpdump did not start: %s" % f.read())

    def stop(self):
        """Lets the last packets reach the ring, then SIGINT (tcpdump writes
        what it holds); a tcpdump that does not exit is killed."""
        if self.proc.poll() is None:
            time.sleep(0.3)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()

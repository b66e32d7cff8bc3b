"""smoke_log: the receiver-log checks the streaming examples' smoke tests
(utls-stream/smoke.sh, utls-substreams/smoke.sh) share."""
import json
import sys


def read_log(path, fork, lib):
    """read_log returns (start, end, items) of the receiver's JSON-lines log
    |path| after asserting that it is complete and that the receiver ran the
    fork from the directory |lib| without falling back (|fork| true) or the
    system libssl (|fork| false)."""
    lines = [json.loads(l) for l in open(path)]
    start, end, items = lines[0], lines[-1], lines[1:-1]
    assert start["event"] == "start" and end["event"] == "end", "log incomplete"
    if fork:
        assert start["fork"] == 1 and start["libssl"].startswith(lib), start["libssl"]
        assert end["utls"]["fallback"].startswith("none"), end["utls"]["fallback"]
    else:
        assert start["fork"] == 0 and not start["libssl"].startswith(lib), start["libssl"]
    return start, end, items


def read_run(argv=None):
    """read_run returns (mode, start, end, items) of the run smoke_check
    (smoke_lib.sh) passes in |argv| (default sys.argv: the log, the mode, the
    fork's directory and the mode that runs the fork), checked by
    read_log."""
    path, mode, lib, fork_mode = (argv or sys.argv)[1:5]
    start, end, items = read_log(path, mode == fork_mode, lib)
    return mode, start, end, items

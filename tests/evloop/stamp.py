#!/usr/bin/python3
"""stamp.py COUNT SIZE LOG: reads COUNT messages of SIZE bytes (utls-stream's
stream format) from stdin, a byte stream written one whole message at a time
by the program under test (socat), and logs when each arrived:
{"i": index, "send_ns": ..., "recv_ns": ...} per line (CLOCK_MONOTONIC)."""
import json
import struct
import sys
import time


def main():
    count, size, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    inp = sys.stdin.buffer.raw
    with open(path, "w") as log:
        for _ in range(count):
            buf = b""
            while len(buf) < size:
                part = inp.read(size - len(buf))
                if not part:
                    return 0
                buf += part
            now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            magic, idx, send_ns, length = struct.unpack_from("<IIQI", buf)
            ok = magic == 0x6d727473 and length == size and all(
                buf[j] == (idx * 131 + j * 7 + (j >> 8)) & 0xff for j in range(24, size))
            log.write(json.dumps({"i": idx, "send_ns": send_ns, "recv_ns": now,
                                  "ok": int(ok)}) + "\n")
            log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

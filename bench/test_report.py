#!/usr/bin/env python3
"""test_report.py: bench/report.py writes the table from the JSON it finds,
says which files were missing, and leaves the rest of the README alone."""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
report = os.path.join(here, "report.py")
with tempfile.TemporaryDirectory() as tmp:
    bench = os.path.join(tmp, "bench")
    os.mkdir(bench)
    with open(os.path.join(bench, "core.json"), "w") as fp:
        json.dump({"scan_gbps": 12.345, "probes_per_record": {"cbr": 1.0, "vbr": 1.25, "mixed": 1.5}}, fp)
    with open(os.path.join(bench, "cpu.json"), "w") as fp:
        json.dump({"inorder_ratio": 1.0123, "loss2_ratio": 0.9}, fp)
    readme = os.path.join(tmp, "README.md")
    with open(readme, "w") as fp:
        fp.write("before\n<!-- bench-report:begin -->\nstale | 9.99\n<!-- bench-report:end -->\nafter\n")
    subprocess.run([sys.executable, report, "--bench-dir", bench, "--readme", readme], check=True)
    text = open(readme).read()
    checks = {
        "value written": "| 12.35 |" in text,
        "three values joined": "1.000 / 1.250 / 1.500" in text,
        "ratio": "| 1.012 |" in text,
        "missing key shown as a dash": "`offmode_ratio`: fork, modes off, vs stock libssl | — |" in text,
        "missing file said": "`latency.json` | `delayed_gt_rtt`: TLS / uTLS / oracle | not in this run" in text,
        "stale row gone": "9.99" not in text,
        "text around kept": text.startswith("before\n") and text.endswith("after\n"),
    }
    up_to_date = subprocess.run([sys.executable, report, "--bench-dir", bench, "--readme", readme, "--check"])
    checks["--check passes right after writing"] = up_to_date.returncode == 0
    with open(os.path.join(bench, "cpu.json"), "w") as fp:
        json.dump({"inorder_ratio": 1.5}, fp)
    stale = subprocess.run([sys.executable, report, "--bench-dir", bench, "--readme", readme, "--check"])
    checks["--check fails when the JSON changed"] = stale.returncode == 1
failed = [k for k, ok in checks.items() if not ok]
for k, ok in checks.items():
    print("%s: %s" % ("ok" if ok else "FAIL", k))
sys.exit(1 if failed else 0)

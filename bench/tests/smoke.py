# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the benchmark smoke tests share."""

import os
import subprocess
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def report_text(tc, results):
    """bench/report.py over the directory results (SUITE-STAMP.json
    files); the test case tc checks that it succeeds. The report's
    text."""
    out = os.path.join(results, "RESULTS.md")
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "report.py"),
         "--results", results, "--output", out],
        capture_output=True, text=True, timeout=120)
    tc.assertEqual(proc.returncode, 0, proc.stderr)
    with open(out) as f:
        return f.read()

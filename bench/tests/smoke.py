# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the benchmark smoke tests share."""

import json
import os
import subprocess
import sys
import tempfile

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


def netlab_run(tc, build, name, args, timeout):
    """bench/netlab/netlab.py with args over a lab of its own
    (legba-lab-NAME-PID: other labs may run beside it) and the build
    directory build; the test case tc checks that it succeeds and that
    the lab's namespaces are gone after it. Its results' scenarios."""
    lab = f"legba-lab-{name}{os.getpid()}"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "netlab.json")
        proc = subprocess.run(
            [sys.executable, os.path.join(BENCH, "netlab", "netlab.py"),
             "--build", build, "--lab-name", lab, "--output", out] + args,
            capture_output=True, text=True, timeout=timeout)
        tc.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(out) as f:
            scenarios = json.load(f)["scenarios"]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True,
                           text=True, check=True).stdout
    tc.assertNotIn(lab, names)
    return scenarios

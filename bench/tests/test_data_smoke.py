#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The data suite (bench/suites.py data) run with a few messages of each
kind (no callgrind: the full run counts instructions), then its report
(bench/report.py): every run of every peer
succeeds and yields its figures, so the benchmark stays runnable. Says
nothing about the figures themselves (speed lives in the benchmark).

  test_data_smoke.py BUILD_DIR [--sanitized]

--sanitized: BUILD_DIR is an AddressSanitizer build, whose allocator
mallinfo2() does not see: no heap figures are asked for.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from smoke import report_text

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
BUILD = None
SANITIZED = False


class DataSmoke(unittest.TestCase):
    def test_suite_and_report(self):
        with tempfile.TemporaryDirectory(prefix="legba-data-smoke-") as tmp:
            out = os.path.join(tmp, "data-20000101T000000Z.json")
            proc = subprocess.run(
                [sys.executable, os.path.join(BENCH, "suites.py"), "data",
                 "--build", BUILD, "--smoke", "--output", out],
                capture_output=True, text=True, timeout=170)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(out) as f:
                res = json.load(f)
            errors = [f"{r['label']} {r['peer']}: {r['error']}"
                      for r in res["runs"] if "error" in r]
            self.assertEqual(errors, [])
            series = res["series"]
            for d, configs in (("send", ["floor", "json-glib", "legba"]),
                               ("recv", ["floor", "json-glib", "legba",
                                         "legba-burst", "json-glib-hop",
                                         "legba-sync"])):
                for size in ("short", "4k"):
                    got = series[f"cpu_ns_{d}_{size}"]
                    self.assertEqual(sorted(got), sorted(configs))
                    for values in got.values():
                        self.assertTrue(values)
                        self.assertTrue(all(v > 0 for v in values))
            for metric in ("bulk_mb_per_s", "bulk_cpu_s_per_mb"):
                self.assertEqual(sorted(series[metric]),
                                 ["legba", "webrtcbin"], metric)
            # the round trip also with the echo sent where it arrives
            for metric in ("rtt_p50_ms", "rtt_p99_ms"):
                self.assertEqual(sorted(series[metric]),
                                 ["legba", "legba-sync", "webrtcbin"], metric)
            # memory: also the one-channel pair beside the like-for-like one
            memory = ["rss_kib_per_pair"]
            if not SANITIZED:
                memory += ["heap_kib_per_pair",
                           "heap_kib_per_pair_after_first"]
            for metric in memory:
                self.assertEqual(sorted(series[metric]),
                                 ["legba", "webrtcbin", "webrtcbin-1dc"],
                                 metric)
            if not SANITIZED:
                # like for like: the session of Legba's pair takes more
                # heap than one channel alone
                heap = series["heap_kib_per_pair"]
                self.assertGreater(heap["webrtcbin"][0],
                                   heap["webrtcbin-1dc"][0])
            self.assertIsNotNone(res["load_start"])
            self.assertIsNotNone(res["load_end"])
            text = report_text(self, tmp)
            self.assertIn("## 2b. Data channels: the Legba data path", text)
            self.assertIn("CPU per message, receive, 4 KiB", text)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    if "--sanitized" in sys.argv:
        sys.argv.remove("--sanitized")
        SANITIZED = True
    unittest.main()

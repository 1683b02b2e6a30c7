#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network lab's suite (bench/netlab/netlab.py) briefly: one Legba
call through a 1 Mbit/s bottleneck for 10 s, the sender asking for
600 kbit/s. Frames cross the lab and are decoded on the receiver side,
the bottleneck and the delay line were sampled every second, and the
lab's namespaces are gone afterwards. Says nothing about the figures
beyond that (speed lives in the benchmark).

  test_netlab_smoke.py BUILD_DIR

Skipped (exit 77) when not root or without /dev/net/tun.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
    print("the network lab needs root and /dev/net/tun: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
NETLAB = os.path.join(HERE, "..", "netlab", "netlab.py")
BUILD = None


class NetlabSmoke(unittest.TestCase):
    def test_call_across_the_lab(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "netlab.json")
            # a lab name of its own: other labs may run beside it
            lab = f"legba-lab-smoke{os.getpid()}"
            proc = subprocess.run(
                [sys.executable, NETLAB, "--build", BUILD, "--smoke",
                 "--lab-name", lab, "--output", out], capture_output=True,
                text=True, timeout=55)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            with open(out) as f:
                res = json.load(f)
        names = subprocess.run(["ip", "netns", "list"], capture_output=True,
                               text=True, check=True).stdout
        self.assertNotIn(lab, names)
        [run] = res["scenarios"]
        self.assertEqual(run["scenario"], "1mbit")
        self.assertEqual(run["sender"], "legba")
        self.assertEqual(run["receiver"], "legba")
        self.assertEqual(run["bitrate_kbps"], 600)
        # frames came across and were decoded in the window
        self.assertIsNotNone(run["first_frame_s"])
        self.assertGreater(run["frames_in_window"], 0)
        self.assertGreater(run["received_kbps_median"], 0)
        # the sender's side and the bottleneck were sampled every second
        self.assertGreaterEqual(len(run["series"]), 10)
        self.assertTrue(all(s["rate_kbps"] == 1000 for s in run["series"]))
        self.assertTrue(any(s["rtp_pps"] for s in run["series"]))
        self.assertGreater(len(run["encoder"]), 0)


if __name__ == "__main__":
    BUILD = sys.argv.pop(1)
    unittest.main()

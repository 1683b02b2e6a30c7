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

import os
import sys
import unittest

if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
    print("the network lab needs root and /dev/net/tun: skipped")
    sys.exit(77)

from smoke import netlab_run

BUILD = None


class NetlabSmoke(unittest.TestCase):
    def test_call_across_the_lab(self):
        [run] = netlab_run(self, BUILD, "smoke", ["--smoke"], timeout=55)
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

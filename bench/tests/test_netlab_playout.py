#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A Legba receiver's jitter buffer on a lossy path with a round trip
(LegbaRoom:max-latency, docs/rooms.md "The jitter buffer on real
networks"): one Legba call through the lab's 1 Mbit/s link with 2%
random loss and 50 ms each way, the sender asking for 600 kbit/s, for
10 s. The receiver starts at 100 ms, which one retransmission over a
100 ms round trip cannot fit; its jitter buffers must grow past that and
stay within 400 ms, and frames must be decoded. With max-latency at
100 the latency must stay 100 (the same path, the same counts: what
grew it was the room, not GStreamer).

  test_netlab_playout.py BUILD_DIR

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


class NetlabPlayout(unittest.TestCase):
    def run_lab(self, max_latency):
        [run] = netlab_run(self, BUILD, "playout", [
            "--scenarios", "1mbit-loss2-delay50", "--senders", "legba:600",
            "--receiver", "legba", "--window", "10",
            "--receiver-max-latency", str(max_latency)], timeout=80)
        return run

    def test_grows_on_a_lossy_round_trip(self):
        run = self.run_lab(400)
        self.assertGreater(run["frames_in_window"], 0)
        self.assertIsNotNone(run["jitter_latency_ms_max"])
        self.assertGreater(run["jitter_latency_ms_max"], 100)
        self.assertLessEqual(run["jitter_latency_ms_max"], 400)

    def test_fixed_without_room_to_grow(self):
        run = self.run_lab(100)
        self.assertGreater(run["frames_in_window"], 0)
        # no change was seen (a jitter buffer's latency is set before
        # it is in the pipeline, where gst-launch-1.0 -v does not see it)
        self.assertIn(run["jitter_latency_ms_max"], (None, 100))


if __name__ == "__main__":
    BUILD = sys.argv.pop(1)
    unittest.main()

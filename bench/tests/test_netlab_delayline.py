#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network lab's delay line (bench/netlab/delayline.c) in the lab's
topology (bench/netlab/lab.sh): UDP round trips from the sender side to
the receiver side take at least the configured one-way delay twice (it
holds each direction) and not wildly more; jitter does not reorder
unless asked to; random loss drops about what
was asked, only from the sender side, and is counted; the lab's
namespaces are gone afterwards. A behaviour test: the upper bound is
generous (the machine is shared), never a speed target.

  test_netlab_delayline.py DELAYLINE

Skipped (exit 77) when not root or without /dev/net/tun.
"""

import json
import os
import statistics
import subprocess
import sys
import time
import unittest

if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
    print("the network lab needs root and /dev/net/tun: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.join(HERE, "..", "netlab", "lab.sh")
ECHO = os.path.join(HERE, "..", "netlab", "udpecho.py")
DELAYLINE = None
NAME = f"legba-lab-t{os.getpid()}"


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True,
                         text=True, check=True).stdout
    return [l.split()[0] for l in out.splitlines()
            if l.startswith(NAME + "-")]


class DelayLine(unittest.TestCase):
    def lab(self, *args):
        subprocess.run([LAB, "up", "--name", NAME, "--delayline", DELAYLINE]
                       + list(args), check=True, timeout=30)
        self.server = None
        self.addCleanup(self.down)
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", NAME + "-rcv", sys.executable, ECHO,
             "serve", "9000"], stdout=subprocess.PIPE, text=True)
        self.assertEqual(self.server.stdout.readline().strip(), "ready")

    def down(self):
        """The lab ends what runs in its namespaces (the echo server)."""
        subprocess.run([LAB, "down", "--name", NAME], check=True,
                       timeout=30)
        if self.server:
            self.server.wait(10)
            self.server.stdout.close()
        self.assertEqual(namespaces(), [])

    def probe(self, count):
        out = subprocess.run(
            ["ip", "netns", "exec", NAME + "-snd", sys.executable, ECHO,
             "probe", "10.201.2.2", "9000", str(count)],
            capture_output=True, text=True, check=True, timeout=60).stdout
        return json.loads(out)

    def counts(self):
        """The delay line's last per-second counts (it writes one line a
        second: wait for a line written after the probe)."""
        path = f"/run/{NAME}/delayline.jsonl"
        deadline = time.monotonic() + 10
        start = time.monotonic()
        while time.monotonic() < deadline:
            with open(path) as f:
                lines = f.read().splitlines()
            if lines and time.monotonic() - start > 1.2:
                return json.loads(lines[-1])
            time.sleep(0.1)
        self.fail("the delay line wrote no counts")

    def test_delay(self):
        self.lab("--delay", "100")
        res = self.probe(40)
        self.assertEqual(len(res["rtt_ms"]), 40)
        median = statistics.median(res["rtt_ms"])
        self.assertGreaterEqual(min(res["rtt_ms"]), 200)
        self.assertLess(median, 200 + 400)
        c = self.counts()
        self.assertEqual(c["ab"]["forwarded"], 40)
        self.assertEqual(c["ba"]["forwarded"], 40)
        self.assertEqual(c["ab"]["lost"], 0)

    def test_jitter_without_reordering(self):
        self.lab("--delay", "50", "--jitter", "40")
        res = self.probe(60)
        self.assertEqual(len(res["rtt_ms"]), 60)
        # each direction holds a packet 10 to 90 ms, 50 in the median:
        # the median of 60 round trips is 100 ms give or take 5 (one
        # standard deviation); under 70 is a chance of 10^-8
        self.assertGreaterEqual(min(res["rtt_ms"]), 20)
        self.assertGreaterEqual(statistics.median(res["rtt_ms"]), 70)
        self.assertLess(statistics.median(res["rtt_ms"]), 100 + 400)
        # the spread shows (the draws are uniform over 80 ms each way)
        self.assertGreater(max(res["rtt_ms"]) - min(res["rtt_ms"]), 20)
        # and nothing overtook what was sent before it
        self.assertEqual(res["order"], sorted(res["order"]))

    def test_reorder_when_asked(self):
        # 100 +- 100 ms each way, 50 ms apart: each pair of datagrams
        # swaps with a probability of about 0.28 a direction; none of 59
        # pairs swapping is a chance of 10^-8
        self.lab("--delay", "100", "--jitter", "100", "--reorder")
        res = self.probe(60)
        self.assertEqual(len(res["rtt_ms"]), 60)
        self.assertNotEqual(res["order"], sorted(res["order"]))

    def test_loss(self):
        self.lab("--loss", "50")
        res = self.probe(200)
        c = self.counts()
        self.assertEqual(c["ab"]["in"], 200)
        self.assertEqual(c["ab"]["lost"] + c["ab"]["forwarded"], 200)
        self.assertEqual(c["ab"]["forwarded"], len(res["rtt_ms"]))
        # binomial(200, 0.5): outside 50..150 once in 10^12
        self.assertGreater(c["ab"]["lost"], 50)
        self.assertLess(c["ab"]["lost"], 150)
        self.assertEqual(c["ba"]["lost"], 0)
        self.assertEqual(c["ba"]["forwarded"], c["ab"]["forwarded"])


if __name__ == "__main__":
    DELAYLINE = sys.argv.pop(1)
    unittest.main()

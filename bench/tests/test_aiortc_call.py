#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Smoke test of the video-call suite's aiortc peer
(bench/peers/aiortc-call.py): a short stamped call at 360p, read back by
legbastampcheck. Skipped (exit 77) where python3-aiortc is not
installed: bench/setup.sh installs the peers, not scripts/setup.sh."""

import json
import os
import subprocess
import sys
import unittest

try:
    import aiortc  # noqa: F401
except ImportError:
    print("python3-aiortc is not installed (bench/setup.sh): skipped")
    sys.exit(77)

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                    "peers", "aiortc-call.py")
FRAMES = 40


class AiortcCall(unittest.TestCase):
    def test_stamped_call(self):
        proc = subprocess.run(
            [sys.executable, PEER, "--frames", str(FRAMES), "--width", "640",
             "--height", "360"], capture_output=True, text=True, timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        self.assertEqual(len(lines), 1, proc.stdout)
        res = json.loads(lines[0])
        self.assertEqual(res["peer"], "aiortc")
        self.assertTrue(res["complete"])
        self.assertEqual(res["frames"], FRAMES)
        # every frame received was decoded and sent first, and stamped
        # before that
        self.assertGreaterEqual(res["frames_sent"], res["frames"])
        self.assertGreaterEqual(res["frames_stamped"], res["frames_sent"])
        # the checker looked at every frame: each one is a sample, a
        # duplicate or a failed stamp
        self.assertGreater(len(res["latency_ms"]), 0)
        self.assertLessEqual(len(res["latency_ms"]) + res["failed"],
                             res["frames"])
        self.assertTrue(all(v > 0 for v in res["latency_ms"]))
        self.assertGreater(res["cpu_ms_per_frame"], 0)
        self.assertGreater(res["bitrate_bps"], 0)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Smoke test of the video-call suite's Pion peer (`pion-peer call`, run
by bench/suites.py's pion_call): a short stamped call at 360p whose RTP
goes through two Pion PeerConnections between legba-bench's sending and
receiving lines. Says nothing about the figures (speed lives in the
benchmark). Skipped (exit 77) where Go or Debian's Pion sources are not
installed: bench/setup.sh installs the peers, not scripts/setup.sh.

  test_pion_call.py BUILD_DIR
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

if shutil.which("go") is None or not os.path.isdir(
        "/usr/share/gocode/src/github.com/pion/webrtc"):
    print("Go or golang-github-pion-webrtc.v3-dev is not installed "
          "(bench/setup.sh): skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import suites  # noqa: E402

BUILD = None
FRAMES = 40


class PionCall(unittest.TestCase):
    def test_stamped_call(self):
        pion = os.path.join(BUILD, "bench", "pion-peer")
        subprocess.run([os.path.join(os.path.dirname(HERE), "peers", "pion",
                                     "build.sh"), pion], check=True,
                       timeout=600)
        with tempfile.TemporaryDirectory(prefix="legba-pion-call-") as tmp:
            r = suites.Runner(argparse.Namespace(build=BUILD, workdir=tmp,
                                                 pion=pion))
            cmd = suites.pion_call_command(BUILD, FRAMES, 640, 360,
                                           extra=["--allow-debug"])
            res = suites.pion_call(r, cmd, "smoke")
        record = r.runs[-1]
        self.assertNotIn("error", record, record.get("error"))
        self.assertEqual(record["peer"], "pion")
        self.assertIsNotNone(res)
        # every stamped frame came through Pion and was decoded and read
        self.assertEqual(res["frames"], FRAMES)
        check = res["check"]
        self.assertEqual(check["failed"], 0)
        self.assertGreaterEqual(check["valid"], FRAMES)
        self.assertLessEqual(check["valid"], res["frames_out_total"])
        self.assertGreater(res["latency_ms"]["n"], 0)
        self.assertGreater(res["latency_ms"]["p50"], 0)
        # Pion forwarded what it took, and measured its own CPU doing so
        pion_res = res["pion"]
        self.assertGreater(pion_res["packets_in"], 0)
        self.assertGreater(pion_res["packets_out"], 0)
        self.assertLessEqual(pion_res["packets_out"], pion_res["packets_in"])
        self.assertGreater(pion_res["cpu_s"], 0)
        self.assertGreater(pion_res["seconds"], 0)

    def test_refuses_no_port(self):
        pion = os.path.join(BUILD, "bench", "pion-peer")
        subprocess.run([os.path.join(os.path.dirname(HERE), "peers", "pion",
                                     "build.sh"), pion], check=True,
                       timeout=600)
        proc = subprocess.run([pion, "call"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("give -out PORT", proc.stderr)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main()

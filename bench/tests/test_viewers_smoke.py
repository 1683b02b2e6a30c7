#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""`legba-peer viewers` (bench/peers/legba-peer.c), as
bench/sfu/sfu-vs-mesh.py --viewer-host shared drives it, briefly: a Janus
of the test's own (tests/common/start-janus.sh), a legba-server with
--topology sfu coordinating it, one legba-call publisher (test video and
audio) and three viewers in one legba-peer process. Each viewer joins,
is connected and receives the publisher's video and audio, and the
process's pipeline bus holds no message (each is dropped where it is
posted). The publisher and the viewers are driven through the
benchmark's own classes (sfu-vs-mesh.py's Call and ViewerHost), so they
stay runnable too. Skipped (77) when Janus is not installed.

  test_viewers_smoke.py BUILD_DIR
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import suites  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "sfu_vs_mesh", os.path.join(BENCH, "sfu", "sfu-vs-mesh.py"))
sfu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sfu)

BUILD = None
VIEWERS = 3


class ViewersSmoke(unittest.TestCase):
    def test_three_viewers_receive(self):
        with tempfile.TemporaryDirectory(prefix="legba-viewers-smoke-") \
                as tmp:
            janus = sfu.start_janus(tmp, 100)
            server = pub = host = None
            try:
                server = suites.LegbaServerProcess(BUILD, tmp, [
                    "--janus-url", janus["JANUS_HTTP_URL"],
                    "--janus-ws-url", janus["JANUS_WS_URL"],
                    "--janus-admin-key", janus["JANUS_ADMIN_KEY"],
                    "--topology", "sfu"])
                pub = sfu.Call(BUILD, server.url, "smoke", "pub", True, tmp,
                               VIEWERS + 1)
                self.assertTrue(sfu.wait_for(
                    lambda: pub.joined() or pub.proc.poll() is not None,
                    30) and pub.proc.poll() is None,
                    "the publisher did not join:\n" + pub.stderr())
                host = sfu.ViewerHost(BUILD, server.url, "smoke", VIEWERS,
                                      VIEWERS, VIEWERS + 1, tmp)
                self.assertTrue(host.wait_started(60),
                                "the viewers did not start")
                self.assertEqual([b["joined"] for b in host.batches],
                                 [VIEWERS])
                # each receives both kinds: asked again until then
                deadline = time.monotonic() + 30
                while True:
                    report = host.report()
                    self.assertIsNotNone(report, "no report")
                    viewers = report["viewers"]
                    if all(v["video_buffers"] > 0 and v["audio_buffers"] > 0
                           for v in viewers) \
                            or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                self.assertEqual([v["identity"] for v in viewers],
                                 [f"r{i}" for i in range(1, VIEWERS + 1)])
                for v in viewers:
                    self.assertEqual(v["state"], "connected", v)
                    self.assertGreaterEqual(v["joined_ms"], 0, v)
                    self.assertGreater(v["video_buffers"], 0, v)
                    self.assertGreater(v["audio_buffers"], 0, v)
                    self.assertGreaterEqual(v["first_video_ms"], 0, v)
                self.assertIs(report["bus_pending"], False)
                # end of input leaves the rooms and ends the process
                reports, _ = host.stop()
                self.assertEqual(host.proc.returncode, 0,
                                 "\n".join(host.stderr_tail))
                self.assertEqual([r["exit"] for r in reports],
                                 [0] * VIEWERS)
                host = None
            finally:
                if host is not None:
                    host.proc.kill()
                    host.proc.wait()
                if pub is not None:
                    pub.stop()
                if server is not None:
                    server.stop()
                subprocess.run([os.path.join(ROOT, "tests", "common",
                                             "start-janus.sh"), "--stop",
                                os.path.join(tmp, "janus")])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_viewers_smoke.py BUILD_DIR")
    BUILD = os.path.abspath(sys.argv.pop(1))
    if shutil.which("janus") is None:
        print("janus is not installed: skipped")
        sys.exit(77)
    unittest.main()

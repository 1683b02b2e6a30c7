#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Smoke test of the mesh suite's aiortc peer (bench/peers/aiortc-mesh.py):
a 4-way mesh of four aiortc processes driven by the suite's own mesh run
(bench/suites.py), with a window of a few seconds; each decodes the three
others. Says nothing about the figures (speed lives in the benchmark).
Skipped (exit 77) where python3-aiortc is not installed: bench/setup.sh
installs the peers, not scripts/setup.sh.

  test_aiortc_mesh.py BUILD_DIR
"""

import argparse
import os
import sys
import tempfile
import unittest

try:
    import aiortc  # noqa: F401
except ImportError:
    print("python3-aiortc is not installed (bench/setup.sh): skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import suites  # noqa: E402
from test_mesh_smoke import check_mesh_run  # noqa: E402

BUILD = None


class AiortcMesh(unittest.TestCase):
    def test_mesh(self):
        with tempfile.TemporaryDirectory(prefix="legba-aiortc-mesh-") as tmp:
            r = suites.Runner(argparse.Namespace(build=BUILD, workdir=tmp))
            run = suites.mesh_run(r, "aiortc", 4, 3, 1, "smoke")
        self.assertNotIn("error", run, run.get("error"))
        # six pairs, the lower id offering: one offer and one answer each,
        # the candidates inside them
        self.assertEqual(run["relayed"]["offer"], 6)
        self.assertEqual(run["relayed"]["answer"], 6)
        self.assertEqual(run["relayed"]["candidate"], 0)
        check_mesh_run(self, run)
        for p in run["result"]:
            self.assertGreater(p["frames_sent"], 0)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main()

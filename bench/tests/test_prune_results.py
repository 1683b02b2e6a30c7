#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of the rule that keeps bench/results/ bounded
(bench/prune-results.py, docs/benchmarks.md "Which results are kept"),
and the check that this tree holds nothing the rule drops."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(BENCH, "prune-results.py")
spec = importlib.util.spec_from_file_location("prune_results", SCRIPT)
prune = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prune)

A = "20000101T000000Z"
B = "20000102T000000Z"
C = "20000103T000000Z"


class Tree:
    """A source tree in a temporary folder: files by path, with text."""

    def __init__(self, files):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "bench", "results"))
        for path, text in files.items():
            self.write(path, text)

    def write(self, path, text=""):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def dropped(self):
        return prune.dropped(self.root)

    def run(self, *args):
        return subprocess.run([sys.executable, SCRIPT, "--root", self.root]
                              + list(args), capture_output=True, text=True)

    def close(self):
        self.tmp.cleanup()


def results(*names):
    return {f"bench/results/{n}": "{}" for n in names}


class Rule(unittest.TestCase):
    def tree(self, files):
        t = Tree(files)
        self.addCleanup(t.close)
        return t

    def test_newest_run_of_each_suite_kept(self):
        # mesh and mesh-loss are two suites; a server run is its .json
        # and its .svg; a suite's name may hold dashes
        t = self.tree(results(
            f"mesh-{A}.json", f"mesh-{B}.json", f"mesh-loss-{A}.json",
            f"server-{A}.json", f"server-{A}.svg", f"server-{B}.json",
            f"server-{B}.svg", f"tune-vp8enc-{A}.json",
            f"tune-vp8enc-{C}.json"))
        self.assertEqual(t.dropped(), [
            f"mesh-{A}.json", f"server-{A}.json", f"server-{A}.svg",
            f"tune-vp8enc-{A}.json"])

    def test_named_by_a_doc_kept(self):
        files = results(f"setup-{A}.json", f"setup-{B}.json",
                        f"setup-{C}.json", f"scale-{A}.json",
                        f"scale-{B}.json", "charts/setup-ratio.png",
                        "charts/old-ratio.png")
        files["docs/benchmarks.md"] = (
            f"Raw series: [`setup-{A}.json`](../bench/results/"
            f"setup-{A}.json).\n")
        files["bench/RESULTS.md"] = (
            "![setup](results/charts/setup-ratio.png)\n")
        files["bench/suites.py"] = f"# as in scale-{A}.json.\n"
        t = self.tree(files)
        self.assertEqual(t.dropped(), ["charts/old-ratio.png",
                                       f"setup-{B}.json"])

    def test_a_longer_name_does_not_cite_a_shorter(self):
        files = results(f"loss-{A}.json", f"loss-{B}.json",
                        f"mesh-loss-{A}.json", f"mesh-loss-{B}.json")
        files["tools/notes.txt"] = f"`mesh-loss-{A}.json` and `loss-{A}.jsonx`\n"
        t = self.tree(files)
        self.assertEqual(t.dropped(), [f"loss-{A}.json"])

    def test_pattern_with_a_stamp_names_a_run(self):
        files = results(f"setup-{A}.json", f"mesh-{A}.json",
                        f"mesh-{A}.svg", f"setup-{C}.json",
                        f"mesh-{C}.json", f"setup-{B}.json",
                        f"mesh-{B}.json")
        # *.json and SUITE-*.json name no run; *-STAMP.json names one
        files["tools/notes.txt"] = (f"`bench/results/*-{A}.json`, "
                              "`bench/results/SUITE-*.json`, `*.json`\n")
        t = self.tree(files)
        self.assertEqual(t.dropped(), [f"mesh-{A}.svg", f"mesh-{B}.json",
                                       f"setup-{B}.json"])

    def test_what_does_not_cite(self):
        # results citing each other, a build folder, node_modules, hidden
        # folders; bench/results/tmp/ is not looked at
        files = results(f"data-{A}.json", f"data-{B}.json",
                        f"tmp/data-quick-{A}.json", f"tmp/data-{A}.json")
        files[f"bench/results/data-{B}.json"] = f'{{"from": "data-{A}.json"}}'
        files["build-x/meson-private/x"] = ""
        files["build-x/RESULTS.md"] = f"data-{A}.json"
        files["bench/peers/soketi/node_modules/x.md"] = f"data-{A}.json"
        files[".git/x"] = f"data-{A}.json"
        t = self.tree(files)
        self.assertEqual(t.dropped(), [f"data-{A}.json"])

    def test_modes(self):
        t = self.tree(results(f"audio-{A}.json", f"audio-{B}.json"))
        listed = t.run()
        self.assertEqual(listed.returncode, 0)
        self.assertEqual(listed.stdout, f"bench/results/audio-{A}.json\n")
        check = t.run("--check")
        self.assertEqual(check.returncode, 1)
        self.assertIn("prune-results.py --remove", check.stderr)
        removed = t.run("--remove")
        self.assertEqual(removed.returncode, 0, removed.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(
            t.root, "bench", "results"))), [f"audio-{B}.json"])
        self.assertEqual(t.run("--check").returncode, 0)


class ThisTree(unittest.TestCase):
    def test_holds_nothing_the_rule_drops(self):
        drop = prune.dropped(prune.ROOT)
        if drop:
            self.fail("bench/results/ holds files that are neither the "
                      "newest run of their suite nor named by a report or "
                      "doc (docs/benchmarks.md, \"Which results are "
                      "kept\"); bench/prune-results.py --remove drops "
                      "them:\n  " + "\n  ".join(drop))


if __name__ == "__main__":
    unittest.main()

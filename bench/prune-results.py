#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Lists, checks or removes the files of bench/results/ that the rule of
docs/benchmarks.md ("Which results are kept") drops. A file is kept when

  - it is the newest run of its suite: SUITE-STAMP.EXT (STAMP as
    20261202T120437Z) with the latest STAMP among the files of its SUITE,
    every EXT of that run (a server run's .json and .svg); the reports
    (bench/report.py, bench/analyze.py) read these; or
  - a file of the source tree outside bench/results/ names it: its file
    name in a report, a doc, a comment or a script (bench/RESULTS.md names
    its charts too), or a pattern with a * that matches it and names a
    STAMP, as `bench/results/*-20260101T000000Z.json` names every suite of
    one full run.

Everything else there is dropped: git history keeps it (docs/benchmarks.md
says how to find it). bench/results/tmp/, where quick runs write and which
is not committed, is left alone.

  /usr/bin/python3 bench/prune-results.py            list what is dropped
  /usr/bin/python3 bench/prune-results.py --check    fail if anything is
  /usr/bin/python3 bench/prune-results.py --remove   git rm it
"""

import argparse
import fnmatch
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STAMPED = re.compile(r"^(?P<suite>.+)-(?P<stamp>\d{8}T\d{6}Z)(?P<ext>\..+)$")
# a word that can be a file name or a pattern of file names: a citation
# of x-STAMP.json is not one of mesh-x-STAMP.json
WORD = re.compile(rb"[\w.*-]+")
HAS_STAMP = re.compile(r"\d{8}T\d{6}Z")


def result_files(results):
    """Paths relative to results of every file there but under tmp/."""
    found = []
    for top, dirs, files in os.walk(results):
        rel = os.path.relpath(top, results)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != "tmp"]
        dirs.sort()
        for f in sorted(files):
            found.append(os.path.normpath(os.path.join(rel, f)))
    return found


def is_build_dir(path):
    return (os.path.isdir(os.path.join(path, "meson-private"))
            or os.path.isdir(os.path.join(path, "meson-info")))


def citing_texts(root, results):
    """The bytes of every file of the source tree that can cite a result:
    all but bench/results/ itself, hidden folders (.git), meson build
    folders and node_modules."""
    results = os.path.realpath(results)
    for top, dirs, files in os.walk(root):
        keep = []
        for d in sorted(dirs):
            path = os.path.join(top, d)
            if (d.startswith(".") or d == "node_modules"
                    or os.path.realpath(path) == results
                    or is_build_dir(path)):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            path = os.path.join(top, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                yield fh.read()


def cited_names(texts, names):
    """The names (file names, no folder) that the texts cite, by name or
    by a pattern with a * and a stamp."""
    words, patterns = set(), set()
    for text in texts:
        for m in WORD.finditer(text):
            w = m.group(0).decode("utf-8", "replace").rstrip(".")
            if "*" in w:
                if HAS_STAMP.search(w):
                    patterns.add(w)
            else:
                words.add(w)
    cited = {n for n in names if n in words}
    for p in patterns:
        cited.update(n for n in names if fnmatch.fnmatchcase(n, p))
    return cited


def newest_runs(names):
    """The names that belong to the newest run of their suite."""
    latest = {}
    for n in names:
        m = STAMPED.match(n)
        if m and m["stamp"] > latest.get(m["suite"], ""):
            latest[m["suite"]] = m["stamp"]
    newest = set()
    for n in names:
        m = STAMPED.match(n)
        if m and latest[m["suite"]] == m["stamp"]:
            newest.add(n)
    return newest


def dropped(root):
    """The files of root/bench/results/ that the rule drops, relative to
    that folder, sorted."""
    results = os.path.join(root, "bench", "results")
    files = result_files(results)
    names = [os.path.basename(f) for f in files]
    keep = newest_runs(names) | cited_names(citing_texts(root, results),
                                             names)
    return sorted(f for f in files if os.path.basename(f) not in keep)


def remove(root, files):
    """git rm the tracked ones, delete the others."""
    results = os.path.join(root, "bench", "results")
    try:
        ls = subprocess.run(["git", "ls-files", "-z", "--"] + files,
                            cwd=results, capture_output=True)
    except FileNotFoundError:
        ls = None
    tracked = set()
    if ls is not None and ls.returncode == 0:
        tracked = set(ls.stdout.decode().split("\0")) - {""}
    if tracked:
        subprocess.run(["git", "rm", "--quiet", "--"] + sorted(tracked),
                       cwd=results, check=True)
    for f in files:
        if f not in tracked and os.path.exists(os.path.join(results, f)):
            os.unlink(os.path.join(results, f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT,
                    help="the source tree (default: this script's)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if bench/results/ holds a file to drop")
    mode.add_argument("--remove", action="store_true",
                      help="remove what the rule drops (git rm)")
    args = ap.parse_args()
    drop = dropped(args.root)
    for f in drop:
        print(f"bench/results/{f}")
    if args.remove and drop:
        remove(args.root, drop)
    if args.check and drop:
        print(f"prune-results: {len(drop)} file(s) of bench/results/ are "
              "neither the newest run of their suite nor named by a report "
              "or doc; remove them with bench/prune-results.py --remove "
              "(docs/benchmarks.md, \"Which results are kept\")",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

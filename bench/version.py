# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The version of Legba a benchmark measured, for its conditions."""

import subprocess

# What a benchmark run writes into the tree itself: its changes say
# nothing about the code that was measured.
OUTPUT = [":(top,exclude)bench/results", ":(top,exclude)bench/RESULTS.md",
          ":(top,exclude,glob)bench/*/RESULTS.md"]


def source_version(source):
    """The commit of the tree at source (git describe --always), with
    "-dirty" when a tracked file other than the benchmarks' own output
    differs from it; "" outside a git checkout."""
    def git(*args):
        proc = subprocess.run(["git", "-C", source, *args],
                              capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("describe", "--always")
    if not commit:
        return ""
    changed = git("status", "--porcelain", "--untracked-files=no", "--",
                  ":(top)", *OUTPUT)
    return commit + ("-dirty" if changed else "")

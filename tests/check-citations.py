#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every document the repository cites is in the repository.

Reads every tracked file (git ls-files; without git, every file under the
source root but build trees), but the raw records under bench/results/,
and fails, naming file and line, when one
- cites a design note that is not in the repository (the upper-case
  ROOM-PROTOCOL, WEBRTCBIN-1.22, BENCHMARKING, ARCHITECTURE or STYLE notes
  of the project's founding design; docs/ holds what they said);
- names a `docs/NAME.md` that does not exist;
- names a section that NAME.md does not have, in any form a citation
  takes: `docs/NAME.md#anchor` (the anchor of a heading, as GitHub makes
  it), `docs/NAME.md, "Heading"` (a heading's text, with or without its
  leading section number, or its part before a colon) or
  `docs/NAME.md §N` (a heading numbered N, as "## N. Title");
- in a Markdown file, links to a .md file or anchor that does not exist.

Usage: check-citations.py [SOURCE_ROOT]
"""

import os
import re
import subprocess
import sys

GONE = re.compile(r"\b(?:ROOM-PROTOCOL|WEBRTCBIN-1\.22|BENCHMARKING|"
                  r"ARCHITECTURE|STYLE)\.md\b")
# docs/NAME.md at the start of a path (also ../docs/NAME.md), then an
# optional #anchor, , "Heading" or §N.
DOCS_REF = re.compile(r"(?:^|(?<=[\s(\[`'\"/<]))docs/([\w.-]+\.md)"
                      r"(?:#([\w-]+)|,\s*\"([^\"]+)\"|\s+§(\d+))?")
MD_LINK = re.compile(r"\]\(([^)\s#]*\.md)?(?:#([\w-]+))?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")

# Images and binary records carry no citations. The raw series under
# bench/results/ are records of past runs, whose notes say what the code
# said then; the reports generated from the newest of them
# (bench/RESULTS.md and the suites' own) are read like every other file.
SKIP_EXT = (".png", ".jpg", ".svg", ".webm", ".bin", ".ivf", ".gz")
SKIP_DIRS = ("bench/results/",)


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"],
                             capture_output=True, check=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for top, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".")
                       and d != "node_modules"
                       and not os.path.exists(os.path.join(top, d,
                                                           "meson-private"))]
            files += [os.path.relpath(os.path.join(top, n), root)
                      for n in names]
        return files


def slug(text):
    """A heading's anchor as GitHub makes it."""
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Doc:
    def __init__(self, path):
        self.anchors = set()
        self.headings = set()
        self.numbers = set()
        seen = {}
        fenced = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else HEADING.match(line)
                if not m:
                    continue
                text = m.group(2)
                base = slug(text)
                n = seen.get(base, 0)
                seen[base] = n + 1
                self.anchors.add(base if n == 0 else f"{base}-{n}")
                plain = text.replace("`", "")
                number = re.match(r"^(\d+)\.\s", plain)
                if number:
                    self.numbers.add(number.group(1))
                for form in (plain, re.sub(r"^\d+(\.\d+)*\.?\s+", "", plain)):
                    self.headings.add(form)
                    self.headings.add(form.split(":")[0].strip())


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    me = os.path.relpath(os.path.abspath(__file__), root)
    docs = {}

    def doc(path):
        if path not in docs:
            full = os.path.join(root, path)
            docs[path] = Doc(full) if os.path.isfile(full) else None
        return docs[path]

    def check_target(where, path, anchor, heading, problems, number=None):
        d = doc(path)
        if d is None:
            problems.append(f"{where}: {path} does not exist")
        elif anchor and anchor not in d.anchors:
            problems.append(f"{where}: {path} has no heading with the "
                            f"anchor #{anchor}")
        elif heading and heading.replace("`", "") not in d.headings:
            problems.append(f"{where}: {path} has no heading \"{heading}\"")
        elif number and number not in d.numbers:
            problems.append(f"{where}: {path} has no section {number}")

    problems = []
    files = tracked_files(root)
    for rel in files:
        if rel == me or rel.endswith(SKIP_EXT) or rel.startswith(SKIP_DIRS):
            continue
        full = os.path.join(root, rel)
        try:
            with open(full, encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        markdown = rel.endswith(".md")
        fenced = False
        for no, line in enumerate(lines, 1):
            where = f"{rel}:{no}"
            for m in GONE.finditer(line):
                problems.append(f"{where}: cites {m.group(0)}, which is "
                                "not in the repository")
            for m in DOCS_REF.finditer(line):
                check_target(where, "docs/" + m.group(1), m.group(2),
                             m.group(3), problems, m.group(4))
            if not markdown:
                continue
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            for m in MD_LINK.finditer(line):
                target, anchor = m.group(1), m.group(2)
                if target and re.match(r"^[a-z]+:", target):
                    continue
                if target is None and anchor is None:
                    continue
                path = rel if not target else os.path.normpath(
                    os.path.join(os.path.dirname(rel), target))
                check_target(where, path, anchor, None, problems)

    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} citation(s) of documents or sections that "
              "are not in the repository")
        return 1
    print(f"{len(files)} files: every cited document and section exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Files and functions a reader can hold: no C file of the libraries
# (lib/) over 1,500 lines, and no function in lib/, plugins/ or tools/
# over 150 lines of code (blank lines and comments not counted).
#   check-sizes.py SOURCE_ROOT [--list]
# Prints each file or function over its bound and exits 1 if there is
# one; --list prints the largest functions too.
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 1500
MAX_FUNCTION_LINES = 150


def tracked(root, patterns):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '--'] + patterns,
                             check=True, capture_output=True, text=True)
        return [f for f in out.stdout.split('\n') if f]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for top in ('lib', 'plugins', 'tools'):
            for d, _, names in os.walk(os.path.join(root, top)):
                found += [os.path.relpath(os.path.join(d, n), root)
                          for n in names if n.endswith(('.c', '.h'))]
        return found


def code_lines(lines):
    """Lines with code, comments and blank lines left out."""
    n = 0
    in_comment = False
    for line in lines:
        text = line
        if in_comment:
            end = text.find('*/')
            if end < 0:
                continue
            text = text[end + 2:]
            in_comment = False
        text = re.sub(r'/\*.*?\*/', '', text)
        start = text.find('/*')
        if start >= 0:
            text = text[:start]
            in_comment = True
        text = re.sub(r'//.*', '', text)
        if text.strip():
            n += 1
    return n


def functions(lines):
    """(name, first line, code lines) of each function definition: GNU
    style, the name at the start of a line, the body's braces in column 0."""
    name = None
    start = None
    for i, line in enumerate(lines):
        m = re.match(r'^([A-Za-z_]\w*) \(', line)
        if m and start is None:
            name = m.group(1)
        elif line.startswith('{') and name is not None and start is None:
            start = i
        elif line.startswith('}') and start is not None:
            yield name, start + 1, code_lines(lines[start + 1:i])
            name = None
            start = None
        elif line and not line[0].isspace() and start is None and not m \
                and not line.startswith(('static', 'G_', '#', '/*', ' *')):
            if not re.match(r'^[A-Za-z_][\w\s\*]*$', line):
                name = None


def main():
    root = sys.argv[1]
    listing = '--list' in sys.argv
    over = []
    sizes = []
    for path in tracked(root, ['lib/*.c', 'plugins/*.c', 'tools/*.c']):
        with open(os.path.join(root, path), encoding='utf-8') as f:
            lines = f.read().split('\n')
        if path.startswith('lib/') and len(lines) - 1 > MAX_FILE_LINES:
            over.append('%s: %d lines (at most %d)' %
                        (path, len(lines) - 1, MAX_FILE_LINES))
        for name, first, n in functions(lines):
            sizes.append((n, '%s:%d %s()' % (path, first, name)))
            if n > MAX_FUNCTION_LINES:
                over.append('%s:%d: %s() has %d lines of code (at most %d)' %
                            (path, first, name, n, MAX_FUNCTION_LINES))
    if listing:
        for n, where in sorted(sizes, reverse=True)[:20]:
            print('%5d %s' % (n, where))
    for line in over:
        print(line)
    print('%d over the bounds' % len(over))
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main())

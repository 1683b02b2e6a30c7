#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The libraries' boundary: every function a public header declares is
# marked LEGBA_API and exported by its shared library, and the library
# exports nothing else.
#   check-exports.py LIBRARY HEADER...
import re
import subprocess
import sys

DECLARATION = re.compile(r'^(?!typedef|#|G_|struct|enum|union|\{|\}|LEGBA_API)'
                         r'[A-Za-z_][\w \*]*?[\s\*](legba_\w+) \(')
TYPE = re.compile(r'^G_DECLARE_\w+ \((\w+), (\w+),')


def declared(header):
    """(name, marked) for each function the header declares."""
    lines = open(header, encoding='utf-8').read().split('\n')
    in_comment = False
    for i, line in enumerate(lines):
        if in_comment:
            in_comment = '*/' not in line
            continue
        if line.lstrip().startswith('/*') and '*/' not in line:
            in_comment = True
            continue
        marked = i > 0 and lines[i - 1].strip() == 'LEGBA_API'
        m = DECLARATION.match(line)
        if m:
            yield m.group(1), marked
        m = TYPE.match(line)
        if m:
            yield m.group(2) + '_get_type', marked


def main():
    library, headers = sys.argv[1], sys.argv[2:]
    out = subprocess.run(['nm', '-D', '--defined-only', library], check=True,
                         capture_output=True, text=True).stdout
    exported = {f.split()[-1] for f in out.split('\n') if f.strip()}
    problems = []
    names = set()
    for header in headers:
        for name, marked in declared(header):
            names.add(name)
            if not marked:
                problems.append('%s: %s is not marked LEGBA_API' %
                                (header, name))
            if name not in exported:
                problems.append('%s: %s is not exported by %s' %
                                (header, name, library))
    for name in sorted(exported - names):
        if name.startswith(('legba_', 'Legba')):
            problems.append('%s exports %s, which no public header declares'
                            % (library, name))
    for p in problems:
        print(p)
    print('%d functions declared, %d problems' % (len(names), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())

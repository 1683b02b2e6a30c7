#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""legba-server's systemd unit: `systemd-analyze verify` accepts it and
`systemd-analyze security --offline=yes` rates its sandbox "OK" or better
(an exposure of at most 2.0 out of 10), printing the score.

Usage: check-unit.py SYSTEMD-ANALYZE UNIT LEGBA-SERVER

UNIT is the configured unit; its ExecStart= names the installed server,
which verify wants to exist, so a copy naming LEGBA-SERVER is checked.
Neither command needs systemd to run as PID 1."""

import os
import re
import subprocess
import sys
import tempfile

# Exposure levels are tenths here: "OK" is up to 2.0.
THRESHOLD = 20


def main():
    analyze, unit, server = sys.argv[1:4]
    with open(unit) as f:
        text = f.read()
    text, n = re.subn(r'^ExecStart=\S+', 'ExecStart=' + server, text,
                      flags=re.M)
    if n != 1:
        sys.exit(f'{unit}: expected one ExecStart=')
    for key in ('Type=notify', 'DynamicUser=yes', 'ProtectSystem=strict',
                'NoNewPrivileges=yes',
                'CapabilityBoundingSet=CAP_NET_BIND_SERVICE'):
        if not re.search('^' + re.escape(key) + '$', text, re.M):
            sys.exit(f'{unit}: no {key}')

    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'legba-server.service')
        with open(copy, 'w') as f:
            f.write(text)
        verify = subprocess.run([analyze, 'verify', copy],
                                capture_output=True, text=True, timeout=60)
        print(verify.stdout + verify.stderr, end='')
        if verify.returncode != 0 or verify.stderr.strip():
            sys.exit('systemd-analyze verify: the unit has problems')

        security = subprocess.run(
            [analyze, 'security', '--offline=yes', '--no-pager',
             f'--threshold={THRESHOLD}', copy],
            capture_output=True, text=True, timeout=60)
        print(security.stdout + security.stderr, end='')
        score = re.search(r'Overall exposure level for \S+: (\S+) (\S+)',
                          security.stdout)
        if score is None:
            sys.exit('systemd-analyze security: no overall exposure level')
        print(f'exposure: {score.group(1)} {score.group(2)}')
        if security.returncode != 0 or float(score.group(1)) > THRESHOLD / 10:
            sys.exit(f'exposure {score.group(1)} is over '
                     f'{THRESHOLD / 10} ("OK")')


if __name__ == '__main__':
    main()

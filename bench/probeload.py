# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs `legba-probe load --sync --json` for the server and cluster
benchmarks: at each sync point the probe prints a line and waits; the
caller's on_sync(line) does its measuring, then the probe goes on. The
probe's JSON result comes back as a dict, with its exit status (and the
end of its stderr, when it wrote any)."""

import json
import select
import subprocess
import time


class BenchError(Exception):
    pass


def run(argv, timeout, on_sync, preexec_fn=None):
    """argv: the whole legba-probe load command line."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=preexec_fn)
    deadline = time.monotonic() + timeout + 30
    result = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError("legba-probe load did not finish")
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            line = proc.stdout.readline()
            if not line:
                break
            line = line.strip()
            if line.startswith("{"):
                result = json.loads(line)
                continue
            on_sync(line)
            try:
                proc.stdin.write("\n")
                proc.stdin.flush()
            except BrokenPipeError:
                # It gave up (its own timeout) right after the line; its
                # result follows on stdout.
                pass
    finally:
        if proc.poll() is None:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    err = proc.stderr.read()
    if result is None:
        raise BenchError("legba-probe load printed no result: " + err)
    result["exit_status"] = proc.returncode
    if err.strip():
        result["stderr"] = err.strip()[-2000:]
    return result

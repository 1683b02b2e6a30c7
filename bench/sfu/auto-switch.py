#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The move of an `auto` room from mesh to SFU: the media gap per
participant.

    bench/sfu/auto-switch.py [--build DIR] [--runs 5] [--json FILE]

Runs test-room-sfu-auto's /room/sfu-auto/switch (through `meson test`, so
with the build's test environment) --runs times: a legba-server with
`sfu-topology` `auto:2` and a Janus of the test's own, two LegbaRoom
participants (160x120 15 fps H.264 test video, x264enc key frames on
request only, and Opus: the room tests'
participants) in a mesh; a third joins and the server moves the room to
Janus. For each of the first two, the longest time between two decoded
video frames of the other, from just before the third joins until all
three receive each other through Janus (the test's LEGBA_AUTO_GAP_JSON),
and whether every reliable message of theirs arrived (the test fails
otherwise). Writes bench/results/sfu-auto-STAMP.json by default. BUILD
must be a release build with the integration tests."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import suites  # noqa: E402


def build_type(build):
    out = subprocess.run(["meson", "introspect", "--buildoptions", build],
                         capture_output=True, text=True).stdout
    for opt in json.loads(out or "[]"):
        if opt["name"] == "buildtype":
            return opt["value"]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if build_type(args.build) != "release":
        ap.error(f"{args.build} is not a release build")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = args.json or os.path.join(BENCH, "results",
                                     f"sfu-auto-{stamp}.json")
    result = {"suite": "sfu-auto", "stamp": stamp,
              "command": " ".join(["bench/sfu/auto-switch.py"]
                                  + sys.argv[1:]),
              "conditions": suites.conditions(args.build),
              "load_start": suites.loadavg(),
              "busy_start": suites.busy_processes(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="legba-sfu-auto-") as workdir:
        for i in range(args.runs):
            gaps = os.path.join(workdir, f"gaps-{i}.json")
            env = dict(os.environ, LEGBA_AUTO_GAP_JSON=gaps)
            run = {"load_start": suites.loadavg()}
            proc = subprocess.run(
                ["meson", "test", "-C", args.build, "room-sfu-auto",
                 "--test-args", "-p /room/sfu-auto/switch"],
                env=env, capture_output=True, text=True)
            run["load_end"] = suites.loadavg()
            run["passed"] = proc.returncode == 0
            if os.path.exists(gaps):
                with open(gaps) as f:
                    run.update(json.loads(f.readline()))
            with open(os.path.join(args.build, "meson-logs",
                                   "testlog.txt"), errors="replace") as f:
                run["test_says"] = [
                    line.strip() for line in f
                    if "missed" in line or "moved to Janus" in line
                    or "ERROR:" in line][:6]
            if not run["passed"]:
                run["output_tail"] = proc.stdout.splitlines()[-10:]
            result["runs"].append(run)
            print(f"run {i}: {run.get('gaps_ms')} passed={run['passed']}")
    result["load_end"] = suites.loadavg()
    result["busy_end"] = suites.busy_processes()
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The media gap of an SFU room whose Janus dies mid-call: from the kill
(SIGKILL) of the Janus holding the room, or its stop (SIGSTOP: it hangs),
to the first video frame each participant decodes again from the other,
through the room the server made again on the other Janus; and of one
whose participant's own connection to a healthy Janus is cut (cut).

    bench/sfu/rejoin-gap.py [--build DIR] [--runs 5]
        [--cases dies,hangs,cut] [--json FILE]

Each run of a case is test-room-sfu's /room/sfu/janus-CASE from BUILD (a
release build), through `meson test`: two Janus 1.1 processes of their
own (tests/common/legba-test-janus.c, no API secret), a legba-server (in
the test's process) coordinating both ([sfu], topology sfu), two
LegbaRoom participants (160x120 15 fps H.264 with key frames on request,
and Opus) in one room; once they decode each other, the Janus holding
the room is killed (dies) or stopped (hangs), and the test prints, per
participant, the time from then to its first video frame decoded again
(`sfu-rejoin-gap-ms`, `sfu-hang-gap-ms`). The gap adds up: the server
noticing (its keepalive every second to each Janus: 0 to 1 s after a
kill, the 5 s request deadline more for a hang), making the room again
(a few HTTP requests), the participants joining it (a Janus session,
join, publish, subscribe, ICE and DTLS with the new Janus) and a key
frame. The case cut is /room/sfu/connection-cut: one Janus, reached
through a TCP relay in the test, which cuts alice's connection; the gap
(`sfu-reconnect-gap-ms`) runs from the cut to the first frame decoded
again, alice's session opened again on the same Janus (after 250 ms)
and her publisher and subscription made again. The cases take turns.
Writes bench/results/sfu-rejoin-STAMP.json by default."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import suites  # noqa: E402

GAP = re.compile(r"sfu-(?:rejoin|hang|reconnect)-gap-ms (\w+)=(\d+)")
# each case's test path
TESTS = {"dies": "/room/sfu/janus-dies", "hangs": "/room/sfu/janus-hangs",
         "cut": "/room/sfu/connection-cut"}


def janus_version():
    return suites.package_version("janus")


def run_once(build, case):
    rec = {"case": case, "load_start": suites.loadavg()}
    cmd = ["meson", "test", "-C", build, "--no-rebuild", "room-sfu",
           "--logbase", "rejoin-gap", "--test-args",
           f"-p {TESTS[case]}"]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    rec["seconds"] = round(time.monotonic() - started, 1)
    rec["exit"] = proc.returncode
    with open(os.path.join(build, "meson-logs", "rejoin-gap.txt")) as f:
        log = f.read()
    rec["gaps_ms"] = {m.group(1): int(m.group(2)) for m in GAP.finditer(log)}
    rec["load_end"] = suites.loadavg()
    if proc.returncode != 0:
        rec["tail"] = proc.stdout.splitlines()[-20:]
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", default="dies,hangs")
    ap.add_argument("--json")
    args = ap.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = args.json or os.path.join(BENCH, "results",
                                     f"sfu-rejoin-{stamp}.json")
    result = {"suite": "sfu-rejoin", "stamp": stamp,
              "command": " ".join(["bench/sfu/rejoin-gap.py"] + sys.argv[1:]),
              "conditions": suites.conditions(args.build),
              "janus": janus_version(), "load_start": suites.loadavg(),
              "busy_start": suites.busy_processes(), "runs": []}
    cases = args.cases.split(",")
    for i in range(args.runs):
        for case in cases:
            rec = run_once(args.build, case)
            result["runs"].append(rec)
            print(f"run {i + 1} {case}: exit {rec['exit']}, gaps "
                  f"{rec['gaps_ms']}, load {rec['load_start'][0]:g}",
                  flush=True)
    result["load_end"] = suites.loadavg()
    result["summary"] = {}
    for case in cases:
        gaps = [g for r in result["runs"] if r["exit"] == 0
                and r["case"] == case for g in r["gaps_ms"].values()]
        if gaps:
            result["summary"][case] = {
                "n": len(gaps), "min_ms": min(gaps),
                "median_ms": statistics.median(gaps), "max_ms": max(gaps)}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}: {result.get('summary')}")


if __name__ == "__main__":
    main()

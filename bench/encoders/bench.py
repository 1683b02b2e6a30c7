#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Video-send benchmark driver (suite 3 of docs/benchmarks.md).

For each size (360p, 720p, 1080p, 2160p) and round, runs every
configuration once, each in a fresh process (bench/encoders/worker.py),
alternating the order every round (A B C ... C B A), and writes the raw
series and the conditions as JSON. Configurations: legbavideoenc with each
software encoder installed here (x264enc, openh264enc, vp8enc), aiortc's
own VP8 and H.264 encoders on the same frames, and the two floors (source
only) that are subtracted to get the encoders' cost. Standard library
only; run it through bench/encoders/run.sh.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"360p": (640, 360), "720p": (1280, 720), "1080p": (1920, 1080),
         "2160p": (3840, 2160)}
LEGBA = ["x264enc", "openh264enc", "vp8enc"]
AIORTC = ["vp8", "h264"]


def configurations(with_aiortc, encoders=LEGBA):
    configs = [("legba", "none")] + [("legba", e) for e in encoders]
    if with_aiortc:
        configs += [("aiortc", "none")] + [("aiortc", e) for e in AIORTC]
    return configs


def run_one(peer, encoder, size, cap, args, env):
    width, height = SIZES[size]
    cmd = [sys.executable, os.path.join(HERE, "worker.py"), peer, encoder,
           "--width", str(width), "--height", str(height),
           "--frames", str(args.frames), "--warmup", str(args.warmup),
           "--cap", str(cap), "--timeout", str(args.run_timeout)]
    started = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          timeout=args.run_timeout + 30)
    record = {"peer": peer, "encoder": encoder, "size": size,
              "width": width, "height": height, "cap": cap,
              "started": started, "wall_s": time.time() - started}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        record["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    else:
        record.update(json.loads(lines[-1]))
    return record


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def busy_processes():
    out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"],
                         capture_output=True, text=True).stdout
    return [l.strip() for l in out.splitlines()[1:8]]


def package_version(name):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def conditions():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": {p: package_version(p) for p in [
            "libgstreamer1.0-0", "gstreamer1.0-plugins-ugly",
            "gstreamer1.0-plugins-good", "gstreamer1.0-plugins-bad",
            "libx264-164", "libvpx7", "libopenh264-7", "python3-aiortc",
            "python3-av"]},
        "shared_machine": True,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plugin-path", required=True)
    parser.add_argument("--buildtype", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--command", default="")
    parser.add_argument("--sizes", default="360p,720p,1080p,2160p")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--cap", type=int, default=1500000)
    parser.add_argument("--caps", help="comma-separated caps in bit/s "
                        "(the sweep); default: --cap")
    parser.add_argument("--caps-2160p", help="caps at 2160p, where the "
                        "sweep takes fewer (default: --caps)")
    parser.add_argument("--run-timeout", type=float, default=600)
    parser.add_argument("--no-aiortc", action="store_true")
    parser.add_argument("--carry", metavar="EARLIER.json",
                        help="copy the runs of the configurations this run "
                        "does not measure (other encoders, aiortc) and the "
                        "floors they were measured against from an earlier "
                        "results file, marked carried_from, so that the "
                        "report stays whole")
    parser.add_argument("--encoders", default=",".join(LEGBA),
                        help="comma-separated encoders legbavideoenc is "
                        "measured with (default: %(default)s)")
    args = parser.parse_args()
    if args.buildtype != "release":
        sys.exit(f"bench: a {args.buildtype} build; release builds only")

    env = dict(os.environ, GST_PLUGIN_PATH=args.plugin_path,
               GST_DEBUG="*:1")
    with_aiortc = not args.no_aiortc
    if with_aiortc:
        probe = subprocess.run([sys.executable, "-c", "import aiortc"],
                               capture_output=True)
        if probe.returncode != 0:
            sys.exit("bench: python3-aiortc is missing (bench/encoders/"
                     "run.sh installs it)")
    encoders = args.encoders.split(",")
    unknown = [e for e in encoders if e not in LEGBA]
    if unknown:
        sys.exit(f"bench: unknown encoder(s) {', '.join(unknown)}; "
                 f"one of {', '.join(LEGBA)}")
    configs = configurations(with_aiortc, encoders)
    result = {
        "suite": "encoders",
        "command": args.command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "buildtype": args.buildtype,
        "content": "videotestsrc pattern=smpte horizontal-speed=4, I420, "
                   "30 fps",
        "frames": args.frames, "warmup": args.warmup, "cap": args.cap,
        "rounds": args.rounds,
        "conditions": conditions(),
        "load_start": loadavg(), "busy_start": busy_processes(),
        "runs": [],
    }
    caps = [int(c) for c in (args.caps or str(args.cap)).split(",")]
    result["caps"] = caps
    for size in args.sizes.split(","):
        size_caps = caps
        if size == "2160p" and args.caps_2160p:
            size_caps = [int(c) for c in args.caps_2160p.split(",")]
        for rnd in range(args.rounds):
            order = configs if rnd % 2 == 0 else list(reversed(configs))
            for peer, encoder in order:
                # the floors (no encoder) do not depend on the cap
                for cap in ([size_caps[0]] if encoder == "none"
                            else size_caps):
                    record = run_one(peer, encoder, size, cap, args, env)
                    record["round"] = rnd
                    result["runs"].append(record)
                    status = record.get("error") or (
                        f"{record['cpu_s'] * 1000 / record['units']:.2f} "
                        f"ms/frame, {record['frames_out']}/"
                        f"{record['frames_in']} frames")
                    print(f"{size} {cap // 1000} kbit/s round {rnd} "
                          f"{peer}:{encoder}: {status}", flush=True)
    result["load_end"] = loadavg()
    result["busy_end"] = busy_processes()
    if args.carry:
        measured = set(configs)
        with open(args.carry) as f:
            earlier = json.load(f)
        name = os.path.basename(args.carry)
        for run in earlier["runs"]:
            # runs of the first recorded series carry the encoder as
            # current-encoder, None for the floor; every floor is carried
            # (analyze.py nets carried runs against carried floors)
            encoder = run.get("encoder") or "none"
            if encoder != "none" and (run["peer"], encoder) in measured:
                continue
            result["runs"].append(dict(run, carried_from=name))
        result["carried_from"] = name
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(f"bench: wrote {args.output}")


if __name__ == "__main__":
    main()

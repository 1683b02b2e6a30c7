#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A 3-party call with one participant behind a slow link, as root
(docs/congestion-control.md, "In a mesh: the weakest peer"): what the
shared encoder's one bitrate costs the participant on a good link.

  mesh3.py --build DIR --output FILE [--rate KBIT] [--window S]
           [--lab-name NAME]

In the network lab (bench/netlab/lab.sh, a bottleneck of --rate kbit/s,
500 by default, towards the receiver side), a Legba sender (legba-call
--video CLIP --bitrate 2000) in the sender namespace, one receiver
(legba-call, sending nothing) behind the bottleneck ("slow") and one in
the router namespace, whose path from the sender crosses no bottleneck
("fast"). Run twice: with congestion control (the encoder follows the
lowest estimate) and without (--no-congestion-control: 2 Mbit/s to
both). For each receiver, medians over the window of what its
legba-call --stats reports each second: the video received (kbit/s) and
decoded (fps), and the sender's estimate and video target for it.
10 s of warm-up, a 30 s window by default.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netlab  # noqa: E402

WARMUP_S = 10
# "| snd 123 frames 456 audio 30 fps 512 kbit/s"
REMOTE = re.compile(r"\| snd \d+ frames \d+ audio (\d+) fps (\d+) kbit/s")
# the sender's line: "| slow ... est 980 kbit/s video 870 kbit/s"
ESTIMATE = r"\| {} [^|]* est (\d+) kbit/s video (\d+) kbit/s"


def run(args, clip, cc, workdir):
    name = args.lab_name
    env = dict(os.environ, LEGBA_DELAYLINE=os.path.join(
        args.build, "bench", "netlab-delayline"))
    call = os.path.join(args.build, "tools", "legba-call")
    duration = WARMUP_S + args.window + 2
    procs = []

    def start(ns, cmd, log):
        f = open(os.path.join(workdir, log), "w")
        procs.append((subprocess.Popen(netlab.ns_exec(ns, cmd), stdout=f,
                                       stderr=subprocess.STDOUT, env=env), f))

    def member(identity, server, extra):
        return [call, "--server", server, "--key", "lab", "--secret",
                "lab-secret", "--room", "lab", "--identity", identity,
                "--stats", "--duration", str(duration)] + extra

    subprocess.run([netlab.LAB, "up", "--name", name, "--rate",
                    str(args.rate)], check=True, env=env, timeout=60)
    try:
        start(name + "-rtr", [os.path.join(args.build, "tools",
                                           "legba-server"),
                              "--bind", "0.0.0.0", "--port",
                              str(netlab.PORT), "--app-id", "1",
                              "--app-key", "lab", "--app-secret",
                              "lab-secret"], "server.log")
        time.sleep(1)
        quiet = ["--video", "none", "--audio", "none"]
        start(name + "-rcv", member("slow", f"ws://10.201.2.1:{netlab.PORT}",
                                    quiet), "slow.log")
        start(name + "-rtr", member("fast", f"ws://10.201.1.1:{netlab.PORT}",
                                    quiet), "fast.log")
        start(name + "-snd", member(
            "snd", f"ws://10.201.1.1:{netlab.PORT}",
            ["--video", clip["mp4"], "--bitrate", "2000"]
            + ([] if cc else ["--no-congestion-control"])), "snd.log")
        deadline = time.monotonic() + duration + 30
        for p, _ in procs[1:]:
            p.wait(max(1, deadline - time.monotonic()))
    finally:
        for p, f in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
            f.close()
        subprocess.run([netlab.LAB, "down", "--name", name], timeout=60)
    result = {"congestion_control": cc, "load": netlab.loadavg()}
    for who in ("slow", "fast"):
        with open(os.path.join(workdir, who + ".log")) as f:
            samples = [m.groups() for m in map(REMOTE.search, f) if m]
        win = samples[WARMUP_S:WARMUP_S + args.window]
        result[who] = {
            "seconds": len(win),
            "fps_median": statistics.median(int(s[0]) for s in win)
            if win else None,
            "kbps_median": statistics.median(int(s[1]) for s in win)
            if win else None}
        with open(os.path.join(workdir, "snd.log")) as f:
            est = [m.groups() for m in map(re.compile(
                ESTIMATE.format(who)).search, f) if m]
        est = est[WARMUP_S:WARMUP_S + args.window]
        if est:
            result[who]["sender_estimate_kbps_median"] = statistics.median(
                int(e[0]) for e in est)
            result[who]["sender_video_target_kbps_median"] = \
                statistics.median(int(e[1]) for e in est)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--window", type=int, default=30)
    ap.add_argument("--lab-name", default="legba-lab-m3",
                    help="the lab's namespaces' prefix (lab.sh --name)")
    args = ap.parse_args()
    load_start = netlab.loadavg()
    with tempfile.TemporaryDirectory(prefix="legba-mesh3-") as workdir:
        clip = netlab.make_clip(workdir, False)
        runs = [run(args, clip, cc, workdir) for cc in (True, False)]
    out = {"suite": "netlab-mesh3", "rate_kbit": args.rate,
           "legba": netlab.build_version(args.build),
           "load_start": load_start,
           "window_s": args.window, "warmup_s": WARMUP_S,
           "load_end": netlab.loadavg(),
           "command": " ".join(["bench/netlab/mesh3.py"] + sys.argv[1:]),
           "runs": runs}
    with open(args.output, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(runs))


if __name__ == "__main__":
    main()

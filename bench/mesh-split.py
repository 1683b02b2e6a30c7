#!/usr/bin/python3
"""Where a mesh participant's CPU goes: one 4-way mesh of legba-peer or
webrtcbin-peer processes (as bench/run.sh mesh makes it), and over the
window each participant's CPU by thread, read from /proc/PID/task/*/stat.
Threads are grouped by name with the digits left out (GStreamer names a
streaming thread after its element: videotestsrc0:src is the capture and
encoder, rtpjitterbuffer the depayloading and decoding, queue the send
branches, nicesrc the receiving sockets; the encoder's and decoder's own
worker threads inherit those names); "main" is the process's main thread.

    bench/mesh-split.py legba [--perf FILE] [--dot DIR] [--log FILE]
    bench/mesh-split.py webrtcbin ...

--perf records participant p1 with `perf record -F 999` over the window
(read it with `perf report -i FILE --sort dso` or `--sort comm`); --dot
dumps each participant's pipeline graph at the window's start
(GST_DEBUG_DUMP_DOT_DIR); --log appends the JSON summary to FILE. Builds
nothing: run bench/run.sh once first (build-release/)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import suites  # noqa: E402


def tasks(pid):
    """{tid: (name, user+sys ticks)} of a process's threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def group(name):
    if name in ("legba-peer", "webrtcbin-peer"):
        return "main"
    return re.sub(r"[0-9]+", "", name.split(":")[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("peer", choices=["legba", "webrtcbin"])
    ap.add_argument("--build", default=os.path.join(HERE, "..",
                                                    "build-release"))
    ap.add_argument("--window", type=float, default=20)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--perf")
    ap.add_argument("--dot")
    ap.add_argument("--log")
    ap.add_argument("--hold", type=float, default=300,
                    help="how long a participant may hold its window open "
                    "for a starved stream (s)")
    ap.add_argument("--gst-debug", help="GST_DEBUG for the participants "
                    "(their standard error is kept in the work directory)")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="legba-mesh-split-")
    r = suites.Runner(types.SimpleNamespace(build=a.build, workdir=workdir))
    if a.gst_debug:
        r.env["GST_DEBUG"] = a.gst_debug
    if a.dot:
        os.makedirs(a.dot, exist_ok=True)
        r.env["GST_DEBUG_DUMP_DOT_DIR"] = os.path.abspath(a.dot)
    ids = [f"p{i}" for i in range(4)]
    by_id = {}

    def route(sender, msg):
        to = by_id.get(msg.pop("to"))
        if to is not None:
            msg["from"] = sender
            to.send(json.dumps(msg))

    server = None
    procs = []
    try:
        if a.peer == "legba":
            server = suites.LegbaServerProcess(a.build, workdir)
            procs = [suites.MeshProcess(r, "legba", i,
                                        [o for o in ids if o != i],
                                        url=server.url) for i in ids]
        else:
            procs = [suites.MeshProcess(r, "webrtcbin", i,
                                        [o for o in ids if o != i],
                                        route=route) for i in ids]
        by_id.update((p.identity, p) for p in procs)
        missing = suites.wait_all(procs, lambda p: p.event(name="decoding"),
                                  240)
        if missing:
            sys.exit("not every stream decoded: " +
                     ", ".join(p.identity for p in missing))
        suites.wait_all(procs, lambda p: False, a.settle)
        load_start = os.getloadavg()[0]
        before = {p: tasks(p.proc.pid) for p in procs}
        perf = None
        if a.perf:
            perf = subprocess.Popen(
                ["perf", "record", "-F", "999", "-o", a.perf, "-p",
                 str(procs[1].proc.pid), "--", "sleep", str(a.window)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in procs:
            p.send("start")
        t0 = time.monotonic()
        suites.wait_all(procs, lambda p: False, a.window)
        for p in procs:
            p.send("stop")
        dt = time.monotonic() - t0
        after = {p: tasks(p.proc.pid) for p in procs}
        if perf:
            perf.wait()
        suites.wait_all(procs, lambda p: p.event(mode="mesh"), a.hold)
        results = [p.event(mode="mesh") for p in procs]
        hz = os.sysconf("SC_CLK_TCK")
        threads = {}
        for p in procs:
            for tid, (name, ticks) in after[p].items():
                start = before[p].get(tid, (name, 0))[1]
                g = group(name)
                threads[g] = threads.get(g, 0) + \
                    100 * (ticks - start) / hz / dt / len(procs)
        done = [x for x in results if x]
        held = [p.identity for p, x in zip(procs, results) if not x]
        n = max(len(done), 1)
        summary = {
            "peer": a.peer, "workdir": workdir, "no_window_result": held,
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "cpu_pct": [x["cpu_pct"] for x in done],
            "cpu_pct_mean": sum(x["cpu_pct"] for x in done) / n,
            "fps_decoded_per_participant": sum(
                s["fps"] for x in done for s in x["streams"]) / n,
            "frames_lost_per_participant": sum(
                s["lost"] for x in done for s in x["streams"]) / n,
            "latency_p95_ms": sorted(
                s.get("latency_p95_ms", -1) for x in done
                for s in x["streams"]),
            "frames_encoded": [x.get("frames_encoded") for x in done],
            "key_frames": [x.get("key_frames") for x in done],
            "threads_pct": {g: round(v, 2) for g, v in sorted(
                threads.items(), key=lambda kv: -kv[1]) if v >= 0.005},
        }
        line = json.dumps(summary)
        print(line)
        if a.log:
            with open(a.log, "a") as f:
                f.write(line + "\n")
    finally:
        for p in procs:
            p.close()
        if server:
            server.stop()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network lab's suite (docs/benchmarks.md, "Network lab"), as root:
for each scenario, a lab of its own (bench/netlab/lab.sh), legba-server
in the router namespace, a Legba sender (legba-call --video CLIP) on the
sender side and a Legba receiver (a legbaroom pipeline decoding the
video) on the receiver side, sampled every second; writes one JSON file.

  netlab.py --build DIR --output FILE [--quick | --smoke]
            [--scenarios NAME,...] [--window S] [--bitrates KBPS,...]
  netlab.py --list

Each scenario runs once per sender bitrate (legba-call --bitrate; 600
and 2000 kbit/s: under and over the 1 Mbit/s bottleneck), 5 s of
warm-up then a 30 s window (the step: 60 s, 20 s a phase). --quick:
10 s windows (the step 3 x 10 s); --smoke: the 1mbit scenario alone,
--bitrate 600, for 10 s (the CI smoke test). Every run is bounded: a
scenario whose sender has not left 60 s after its window is stopped.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from version import source_version  # noqa: E402

LAB = os.path.join(HERE, "lab.sh")
WARMUP_S = 5
PORT = 6001
# Legba's offers fix the media payload types (H.264 96, VP8 97, Opus 111,
# lib/legba/room/legba-room-media.c); any other RTP payload type the
# sender puts out is a retransmission (RTX, RFC 4588)
MEDIA_PT = {"96", "97", "111"}

# name: lab.sh options, the bottleneck's rate over time (None: none),
# a competing TCP flow
SCENARIOS = {
    "none": {"lab": []},
    "300kbit": {"lab": ["--rate", "300"], "rate": 300},
    "1mbit": {"lab": ["--rate", "1000"], "rate": 1000},
    "3mbit": {"lab": ["--rate", "3000"], "rate": 3000},
    "loss1": {"lab": ["--loss", "1"]},
    "loss3": {"lab": ["--loss", "3"]},
    "loss5": {"lab": ["--loss", "5"]},
    "delay25": {"lab": ["--delay", "25", "--jitter", "5"]},
    "delay100": {"lab": ["--delay", "100", "--jitter", "20"]},
    "1mbit-loss2-delay50": {"lab": ["--rate", "1000", "--loss", "2",
                                    "--delay", "50"], "rate": 1000},
    "step": {"lab": ["--rate", "2000"], "rate": 2000,
             "steps": [(1 / 3, 500), (2 / 3, 2000)]},
    "1mbit-tcp": {"lab": ["--rate", "1000"], "rate": 1000, "tcp": True},
}
BASELINE = ["none", "1mbit", "300kbit", "loss3", "step"]


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def ns_exec(ns, cmd):
    return ["ip", "netns", "exec", ns] + cmd


def make_clip(workdir):
    """A 10 s 640x360 30 fps H.264 clip of a moving zone plate: content
    an encoder spends its whole bitrate on (the plain test pattern makes
    ~220 kbit/s whatever it is asked for); legba-call plays it in a
    loop."""
    path = os.path.join(workdir, "clip.mp4")
    subprocess.run(
        ["gst-launch-1.0", "-q", "videotestsrc", "pattern=zone-plate",
         "kt=2", "kx2=20", "ky2=20", "num-buffers=300", "!",
         "video/x-raw,width=640,height=360,framerate=30/1", "!",
         "x264enc", "bitrate=3000", "speed-preset=veryfast",
         "key-int-max=60", "!", "h264parse", "!", "mp4mux", "!",
         "filesink", f"location={path}"], check=True, timeout=120)
    return path


class Reader(threading.Thread):
    """Collects a process's output lines with their arrival time."""

    def __init__(self, stream, keep):
        super().__init__(daemon=True)
        self.stream, self.keep, self.lines = stream, keep, []

    def run(self):
        for line in self.stream:
            if self.keep(line):
                self.lines.append((time.monotonic(), line.rstrip("\n")))


def counters(ns, dev):
    out = subprocess.run(ns_exec(ns, ["ip", "-j", "-s", "link", "show",
                                      "dev", dev]),
                         capture_output=True, text=True).stdout
    s = json.loads(out)[0]["stats64"]
    return s["tx"]["bytes"], s["rx"]["bytes"]


def qdisc(ns, dev):
    out = subprocess.run(["tc", "-n", ns, "-j", "-s", "qdisc", "show", "dev",
                          dev], capture_output=True, text=True).stdout
    for q in json.loads(out or "[]"):
        if q.get("kind") == "tbf":
            return q.get("backlog", 0), q.get("drops", 0)
    return 0, 0


def last_json_line(path):
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def tcp_flow(lab):
    """A bulk TCP flow from the sender side to the receiver side, on the
    same bottleneck: a sink in the receiver namespace, a writer in the
    sender's, both ended with the lab."""
    sink = ("import socket\ns=socket.socket()\n"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
            "s.bind(('0.0.0.0',5201))\ns.listen(1)\nprint('ready',flush=True)\n"
            "c,_=s.accept()\nwhile c.recv(65536):\n  pass\n")
    src = ("import socket,sys\nc=socket.create_connection((sys.argv[1],5201))\n"
           "b=bytes(65536)\nwhile True:\n  c.sendall(b)\n")
    p = subprocess.Popen(ns_exec(lab["rcv"], [sys.executable, "-c", sink]),
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    q = subprocess.Popen(ns_exec(lab["snd"], [sys.executable, "-c", src,
                                              lab["rcv_addr"]]))
    return [p, q]


def freezes(times, start, end):
    """Chromium's freezes: a frame interval over max(3 x the mean, mean +
    150 ms), the mean over the previous 30 intervals; a window that ends
    (or begins) with no frame for that long counts as frozen to its
    end. Without any frame the whole window is frozen."""
    frames = [t for t in times if start <= t <= end]
    if not frames:
        return [end - start]
    out, intervals = [], []
    prev = frames[0]
    if frames[0] - start > 0.5:
        out.append(frames[0] - start)
    for t in frames[1:] + [end]:
        gap = t - prev
        mean = statistics.mean(intervals[-30:]) if intervals else 1 / 30
        if gap > max(3 * mean, mean + 0.150):
            out.append(gap)
        elif t != end:
            intervals.append(gap)
        prev = t
    return out


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Scenario:
    def __init__(self, args, name, spec, window, clip, bitrate):
        self.args, self.name, self.spec = args, name, spec
        self.bitrate = bitrate
        self.window, self.clip = window, clip
        self.lab_name = f"legba-lab-b{os.getpid()}"
        self.procs = []

    def lab(self, *cmd):
        return subprocess.run([LAB, cmd[0], "--name", self.lab_name]
                              + list(cmd[1:]),
                              check=True, capture_output=True, text=True,
                              timeout=60).stdout

    def start(self, cmd, keep, env):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env)
        r = Reader(p.stdout, keep)
        r.start()
        self.procs.append(p)
        return p, r

    def run(self):
        build = self.args.build
        env = dict(os.environ, LEGBA_DELAYLINE=os.path.join(
            build, "bench", "netlab-delayline"),
            GST_PLUGIN_PATH=os.path.join(build, "plugins", "legba"))
        subprocess.run([LAB, "up", "--name", self.lab_name]
                       + self.spec["lab"], check=True, env=env, timeout=60)
        try:
            return self.measure(env)
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.terminate()
            subprocess.run([LAB, "down", "--name", self.lab_name],
                           timeout=60)
            for p in self.procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()

    def wait_server(self, rtr):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = subprocess.run(ns_exec(rtr, ["ss", "-Hltn", f"sport = :{PORT}"]),
                               capture_output=True, text=True)
            if r.stdout.strip():
                return
            time.sleep(0.1)
        raise RuntimeError("legba-server did not listen within 10 s")

    def measure(self, env):
        n = self.lab_name
        lab = {"snd": n + "-snd", "rtr": n + "-rtr", "rcv": n + "-rcv",
               "rcv_addr": "10.201.2.2"}
        build = self.args.build
        self.start(ns_exec(lab["rtr"], [
            os.path.join(build, "tools", "legba-server"), "--bind",
            "0.0.0.0", "--port", str(PORT), "--app-id", "1", "--app-key",
            "lab", "--app-secret", "lab-secret"]), lambda l: False, env)
        self.wait_server(lab["rtr"])
        room = ["app-key=lab", "app-secret=lab-secret", "room=lab"]
        _, rcv = self.start(ns_exec(lab["rcv"], [
            "gst-launch-1.0", "-v", "legbaroom", "name=r",
            f"server-url=ws://10.201.2.1:{PORT}", *room, "identity=rcv",
            "r.", "!", "video/x-h264", "!", "avdec_h264", "!", "fakesink",
            "name=frames", "silent=false", "sync=false"]),
            lambda l: "(frames:sink) (" in l and "chain" in l, env)
        duration = WARMUP_S + self.window + 2
        t0 = time.monotonic()
        sender, snd = self.start(ns_exec(lab["snd"], [
            os.path.join(build, "tools", "legba-call"), "--server",
            f"ws://10.201.1.1:{PORT}", "--key", "lab", "--secret",
            "lab-secret", "--room", "lab", "--identity", "snd", "--video",
            self.clip, "--bitrate", str(self.bitrate), "--stats",
            "--json", "--duration", str(duration)]),
            lambda l: l.startswith("stats:"), env)
        if self.spec.get("tcp"):
            self.procs += tcp_flow(lab)
        samples = self.sample(lab, t0)
        sender.wait(60)
        return self.summarize(t0, samples, rcv.lines, snd.lines)

    def sample(self, lab, t0):
        """One sample a second until the window ends; the bottleneck's
        rate steps where the scenario says."""
        rate = self.spec.get("rate")
        steps = list(self.spec.get("steps", []))
        samples = []
        log = f"/run/{self.lab_name}/delayline.jsonl"
        end = t0 + WARMUP_S + self.window
        tick = t0
        while True:
            now = time.monotonic()
            if steps and now >= t0 + WARMUP_S + steps[0][0] * self.window:
                rate = steps.pop(0)[1]
                self.lab("rate", str(rate))
            tx, _ = counters(lab["snd"], "lab0")
            _, rx = counters(lab["rcv"], "lab0")
            backlog, drops = qdisc(lab["rtr"], "to-rcv")
            samples.append({"t": round(now - t0, 3), "sent_bytes": tx,
                            "received_bytes": rx, "backlog_bytes": backlog,
                            "qdisc_drops": drops, "rate_kbps": rate,
                            "delayline": last_json_line(log)})
            if now >= end:
                return samples
            tick += 1
            time.sleep(max(0, tick - time.monotonic()))

    def summarize(self, t0, samples, frame_lines, stat_lines):
        frames = [t - t0 for t, _ in frame_lines]
        start, end = WARMUP_S, WARMUP_S + self.window
        series = []
        for a, b in zip(samples, samples[1:]):
            dt = b["t"] - a["t"]
            dl_a, dl_b = a["delayline"], b["delayline"]
            rtx = media = lost = None
            # per second of the delay line's own clock (its lines come
            # once a second, not in step with these samples)
            if dl_a and dl_b and dl_b["t"] > dl_a["t"]:
                span = dl_b["t"] - dl_a["t"]
                pa, pb = dl_a["ab"]["rtp"], dl_b["ab"]["rtp"]
                diff = {pt: pb[pt] - pa.get(pt, 0) for pt in pb}
                rtx = sum(v for pt, v in diff.items()
                          if pt not in MEDIA_PT) / span
                media = sum(v for pt, v in diff.items()
                            if pt in MEDIA_PT) / span
                lost = (dl_b["ab"]["lost"] - dl_a["ab"]["lost"]) / span
            rate = b["rate_kbps"]
            series.append({
                "t": b["t"],
                "sent_kbps": (b["sent_bytes"] - a["sent_bytes"]) * 8 / dt
                / 1000,
                "received_kbps": (b["received_bytes"] - a["received_bytes"])
                * 8 / dt / 1000,
                "frames": sum(1 for f in frames if a["t"] < f <= b["t"]),
                "queue_ms": b["backlog_bytes"] * 8 / rate if rate else 0,
                "qdisc_drops": b["qdisc_drops"] - a["qdisc_drops"],
                "random_losses": lost, "rtp_media_pps": media,
                "rtx_pps": rtx, "rate_kbps": rate})
        enc = []
        for t, line in stat_lines:
            m = re.match(r"stats: \S+ (\d+) kbit/s", line)
            if m:
                enc.append({"t": round(t - t0, 3),
                            "encoder_kbps": int(m.group(1))})
        win = [s for s in series if start < s["t"] <= end + 0.5]
        fr = freezes(frames, start, end)
        first = min(frames) if frames else None
        return {
            "scenario": self.name, "lab": self.spec["lab"],
            "steps": self.spec.get("steps"), "tcp": bool(self.spec.get("tcp")),
            "window_s": self.window, "warmup_s": WARMUP_S,
            "bitrate_kbps": self.bitrate,
            "first_frame_s": first,
            "frames_in_window": sum(1 for f in frames if start <= f <= end),
            "received_kbps_median": statistics.median(
                [s["received_kbps"] for s in win]) if win else None,
            "sent_kbps_median": statistics.median(
                [s["sent_kbps"] for s in win]) if win else None,
            "fps_median": statistics.median([s["frames"] for s in win])
            if win else None,
            "freeze_count": len(fr), "freeze_s": round(sum(fr), 3),
            "queue_ms_p50": percentile([s["queue_ms"] for s in win], 50),
            "queue_ms_p95": percentile([s["queue_ms"] for s in win], 95),
            "qdisc_drops": sum(s["qdisc_drops"] for s in win),
            "rtx_pps_median": statistics.median(
                [s["rtx_pps"] for s in win if s["rtx_pps"] is not None])
            if any(s["rtx_pps"] is not None for s in win) else None,
            "series": series, "encoder": enc,
            "frame_times": [round(f, 4) for f in frames],
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--output")
    ap.add_argument("--command", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--scenarios", default="")
    ap.add_argument("--window", type=float)
    ap.add_argument("--bitrates", default="",
                    help="the sender's --bitrate, each in turn (default "
                    "600,2000; --smoke: 600)")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    if not args.build or not args.output:
        ap.error("--build and --output are required")
    if os.geteuid() != 0:
        print("netlab: the lab needs root (network namespaces)",
              file=sys.stderr)
        return 2
    names = [s for s in args.scenarios.split(",") if s] or (
        ["1mbit"] if args.smoke else list(SCENARIOS))
    for s in names:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s} (--list)")
    window = args.window or (10 if args.smoke or args.quick else 30)
    result = {
        "suite": "netlab", "command": args.command, "quick": args.quick,
        "smoke": args.smoke,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "legba": source_version(HERE), "kernel": os.uname().release,
        "load_start": loadavg(), "sender": "legba-call --video CLIP",
        "receiver": "legbaroom ! avdec_h264", "scenarios": [],
    }
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="legba-netlab-") as workdir:
        clip = make_clip(workdir)
        bitrates = [int(b) for b in (args.bitrates or (
            "600" if args.smoke else "600,2000")).split(",")]
        for name in names:
            spec = SCENARIOS[name]
            # the step's three phases are a window each (20 s in a full
            # run)
            w = window
            if spec.get("steps"):
                w = 60 if not (args.window or args.quick or args.smoke) \
                    else window * 3
            for bitrate in bitrates:
                print(f"netlab: {name}, --bitrate {bitrate} ({w:.0f} s)",
                      file=sys.stderr)
                try:
                    res = Scenario(args, name, spec, w, clip, bitrate).run()
                except (subprocess.SubprocessError, RuntimeError,
                        OSError) as e:
                    res = {"scenario": name, "bitrate_kbps": bitrate,
                           "error": str(e)}
                res["load"] = loadavg()
                result["scenarios"].append(res)
    result.update({"seconds": time.time() - t_start, "load_end": loadavg()})
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(f"netlab: wrote {args.output}", file=sys.stderr)
    return 1 if any("error" in r for r in result["scenarios"]) else 0


if __name__ == "__main__":
    sys.exit(main())

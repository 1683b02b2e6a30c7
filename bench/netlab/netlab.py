#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network lab's suite (docs/benchmarks.md, "Network lab"), as root:
for each scenario, a lab of its own (bench/netlab/lab.sh), legba-server
in the router namespace, a sender on the sender side and a receiver on
the receiver side, sampled every second; writes one JSON file.

  netlab.py --build DIR --output FILE [--quick | --smoke]
            [--scenarios NAME,...] [--window S] [--senders LIST]
            [--receiver legba|chromium] [--receiver-latency MS]
            [--receiver-max-latency MS] [--lab-name NAME]
  netlab.py --list

Senders, each in turn on every scenario: legba:KBPS (legba-call --video
CLIP --bitrate KBPS), legba-nocc:KBPS (the same with
--no-congestion-control: packets unpaced, every retransmission request
answered, the bitrate fixed), legba-fecP:KBPS (the same as legba:KBPS
with --video-fec P: RED and ULPFEC at P percent) and chromium (the room page in headless Chromium,
its fake camera playing the same picture: chromium-peer.mjs); by
default legba:600, legba:2000 (under and over the 1 Mbit/s bottleneck)
and chromium. The receiver: the room page in Chromium (the default), or
legba (a legbaroom pipeline decoding the video). Without Chromium, node
or playwright-core, Legba alone, and the results say so.

10 s of warm-up, then a 30 s window (the step: 60 s, 20 s a phase).
--quick: 10 s windows (the step 3 x 10 s); --smoke: the 1mbit scenario
alone, legba:600 to a Legba receiver, for 10 s (the CI smoke test).
Every run is bounded: a scenario whose sender has not left 60 s after
its window is stopped.
"""

import argparse
import collections
import datetime
import json
import os
import re
import shutil
import signal
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
CHROMIUM_PEER = os.path.join(HERE, "chromium-peer.mjs")
CHROMIUM = os.environ.get("LEGBA_CHROMIUM", "/usr/bin/chromium")
PLAYWRIGHT = os.path.join(HERE, "..", "..", "tests", "integration",
                          "node_modules", "playwright-core")
WARMUP_S = 10
FRAME_S = 1 / 30
PORT = 6001
# The media payload types when Legba offers (H.264 96, VP8 97, Opus 111:
# lib/legba/room/legba-room-media.c); when the room page is a participant,
# the video's is read from its getStats (Opus is 111 there too). Any
# other dynamic payload type (96-127) from the sender is a retransmission
# (RTX, RFC 4588, or padding sent on it).
LEGBA_MEDIA_PT = {"96", "97", "111"}

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
    "1mbit-loss2": {"lab": ["--rate", "1000", "--loss", "2"], "rate": 1000},
    "1mbit-loss2-delay50": {"lab": ["--rate", "1000", "--loss", "2",
                                    "--delay", "50"], "rate": 1000},
    "step": {"lab": ["--rate", "2000"], "rate": 2000,
             "steps": [(1 / 3, 500), (2 / 3, 2000)]},
    "1mbit-tcp": {"lab": ["--rate", "1000"], "rate": 1000, "tcp": True},
}
BASELINE = ["none", "1mbit", "300kbit", "loss3", "step"]


def build_version(build):
    """The version of the Legba the lab runs: that of the source tree the
    build was configured from (its meson-info), which need not be the
    lab's own."""
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            return source_version(json.load(f)["directories"]["source"])
    except (OSError, ValueError, KeyError):
        return source_version(HERE)


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def ns_exec(ns, cmd):
    return ["ip", "netns", "exec", ns] + cmd


def chromium_available():
    return (os.access(CHROMIUM, os.X_OK) and shutil.which("node")
            and os.path.isdir(PLAYWRIGHT))


def make_clip(workdir, raw):
    """A 10 s 640x360 30 fps H.264 clip of a moving zone plate: content
    an encoder spends its whole bitrate on (the plain test pattern makes
    ~220 kbit/s whatever it is asked for); legba-call plays it in a
    loop. With raw, the same picture as 5 s of raw video (Y4M, 52 MB)
    for Chromium's fake camera, which loops it too."""
    source = ["gst-launch-1.0", "-q", "videotestsrc", "pattern=zone-plate",
              "kt=2", "kx2=20", "ky2=20", "num-buffers=300", "!",
              "video/x-raw,width=640,height=360,framerate=30/1,format=I420",
              "!"]
    clip = {"mp4": os.path.join(workdir, "clip.mp4"), "y4m": None}
    subprocess.run(source + [
        "x264enc", "bitrate=3000", "speed-preset=veryfast",
        "key-int-max=60", "!", "h264parse", "!", "mp4mux", "!",
        "filesink", f"location={clip['mp4']}"], check=True, timeout=120)
    if raw:
        clip["y4m"] = os.path.join(workdir, "clip.y4m")
        source[source.index("num-buffers=300")] = "num-buffers=150"
        subprocess.run(source + ["y4menc", "!", "filesink",
                                 f"location={clip['y4m']}"],
                       check=True, timeout=120)
    return clip


class Reader(threading.Thread):
    """Collects a process's output lines with their arrival time (those
    `keep` wants), and its last lines whatever they are, to say why it
    failed."""

    def __init__(self, stream, keep):
        super().__init__(daemon=True)
        self.stream, self.keep, self.lines = stream, keep, []
        self.tail = collections.deque(maxlen=20)

    def run(self):
        for line in self.stream:
            if self.keep(line):
                self.lines.append((time.monotonic(), line.rstrip("\n")))
            self.tail.append(line.rstrip("\n"))

    def wait_for(self, pred, timeout):
        """The arrival time of the first kept line pred takes, waiting up
        to timeout seconds for it; None if none came."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            lines = self.lines[seen:]
            seen += len(lines)
            t = next((t for t, l in lines if pred(l)), None)
            if t is not None or time.monotonic() >= deadline:
                return t
            if not self.is_alive() and seen == len(self.lines):
                return None
            time.sleep(0.02)


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
    same bottleneck: a sink in the receiver namespace that prints the
    bytes it received so far every 100 ms, and a writer in the sender's,
    both ended with the lab. Returns the processes and the sink's
    reader."""
    sink = ("import socket,time\ns=socket.socket()\n"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
            "s.bind(('0.0.0.0',5201))\ns.listen(1)\n"
            "print('ready',flush=True)\nc,_=s.accept()\nn=0\nt=0\n"
            "while True:\n  b=c.recv(65536)\n  if not b:\n    break\n"
            "  n+=len(b)\n  if time.monotonic()-t>0.1:\n"
            "    t=time.monotonic()\n    print(n,flush=True)\n")
    src = ("import socket,sys\nc=socket.create_connection((sys.argv[1],"
           "5201))\nb=bytes(65536)\nwhile True:\n  c.sendall(b)\n")
    p = subprocess.Popen(ns_exec(lab["rcv"], [sys.executable, "-c", sink]),
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    reader = Reader(p.stdout, lambda l: l.strip().isdigit())
    reader.start()
    q = subprocess.Popen(ns_exec(lab["snd"], [sys.executable, "-c", src,
                                              lab["rcv_addr"]]))
    return [p, q], reader


def freezes(times, start, end):
    """Chromium's freezes in the window [start, end]: a frame interval
    over max(3 x the mean, mean + 150 ms), the mean over the 30 intervals
    before it (every interval, frozen or not, as Chromium's moving
    average takes them); the part of it inside the window counts. A
    window that opens before the first frame is frozen until it, one that
    ends long after the last frame is frozen to its end, and one without
    any frame is frozen throughout."""
    frames = sorted(t for t in times if t <= end)
    if not any(t >= start for t in frames):
        return [end - start]
    out, history = [], []
    if frames[0] - start > 0.150 + FRAME_S:
        out.append(frames[0] - start)
    ends = frames[1:] + [end]
    for k, (prev, t) in enumerate(zip(frames, ends)):
        last = k == len(ends) - 1
        gap = t - prev
        mean = statistics.mean(history[-30:]) if history else (
            FRAME_S if last else None)
        if mean is not None and gap > max(3 * mean, mean + 0.150):
            inside = min(t, end) - max(prev, start)
            if inside > 0:
                out.append(inside)
        if not last:
            history.append(gap)
    return out

def wire_series(samples, media_pt):
    """Per second: what crossed the lab's interfaces, the bottleneck's
    queue and drops, the delay line's counts (media and RTX packets by
    payload type)."""
    series = []
    for a, b in zip(samples, samples[1:]):
        dt = b["t"] - a["t"]
        dl_a, dl_b = a["delayline"], b["delayline"]
        rtx = media = lost = None
        # per second of the delay line's own clock (its lines come once
        # a second, not in step with these samples)
        if dl_a and dl_b and dl_b["t"] > dl_a["t"]:
            span = dl_b["t"] - dl_a["t"]
            pa, pb = dl_a["ab"]["rtp"], dl_b["ab"]["rtp"]
            diff = {pt: pb[pt] - pa.get(pt, 0) for pt in pb}
            media = sum(v for pt, v in diff.items() if pt in media_pt) / span
            rtx = sum(v for pt, v in diff.items()
                      if pt not in media_pt and int(pt) >= 96) / span
            lost = (dl_b["ab"]["lost"] - dl_a["ab"]["lost"]) / span
        rate = b["rate_kbps"]
        series.append({
            "t": b["t"],
            "sent_kbps": (b["sent_bytes"] - a["sent_bytes"]) * 8 / dt / 1000,
            "received_kbps": (b["received_bytes"] - a["received_bytes"])
            * 8 / dt / 1000,
            "queue_ms": b["backlog_bytes"] * 8 / rate if rate else 0,
            "qdisc_drops": b["qdisc_drops"] - a["qdisc_drops"],
            "random_losses": lost, "rtp_pps": media, "rtx_pps": rtx,
            "rate_kbps": rate, "rtp_by_pt": dl_b["ab"]["rtp"] if dl_b else None})
    return series


JITTER_LATENCY = re.compile(r"GstRtpJitterBuffer:([^:]*): latency = (\d+)")


def joined(line):
    """A participant's line saying it is in the room: chromium-peer.mjs's
    first line, legba-call's, or the room state gst-launch-1.0 -m shows
    for legbaroom."""
    return (line.startswith('{"joined"') or line.startswith("joined room ")
            or "legba-room-state, state=(string)connected" in line)


def legba_receiver(lines, t0, series, start, end):
    """A legbaroom receiver: every decoded frame's arrival time, and its
    jitter buffers' latency as it changed (LegbaRoom:max-latency)."""
    frames = [t - t0 for t, l in lines if "(frames:sink) (" in l]
    changes = [(t - t0, m.group(1), int(m.group(2))) for t, l in lines
               for m in [JITTER_LATENCY.search(l)] if m]
    # per second, the highest latency any jitter buffer had in it
    prev, now = 0, {}
    for s in series:
        during = [v for t, _, v in changes if prev < t <= s["t"]]
        highest = max(list(now.values()) + during, default=None)
        for t, name, v in changes:
            if prev < t <= s["t"]:
                now[name] = v
        s["jitter_latency_ms"] = highest
        prev = s["t"]
    prev = 0
    for s in series:
        s["frames"] = sum(1 for f in frames if prev < f <= s["t"])
        prev = s["t"]
    fr = freezes(frames, start, end)
    return {"first_frame_s": min(frames) if frames else None,
            "jitter_latency_ms_max": max((v for _, _, v in changes),
                                         default=None),
            "frames_in_window": sum(1 for f in frames if start <= f <= end),
            "freeze_count": len(fr), "freeze_s": round(sum(fr), 3),
            "freezes_by": "frame times",
            "frame_times": [round(f, 4) for f in frames]}


def legba_sender_line(t, line):
    """A `legba-call --stats` line of the sender: the encoder's rate, and
    the estimate and its video share towards the receiver."""
    out = {"t": round(t, 3),
           "encoder_kbps": int(re.match(r"stats: \S+ (\d+) kbit/s",
                                        line).group(1))}
    m = re.search(r" est (\d+) kbit/s video (\d+) kbit/s", line)
    if m:
        out["est_kbps"] = int(m.group(1))
        out["video_target_kbps"] = int(m.group(2))
    return out


def legba_estimate(sent, start, end):
    """A Legba sender's estimate and video target over the window,
    medians, from its stats lines."""
    lines = [e for e in sent.get("encoder", [])
             if start < e["t"] <= end + 0.5 and "est_kbps" in e]
    if not lines:
        return {}
    return {"est_kbps_median":
            statistics.median(e["est_kbps"] for e in lines),
            "video_target_kbps_median":
            statistics.median(e["video_target_kbps"] for e in lines)}


def stats_lines(lines, t0, side):
    """chromium-peer.mjs's per-second lines: (t, the first peer
    connection's video counters of that side, with its connection's
    availableOutgoingBitrate and, sending, the remote-inbound-rtp's
    round trip and fraction lost; receiving, the remote-outbound-rtp's
    round trips, those the receiver timed from the sender's answers to
    its extended reports)."""
    out = []
    for t, line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        for pc in msg.get("stats", []):
            if pc.get(side):
                c = dict(pc[side])
                if pc.get("availableOutgoingBitrate") is not None:
                    c["availableOutgoingBitrate"] = \
                        pc["availableOutgoingBitrate"]
                remote = pc.get("remoteInbound") or {}
                if side == "outbound":
                    for k in ("roundTripTime", "fractionLost"):
                        if k in remote:
                            c["remote_" + k] = remote[k]
                remote = pc.get("remoteOutbound") or {}
                if side == "inbound":
                    for k in ("roundTripTimeMeasurements",
                              "totalRoundTripTime"):
                        if k in remote:
                            c["remote_" + k] = remote[k]
                out.append((t - t0, c))
                break
    return out


def at(points, t, key):
    """The counter's value at time t: its last sample at or before t."""
    v = 0
    for pt, c in points:
        if pt > t:
            break
        v = c.get(key, v)
    return v


def chromium_receiver(lines, t0, series, start, end):
    """The room page receiving: frames decoded a second from getStats,
    freezes as Chromium counts them (its definition), and a stall at the
    window's end that Chromium has not counted yet (it counts a freeze
    when the next frame comes): over a second without a new frame up to
    the window's end, unless the first sample after it shows frames and
    no new freeze (the samples, a second apart, straddled the end)."""
    pts = stats_lines(lines, t0, "inbound")
    prev = 0
    for s in series:
        s["frames"] = (at(pts, s["t"], "framesDecoded")
                       - at(pts, prev, "framesDecoded"))
        prev = s["t"]
    decoded = [(t, c.get("framesDecoded", 0)) for t, c in pts]
    # the page's line at its first decoded frame (read every 50 ms), else
    # the first second's sample that has one
    first = next((t - t0 for t, l in lines if '"firstFrame"' in l),
                 next((t for t, n in decoded if n > 0), None))
    count = at(pts, end, "freezeCount") - at(pts, start, "freezeCount")
    total = (at(pts, end, "totalFreezesDuration")
             - at(pts, start, "totalFreezesDuration"))
    last_new = max([start] + [t for (t, n), (_, m) in zip(decoded[1:],
                   decoded) if n > m and t <= end])
    after = next((c for t, c in pts if t > end), None)
    resumed = (after is not None
               and after.get("framesDecoded", 0)
               > at(pts, end, "framesDecoded")
               and after.get("freezeCount", 0)
               == at(pts, end, "freezeCount"))
    if end - last_new > 1 and not resumed:
        count += 1
        total += end - last_new
    return {"first_frame_s": first,
            "frames_in_window": (at(pts, end, "framesDecoded")
                                 - at(pts, start, "framesDecoded")),
            "freeze_count": count, "freeze_s": round(total, 3),
            "freezes_by": "Chromium's getStats",
            "fec_packets_received": at(pts, end, "fecPacketsReceived")
            - at(pts, start, "fecPacketsReceived"),
            "fec_packets_discarded": at(pts, end, "fecPacketsDiscarded")
            - at(pts, start, "fecPacketsDiscarded"),
            "nacks_sent": at(pts, end, "nackCount")
            - at(pts, start, "nackCount"),
            "plis_sent": at(pts, end, "pliCount") - at(pts, start, "pliCount"),
            "receiver_rtt_measurements":
            at(pts, end, "remote_roundTripTimeMeasurements"),
            "receiver_stats": [{"t": round(t, 3), **c} for t, c in pts]}


def chromium_sender(lines, t0, series, start, end):
    """The room page sending: its target bitrate, the estimate of its
    congestion controller (availableOutgoingBitrate), retransmissions,
    the NACKs and PLIs it received, its picture size and what limits its
    quality, a second at a time; and over the window, the NACKs, PLIs
    and FIRs it received (what the receiver sent back), the key frames it
    made, and how many seconds each qualityLimitationReason held."""
    pts = stats_lines(lines, t0, "outbound")
    prev = 0
    for s in series:
        dt = s["t"] - prev
        s["chromium_rtx_pps"] = (
            at(pts, s["t"], "retransmittedPacketsSent")
            - at(pts, prev, "retransmittedPacketsSent")) / dt
        s["target_kbps"] = at(pts, s["t"], "targetBitrate") / 1000
        s["available_kbps"] = at(pts, s["t"],
                                 "availableOutgoingBitrate") / 1000
        s["height"] = at(pts, s["t"], "frameHeight")
        s["limitation"] = at(pts, s["t"], "qualityLimitationReason") or None
        prev = s["t"]
    limited = collections.Counter(
        c.get("qualityLimitationReason") for t, c in pts if start < t <= end)
    return {"nacks_received": at(pts, end, "nackCount")
            - at(pts, start, "nackCount"),
            "plis_received": at(pts, end, "pliCount")
            - at(pts, start, "pliCount"),
            "firs_received": at(pts, end, "firCount")
            - at(pts, start, "firCount"),
            "key_frames": at(pts, end, "keyFramesEncoded")
            - at(pts, start, "keyFramesEncoded"),
            "limitation_s": dict(limited),
            "sender_stats": [{"t": round(t, 3), **c} for t, c in pts]}


def tcp_share(res, lines, t0):
    """The competing flow's received bitrate a second, and the call's:
    what the receiver's interface took in less the flow's."""
    pts = [(t - t0, {"bytes": int(l)}) for t, l in lines]
    prev = 0
    for s in res["series"]:
        s["tcp_kbps"] = ((at(pts, s["t"], "bytes") - at(pts, prev, "bytes"))
                         * 8 / (s["t"] - prev) / 1000)
        s["call_kbps"] = max(0.0, s["received_kbps"] - s["tcp_kbps"])
        prev = s["t"]
    start, end = res["warmup_s"], res["warmup_s"] + res["window_s"]
    win = [s for s in res["series"] if start < s["t"] <= end + 0.5]
    res["tcp_kbps_median"] = statistics.median(
        [s["tcp_kbps"] for s in win]) if win else None
    res["call_kbps_median"] = statistics.median(
        [s["call_kbps"] for s in win]) if win else None


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Scenario:
    def __init__(self, args, name, spec, window, clip, sender, receiver):
        self.args, self.name, self.spec = args, name, spec
        self.sender, _, bitrate = sender.partition(":")
        self.bitrate = int(bitrate) if bitrate else None
        self.receiver = receiver
        self.window, self.clip = window, clip
        self.lab_name = args.lab_name or f"legba-lab-b{os.getpid()}"
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
        try:
            # inside: a lab that failed half-way up is deleted too
            subprocess.run([LAB, "up", "--name", self.lab_name]
                           + self.spec["lab"], check=True, env=env,
                           timeout=60)
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

    def token(self, identity):
        return subprocess.run(
            [os.path.join(self.args.build, "tools", "legba-token"),
             "--secret", "lab-secret", "--room", "lab", "--identity",
             identity], capture_output=True, text=True, check=True,
            timeout=10).stdout.strip()

    def chromium(self, ns, identity, server, seconds, env):
        """The room page in headless Chromium (chromium-peer.mjs): the
        sender publishes its fake camera playing the clip, the receiver
        nothing."""
        role = "send" if identity == "snd" else "recv"
        cmd = ["node", CHROMIUM_PEER, "--role", role, "--url", server,
               "--app-id", "1", "--key", "lab", "--token",
               self.token(identity), "--room", "lab", "--identity",
               identity, "--seconds", str(seconds)]
        if role == "send":
            cmd += ["--video-file", self.clip["y4m"]]
        elif self.sender.startswith("legba-fec"):
            # the room page accepts RED and ULPFEC only when asked
            cmd += ["--fec", "true"]
        return self.start(ns_exec(ns, cmd), lambda l: l.startswith("{"), env)

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
        duration = WARMUP_S + self.window + 2
        if self.receiver == "chromium":
            _, rcv = self.chromium(lab["rcv"], "rcv",
                                   f"ws://10.201.2.1:{PORT}",
                                   duration + 10, env)
        else:
            _, rcv = self.start(ns_exec(lab["rcv"], [
                "gst-launch-1.0", "-v", "-m", "legbaroom", "name=r",
                f"server-url=ws://10.201.2.1:{PORT}", "app-key=lab",
                "app-secret=lab-secret", "room=lab", "identity=rcv",
                f"latency={self.args.receiver_latency}"] + (
                    [f"max-latency={self.args.receiver_max_latency}"]
                    if self.args.receiver_max_latency is not None else []) + [
                "r.",
                "!", "video/x-h264", "!", "avdec_h264", "!", "fakesink",
                "name=frames", "silent=false", "sync=false"]),
                lambda l: ("(frames:sink) (" in l and "chain" in l) or
                JITTER_LATENCY.search(l) is not None or joined(l), env)
        # the receiver is in the room before the sender starts: a first
        # frame's time is the sender's, not the receiver's start
        if rcv.wait_for(joined, 60) is None:
            raise RuntimeError("the receiver did not join within 60 s: "
                               + " | ".join(rcv.tail))
        t0 = time.monotonic()
        if self.sender == "chromium":
            sender, snd = self.chromium(lab["snd"], "snd",
                                        f"ws://10.201.1.1:{PORT}", duration,
                                        env)
        else:
            sender, snd = self.start(ns_exec(lab["snd"], [
                os.path.join(build, "tools", "legba-call"), "--server",
                f"ws://10.201.1.1:{PORT}", "--key", "lab", "--secret",
                "lab-secret", "--room", "lab", "--identity", "snd",
                "--video", self.clip["mp4"], "--bitrate", str(self.bitrate),
                "--stats", "--json", "--duration", str(duration)] + (
                    ["--no-congestion-control"]
                    if self.sender == "legba-nocc" else []) + (
                    ["--video-fec", self.sender[len("legba-fec"):]]
                    if self.sender.startswith("legba-fec") else [])),
                lambda l: l.startswith("stats:") or joined(l), env)
        tcp = None
        if self.spec.get("tcp"):
            procs, tcp = tcp_flow(lab)
            self.procs += procs
        samples = self.sample(lab, t0)
        sender.wait(60)
        res = self.summarize(t0, samples, rcv.lines, snd.lines)
        if tcp:
            tcp_share(res, tcp.lines, t0)
        if sender.returncode != 0:
            res["sender_failed"] = {"exit": sender.returncode,
                                    "output": list(snd.tail)}
        if not rcv.lines:
            res["receiver_output"] = list(rcv.tail)
        return res

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

    def summarize(self, t0, samples, rcv_lines, snd_lines):
        start, end = WARMUP_S, WARMUP_S + self.window
        media_pt = LEGBA_MEDIA_PT
        for lines, side in ((rcv_lines, "inbound"), (snd_lines, "outbound")):
            pts = [c["payloadType"] for _, c in stats_lines(lines, t0, side)
                   if "payloadType" in c]
            if pts:
                media_pt = {str(pts[-1]), "111"}
        if self.sender.startswith("legba-fec"):
            # the video leaves in RED, under a payload type of its own:
            # the one that carried the most packets
            counts = [s["delayline"]["ab"]["rtp"] for s in samples
                      if s["delayline"]]
            if counts:
                video = max((pt for pt in counts[-1] if pt != "111"),
                            key=lambda pt: counts[-1][pt], default=None)
                if video is not None:
                    media_pt = {video, "111"}
        series = wire_series(samples, media_pt)
        if self.receiver == "chromium":
            recv = chromium_receiver(rcv_lines, t0, series, start, end)
        else:
            recv = legba_receiver(rcv_lines, t0, series, start, end)
        if self.sender == "chromium":
            sent = chromium_sender(snd_lines, t0, series, start, end)
        else:
            sent = {"encoder": [legba_sender_line(t - t0, l)
                                for t, l in snd_lines
                                if re.match(r"stats: \S+ \d+ kbit/s", l)]}
        win = [s for s in series if start < s["t"] <= end + 0.5]

        def med(key):
            v = [s[key] for s in win if s.get(key) is not None]
            return statistics.median(v) if v else None

        # the sender's own start to its join, and its join to the
        # receiver's first frame ("a picture within 3 s of connecting")
        joined_s = next((t - t0 for t, l in snd_lines if joined(l)), None)
        first = recv["first_frame_s"]
        recv["sender_joined_s"] = joined_s
        recv["first_frame_after_join_s"] = (
            first - joined_s if first is not None and joined_s is not None
            else None)
        return {
            "scenario": self.name, "lab": self.spec["lab"],
            "steps": self.spec.get("steps"),
            "tcp": bool(self.spec.get("tcp")),
            "sender": self.sender, "receiver": self.receiver,
            "window_s": self.window, "warmup_s": WARMUP_S,
            "bitrate_kbps": self.bitrate,
            "received_kbps_median": med("received_kbps"),
            "sent_kbps_median": med("sent_kbps"),
            "fps_median": med("frames"),
            "queue_ms_p50": percentile([s["queue_ms"] for s in win], 50),
            "queue_ms_p95": percentile([s["queue_ms"] for s in win], 95),
            "qdisc_drops": sum(s["qdisc_drops"] for s in win),
            "rtx_pps_median": med("rtx_pps"), "media_pt": sorted(media_pt),
            "target_kbps_median": med("target_kbps"),
            "available_kbps_median": med("available_kbps"),
            **recv, **sent, **legba_estimate(sent, start, end),
            "series": series,
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
    ap.add_argument("--senders", default="",
                    help="legba:KBPS (legba-call --bitrate KBPS) or chromium,"
                    " each in turn (default legba:600,legba:2000,chromium; "
                    "--smoke: legba:600)")
    ap.add_argument("--receiver", choices=["legba", "chromium"],
                    help="default chromium (legba with --smoke or without "
                    "Chromium)")
    ap.add_argument("--receiver-latency", type=int, default=100,
                    help="a Legba receiver's jitter buffer latency in ms "
                    "(legbaroom latency; default 100, the room's own)")
    ap.add_argument("--receiver-max-latency", type=int,
                    help="the most a Legba receiver's jitter buffer grows "
                    "to in ms (legbaroom max-latency; default the room's "
                    "own; at or under --receiver-latency: fixed)")
    ap.add_argument("--lab-name",
                    help="the labs' name (lab.sh --name: legba-lab-SUFFIX; "
                    "default legba-lab-bPID), for runs side by side")
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
    # a timeout's SIGTERM unwinds like Ctrl-C: each lab is deleted on the
    # way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = [s for s in args.scenarios.split(",") if s] or (
        ["1mbit"] if args.smoke else list(SCENARIOS))
    if args.lab_name and not re.fullmatch(r"legba-lab-[a-z0-9]+",
                                          args.lab_name):
        ap.error("--lab-name is legba-lab-SUFFIX (lowercase, digits)")
    for s in names:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s} (--list)")
    window = args.window or (10 if args.smoke or args.quick else 30)
    browser = chromium_available()
    senders = [x for x in (args.senders or (
        "legba:600" if args.smoke else "legba:600,legba:2000,chromium")
    ).split(",") if x]
    receiver = args.receiver or (
        "chromium" if browser and not args.smoke else "legba")
    for x in senders:
        if not re.fullmatch(
                r"legba(-nocc|-fec[1-9][0-9]*)?:[1-9][0-9]*|chromium", x):
            ap.error(f"--senders: {x} is neither legba:KBPS, "
                     "legba-nocc:KBPS nor chromium")
    notes = []
    if not browser and (receiver == "chromium" or "chromium" in senders):
        notes.append(f"Chromium left out: {CHROMIUM}, node or playwright-"
                     "core (scripts/setup.sh) is missing")
        senders = [x for x in senders if x != "chromium"]
        receiver = "legba"
    result = {
        "suite": "netlab", "command": args.command, "quick": args.quick,
        "smoke": args.smoke,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "legba": build_version(args.build), "netlab": source_version(HERE),
        "kernel": os.uname().release,
        "load_start": loadavg(), "senders": senders, "receiver": receiver,
        "receiver_latency_ms": args.receiver_latency,
        "receiver_max_latency_ms": args.receiver_max_latency,
        "notes": notes, "scenarios": [],
    }
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="legba-netlab-") as workdir:
        clip = make_clip(workdir, "chromium" in senders)
        for index, name in enumerate(names):
            spec = SCENARIOS[name]
            # the step's three phases are a window each (20 s in a full
            # run)
            w = window
            if spec.get("steps"):
                w = 60 if not (args.window or args.quick or args.smoke) \
                    else window * 3
            # the senders take turns, in the opposite order every other
            # scenario, so that drift of the shared machine hits them all
            order = senders if index % 2 == 0 \
                else senders[::-1]
            for sender in order:
                print(f"netlab: {name}, {sender} to {receiver} ({w:.0f} s)",
                      file=sys.stderr)
                try:
                    res = Scenario(args, name, spec, w, clip, sender,
                                   receiver).run()
                except (subprocess.SubprocessError, RuntimeError,
                        OSError) as e:
                    res = {"scenario": name, "sender": sender,
                           "receiver": receiver, "error": str(e)}
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

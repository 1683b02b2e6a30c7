#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Driver of the peer-comparison suites (1, 2, 4, 5, 6, 7 and 9 of
docs/benchmarks.md, and the first-frame and mesh figures of a call);
bench/run.sh calls it once per suite.

  suites.py SUITE --build DIR --pion PATH --output FILE [--quick]

Each run of a peer is a fresh process (bench/peers/*, bench/media.py);
in every round the peers run in turn, in the opposite order each other
round (A B C, C B A, ...), so drift of the shared machine hits them all.
Writes the raw series, every run's output and the conditions as JSON.
"""

import argparse
import datetime
import json
import os
import platform
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from version import source_version

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def busy_processes():
    out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"],
                         capture_output=True, text=True).stdout
    return [" ".join(l.split()) for l in out.splitlines()[1:9]]


def package_version(name):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def conditions(build):
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu_model": cpu, "cpu_count": os.cpu_count(),
        "kernel": platform.release(),
        "legba": source_version(HERE), "legba_build": build,
        "packages": {p: package_version(p) for p in [
            "libgstreamer1.0-0", "gstreamer1.0-plugins-bad",
            "gstreamer1.0-plugins-good", "gstreamer1.0-nice", "libnice10",
            "gstreamer1.0-libav", "python3-aiortc", "python3-aioice",
            "python3-av", "golang-github-pion-webrtc.v3-dev",
            "golang-1.19-go", "libopus0", "libx264-164", "libvpx7"]},
        "shared_machine": True,
    }


# How a sanitizer's report begins: AddressSanitizer's, LeakSanitizer's (at
# exit) or UndefinedBehaviorSanitizer's.
SANITIZER_ERROR = re.compile(
    r"ERROR: (?:Address|Leak)Sanitizer|: runtime error: ")


def last_line(text):
    """The last line of a process's output, to say why it failed."""
    return (text.strip().splitlines() or ["?"])[-1]


def glib_criticals(text):
    """The GLib and GStreamer CRITICAL lines of a peer's standard error."""
    return [line.strip() for line in text.splitlines()
            if "-CRITICAL **" in line]


class Runner:
    def __init__(self, args):
        self.args = args
        self.runs = []
        self.run_ids = {}
        self.env = dict(os.environ, GST_PLUGIN_PATH=os.path.join(
            args.build, "plugins", "legba"), GST_DEBUG="*:1")
        # A peer that meets a CRITICAL says so in its record ("criticals")
        # and goes on, rather than aborting where a test run asked for
        # fatal criticals: the smoke test judges the lines.
        debug = [f for f in self.env.get("G_DEBUG", "").split(",")
                 if f and f != "fatal-criticals"]
        self.env["G_DEBUG"] = ",".join(debug)

    def command(self, peer, mode, opts):
        b = self.args.build
        if peer in ("legba", "legba-inproc", "legba-sync"):
            extra = {"legba-inproc": ["--in-process"],
                     "legba-sync": ["--sync-data"]}.get(peer, [])
            return [os.path.join(b, "bench", "legba-peer"), mode] + \
                extra + opts
        if peer in ("webrtcbin", "webrtcbin-tuned", "webrtcbin-1dc",
                    "webrtcbin-like"):
            extra = {"webrtcbin-tuned": ["--pacing", "1"],
                     "webrtcbin-like": ["--pacing", "1", "--like-legba"]
                     }.get(peer, [])
            return [os.path.join(b, "bench", "webrtcbin-peer"), mode] + \
                extra + opts
        if peer == "aiortc" and mode == "mesh":
            return [PY, os.path.join(HERE, "peers", "aiortc-mesh.py")] + opts
        if peer == "aiortc":
            return [PY, os.path.join(HERE, "peers", "aiortc-peer.py"),
                    mode] + opts
        if peer == "pion":
            return [self.args.pion, mode] + [
                o.replace("--", "-", 1) if o.startswith("--") else o
                for o in opts]
        raise ValueError(peer)

    def run(self, peer, cmd, label, timeout=300):
        started = time.time()
        record = {"peer": peer, "label": label, "command": cmd,
                  "started": started}
        try:
            proc = subprocess.run(cmd, env=self.env, capture_output=True,
                                  text=True, timeout=timeout)
            lines = [l for l in proc.stdout.splitlines()
                     if l.startswith("{")]
            if lines:
                record["result"] = json.loads(lines[-1])
            if glib_criticals(proc.stderr):
                record["criticals"] = glib_criticals(proc.stderr)
            if proc.returncode != 0 or not lines:
                record["error"] = (f"exit {proc.returncode}: "
                                   f"{last_line(proc.stderr)}")
        except subprocess.TimeoutExpired:
            record["error"] = f"timed out after {timeout} s"
        record["wall_s"] = time.time() - started
        self.runs.append(record)
        status = record.get("error") or "ok"
        print(f"  {label} {peer}: {status} ({record['wall_s']:.1f} s)",
              flush=True)
        return record.get("result")

    def rounds(self, peers, rounds, body):
        only = getattr(self.args, "peers", None)
        if only:
            peers = [p for p in peers if p in only.split(",")]
        for r in range(rounds):
            order = peers if r % 2 == 0 else list(reversed(peers))
            for peer in order:
                body(peer, r)


def add(series, metric, peer, value):
    if value is None:
        return
    series.setdefault(metric, {}).setdefault(peer, []).append(value)


def round_trip(r, series, peer, rnd, count, extra=()):
    """One run of a data-channel peer's rtt mode, 1 KiB at 100/s echoed:
    its p50, p95 and p99, and every sample."""
    res = r.run(peer, r.command(peer, "rtt", [
        "--count", str(count), "--rate", "100", "--size", "1024",
        *extra]), f"round {rnd} round trip")
    if res and res.get("complete"):
        add(series, "rtt_p50_ms", peer, pct(res["rtt_ms"], 50))
        add(series, "rtt_p95_ms", peer, pct(res["rtt_ms"], 95))
        add(series, "rtt_p99_ms", peer, pct(res["rtt_ms"], 99))
        series.setdefault("rtt_all_ms", {}).setdefault(
            peer, []).extend(res["rtt_ms"])


def add_in_run(r, series, metric, peer, value, run):
    """add(), for a metric with several samples a run (the participants
    of one mesh, the warm pairs or calls of one process): the run of each
    sample goes to the results' "run_ids", and the report's bootstrap
    resamples whole runs (stats.runs_of)."""
    if value is None:
        return
    add(series, metric, peer, value)
    r.run_ids.setdefault(metric, {}).setdefault(peer, []).append(run)


def pct(values, q):
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


# ---- suites ----

def suite_setup(r, q, series, notes):
    peers = ["legba", "legba-inproc", "webrtcbin", "webrtcbin-tuned",
             "webrtcbin-like", "aiortc", "pion"]
    iterations = 3 if q else 10

    def body(peer, rnd):
        res = r.run(peer, r.command(peer, "setup",
                                    ["--iterations", str(iterations)]),
                    f"round {rnd}")
        if res and res.get("setup_ms"):
            times = res["setup_ms"]
            add(series, "cold_ms", peer, times[0])
            # the warm pairs of one process share its run
            for t in times[1:]:
                add_in_run(r, series, "warm_ms", peer, t, rnd)
            # where the warm time goes (the C peers): -1 is a phase a
            # pair's webrtcbins did not both report
            for phase in ("joined", "described", "connected"):
                for t in res.get(f"{phase}_ms", [])[1:]:
                    if t >= 0:
                        add_in_run(r, series, f"warm_{phase}_ms", peer, t,
                                   rnd)
        if res and res.get("process_to_open_ms", -1) >= 0:
            add(series, "process_to_open_ms", peer,
                res["process_to_open_ms"])
    r.rounds(peers, 1 if q else 6, body)
    notes.append(f"Each run: a fresh process sets up {iterations} pairs in "
                 "turn; the first is the cold figure, the others warm (the "
                 "first iteration discarded). create -> data channel open "
                 "on both sides. Legba's first pair is timed from its "
                 "connect calls with the process's one-time work "
                 "(legba_room_prepare(): DTLS keys, GStreamer's first peer "
                 "connection) made and waited for before, as an "
                 "application does it at start; its process-start figure "
                 "is from main() to the first pair's open, that work "
                 "included. The other peers' first pair includes their "
                 "one-time work. webrtcbin-tuned: plain webrtcbin with "
                 "libnice's stun-pacing-timer at 1 ms, as Legba's rooms set "
                 "it; webrtcbin-like: the same with the session a pair of "
                 "Legba's rooms describes (receive-only video and audio "
                 "transceivers, the reliable data channel) and no ICE-TCP "
                 "host "
                 "candidates, as a room's default (webrtcbin-peer "
                 "--like-legba): Legba's like-for-like floor. Legba's "
                 "figure includes its signalling through the embedded "
                 "server over a WebSocket; legba-inproc is the same rooms "
                 "meeting through an in-process signaller (legba-peer "
                 "--in-process), no server; the others hand the "
                 "descriptions across in process. The phases (warm pairs, "
                 "ms from the start of the pair; bench/peers/phases.h): "
                 "both rooms joined (Legba), both webrtcbins' descriptions "
                 "applied (signaling-state stable again), both connected "
                 "(connection-state connected: ICE and DTLS done); what "
                 "follows until the data channels are open is SCTP and the "
                 "channels' own handshake.")


def suite_datachannel(r, q, series, notes):
    peers = ["webrtcbin", "aiortc", "pion"]
    bulk_bytes = 2 * 10**6 if q else 4 * 10**6
    count = 100 if q else 500
    short, long_ = (1000, 200) if q else (4000, 1000)

    def body(peer, rnd):
        res = r.run(peer, r.command(peer, "bulk", [
            "--bytes", str(bulk_bytes), "--size", "1024"]),
            f"round {rnd} bulk 1 KiB")
        if res and res.get("complete"):
            add(series, "bulk_mb_per_s", peer, res["mb_per_s"])
            add(series, "bulk_cpu_s_per_mb", peer, res["cpu_s_per_mb"])
        round_trip(r, series, peer, rnd, count)
        for size, n in ((64, short), (4096, long_)):
            res = r.run(peer, r.command(peer, "bulk", [
                "--bytes", str(size * n), "--size", str(size)]),
                f"round {rnd} messages of {size} B")
            if res and res.get("complete"):
                msgs = res["bytes"] / size
                add(series, f"cpu_us_per_msg_{size}", peer,
                    res["cpu_s"] * 1e6 / msgs)
    r.rounds(peers, 1 if q else 3, body)
    notes.append(
        f"Bulk: {bulk_bytes / 1e6:g} MB in 1 KiB messages on one reliable "
        "channel, sender paced by buffered-amount (at most 1 MiB queued). "
        f"Round trip: {count} messages of 1 KiB at 100/s, echoed by the "
        "other side. CPU per message: messages of 64 B and 4 KiB sent and "
        "received in the same process (both sides' cost together), "
        f"{short} and {long_} of them, process user+sys over the messages, "
        "raw bytes (no JSON).")


def suite_video_receive(r, q, series, notes):
    frames = 90 if q else 300
    sizes = ["720p"] if q else ["360p", "720p", "1080p"]
    dims = {"360p": (640, 360), "720p": (1280, 720), "1080p": (1920, 1080)}
    configs = [("gstreamer", c) for c in ("h264", "vp8")] + \
        [("aiortc", c) for c in ("h264", "vp8")]
    for size in sizes:
        w, h = dims[size]

        def body(cfg, rnd):
            peer, codec = cfg
            res = r.run(peer, [PY, os.path.join(HERE, "media.py"), "decode",
                               peer, codec, "--width", str(w), "--height",
                               str(h), "--frames", str(frames)],
                        f"{size} {codec} round {rnd}")
            if res and res["frames_out"] == res["frames_in"]:
                add(series, f"decode_ms_per_frame_{codec}_{size}", peer,
                    res["cpu_ms_per_frame"])
        r.rounds(configs, 1 if q else 3, body)
    notes.append(
        f"{frames} frames of scrolling SMPTE bars encoded first (x264enc "
        "ultrafast / vp8enc deadline=1, 1.5 Mbit/s, not timed), then "
        "decoded, timed: GStreamer's avdec_h264 and vp8dec (the decoders "
        "Legba's rooms and plain webrtcbin use; the row stands for both) "
        "against aiortc's H264Decoder and Vp8Decoder on the same bytes.")


def free_udp_port():
    """A UDP port of 127.0.0.1 that nothing holds now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pion_call(r, bench_cmd, label):
    """Pion's call: `pion-peer call` (two PeerConnections, one sending an
    H.264 track fed by RTP on a UDP port, the other forwarding what it
    receives to another) between the two halves of a legba-bench
    --send/--recv run. bench_cmd is the legba-bench command with {in_port}
    and {out_port} to fill. Returns legba-bench's result with the Pion
    process's own figures under "pion", or None."""
    out_port = free_udp_port()
    cmd = [r.args.pion, "call", "-out", str(out_port)]
    err = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=err, env=r.env, text=True)
    ready = select.select([proc.stdout], [], [], 60)[0]
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("{"):
        proc.kill()
        proc.wait()
        err.seek(0)
        tail = last_line(err.read())
        r.runs.append({"peer": "pion", "label": label, "command": cmd,
                       "started": time.time(), "wall_s": 0,
                       "error": f"pion-peer call did not connect: {tail}"})
        print(f"  {label} pion: pion-peer call did not connect", flush=True)
        return None
    in_port = json.loads(line)["in_port"]
    res = r.run("pion", [a.format(in_port=in_port, out_port=out_port)
                         for a in bench_cmd], label)
    record = r.runs[-1]
    record["pion_command"] = cmd
    proc.stdin.close()
    try:
        rest = proc.stdout.read()
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rest = ""
    lines = [l for l in rest.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        err.seek(0)
        record["error"] = (f"pion-peer call exit {proc.returncode}: "
                           f"{last_line(err.read())}")
        return None
    record["pion"] = json.loads(lines[-1])
    if res is not None:
        res["pion"] = record["pion"]
    return res


def call_source(width, height):
    """The video-call suite's sending line, up to the RTP payloader."""
    return ("videotestsrc is-live=true pattern=smpte horizontal-speed=4 ! "
            f"video/x-raw,format=I420,width={width},height={height},"
            "framerate=30/1 ! legbastamp ! x264enc name=enc "
            "tune=zerolatency speed-preset=ultrafast bitrate=1500 "
            "key-int-max=60 ! rtph264pay config-interval=-1")


CALL_DECODE = ("rtph264depay ! avdec_h264 ! legbastampcheck ! "
               "fakesink sync=false")


def pion_call_command(build, frames, width=1280, height=720, extra=()):
    """legba-bench's command for Pion's call: the floor's line cut after
    the payloader, its two halves joined over UDP through pion-peer call
    (pion_call fills {in_port} and {out_port})."""
    return [os.path.join(build, "tools", "legba-bench"), "--json",
            "--frames", str(frames), "--warmup", "10", *extra,
            "--send", f"{call_source(width, height)} ! udpsink "
            "host=127.0.0.1 port={in_port} sync=false",
            "--recv", "udpsrc address=127.0.0.1 port={out_port} "
            "caps=\"application/x-rtp,media=video,clock-rate=90000,"
            "encoding-name=H264,payload=96\" ! rtpjitterbuffer latency=100 "
            f"! {CALL_DECODE}"]


def suite_video_call(r, q, series, notes):
    frames = 90 if q else 300
    floor = f"{call_source(1280, 720)} ! {CALL_DECODE}"
    bench_tool = os.path.join(r.args.build, "tools", "legba-bench")
    pion_cmd = pion_call_command(r.args.build, frames)

    call_opts = ["--frames", str(frames), "--width", "1280", "--height",
                 "720"]
    # peer: (the C peer it runs, the receiving jitter buffer in ms, the
    # name its synced_* figures go under)
    synced = {"legba-synced": ("legba", 20, "legba"),
              "legba-synced-100": ("legba", 100, "legba-100ms"),
              "webrtcbin-synced": ("webrtcbin", 20, "webrtcbin")}

    def add_percentiles(prefix, name, res):
        """The latency samples after the first 10, as p50/p95/p99 under
        prefix; the samples, or None when there are too few."""
        if not res or len(res.get("latency_ms") or []) <= 10:
            return None
        lat = res["latency_ms"][10:]
        for rank in (50, 95, 99):
            add(series, f"{prefix}_p{rank}_ms", name, pct(lat, rank))
        return lat

    def body(peer, rnd):
        if peer in synced:
            stack, ms, name = synced[peer]
            res = r.run(peer, r.command(stack, "call", call_opts + [
                "--bitrate", "1500", "--sync", "--latency", str(ms)]),
                f"round {rnd}")
            add_percentiles("synced", name, res)
        elif peer == "legba-recalc":
            res = r.run(peer, r.command("legba", "call", call_opts + [
                "--bitrate", "1500", "--recalculate-latency"]),
                f"round {rnd}")
            add_percentiles("latency", peer, res)
        elif peer in ("webrtcbin", "legba", "aiortc"):
            cmd = ([PY, os.path.join(HERE, "peers", "aiortc-call.py")] +
                   call_opts if peer == "aiortc" else
                   r.command(peer, "call", call_opts + ["--bitrate", "1500"]))
            res = r.run(peer, cmd, f"round {rnd}")
            if res and "failed" in res:
                add(series, "stamps_unreadable_pct", peer,
                    100.0 * res["failed"] / max(res["frames"], 1))
                add(series, "frames_lost_pct", peer,
                    100.0 * res["lost"] / max(res["frames"], 1))
            lat = add_percentiles("latency", peer, res)
            if lat is not None:
                add(series, "latency_samples", peer, len(lat))
                series.setdefault("latency_all_ms", {}).setdefault(
                    peer, []).extend(lat)
            if res and res.get("complete"):
                add(series, "call_cpu_ms_per_frame", peer,
                    res.get("cpu_ms_per_frame"))
                if res.get("bitrate_bps"):
                    add(series, "bitrate_kbps", peer,
                        res["bitrate_bps"] / 1000)
        else:
            if peer == "pion":
                res = pion_call(r, pion_cmd, f"round {rnd}")
            else:
                res = r.run(peer, [bench_tool, "--json", "--frames",
                                   str(frames), "--warmup", "10", floor],
                            f"round {rnd}")
            if res and res.get("latency_ms", {}).get("n"):
                lat = res["latency_ms"]
                add(series, "latency_p50_ms", peer, lat["p50"])
                add(series, "latency_p95_ms", peer, lat["p95"])
                add(series, "latency_p99_ms", peer, lat.get("p99"))
                cpu = res.get("cpu_ms_per_frame")
                if peer == "pion" and cpu is not None:
                    # Pion's process, from the first packet in to the
                    # last out, over the frames stamped in that time
                    fwd = res["pion"].get("cpu_s")
                    cpu = None if fwd is None else \
                        cpu + 1000 * fwd / max(res["frames_in_total"], 1)
                add(series, "call_cpu_ms_per_frame", peer, cpu)
                series.setdefault("latency_all_ms", {}).setdefault(
                    peer, []).extend(lat.get("series") or [])
                if res.get("bitrate_bps"):
                    add(series, "bitrate_kbps", peer,
                        res["bitrate_bps"] / 1000)
    r.rounds(["rtp-floor", "webrtcbin", "legba", "aiortc", "pion",
              "legba-recalc", "webrtcbin-synced", "legba-synced",
              "legba-synced-100"],
             1 if q else 4, body)
    notes.append(
        f"720p30 H.264 (x264enc ultrafast zerolatency, 1.5 Mbit/s), "
        f"{frames} frames, the first 10 left out: the time from legbastamp "
        "(before the encoder) to legbastampcheck (after the decoder), one "
        "clock. rtp-floor: the same line with RTP payloading and "
        "depayloading and no network (legba-bench, one pipeline). "
        "webrtcbin: two webrtcbins in one process on loopback (ICE, DTLS, "
        "SRTP, the jitter buffer at 100 ms, as Legba's rooms set it). "
        "legba: two LegbaRooms through the embedded server, room a sending "
        "the stamped H.264 track, room b decoding it. Latency samples are "
        "the frames whose stamp was read; frames whose stamp failed its "
        "check and frames lost are counted beside them (as a percentage "
        "of the frames out). aiortc: two RTCPeerConnections in one "
        "process on loopback, its own H264Encoder (libx264 through PyAV at "
        "aiortc's settings: zerolatency, its own target of 0.5-3 Mbit/s "
        "moved by REMB, not the 1.5 Mbit/s cap; the bitrate it reached is "
        "in the table) and H264Decoder and its jitter buffer; the same "
        "source line (videotestsrc, legbastamp) feeds its track from an "
        "appsink holding one frame (when aiortc encodes slower than 30 "
        "fps the source waits, and a frame's latency includes its wait in "
        "that slot), and each decoded frame is pushed in the same thread "
        "into legbastampcheck (bench/peers/aiortc-call.py). pion: a call "
        "as an application on Pion makes one (Pion has no codecs; its "
        "own examples feed it RTP from GStreamer): the rtp-floor line cut "
        "after the payloader, its RTP sent over UDP on 127.0.0.1 to a "
        "Pion process (pion-peer call: two PeerConnections on loopback, "
        "Pion's default codecs and interceptors, NACK included), which "
        "sends it as an H.264 track and forwards the packets the other "
        "side receives over UDP to the receiving half (a jitter buffer "
        "at 100 ms, then the floor's depayloader and decoder); both "
        "halves in one legba-bench process, one clock. CPU per frame: "
        "process user+sys over the frames received, both ends and the "
        "source in one process (rtp-floor: legba-bench's figure over "
        "its measured frames; pion: legba-bench's figure plus the Pion "
        "process's user+sys from the first packet it took to the last it "
        "forwarded, over the frames stamped in that time). legba-recalc: legba with the sender's "
        "pipeline recomputing its latency once the receiver has decoded "
        "10 frames (as a sink added to it later would make it do; "
        "webrtcbin then learns the encoder's latency, docs/rooms.md). "
        "Bitrate: the bytes out of x264enc over the "
        "span of their timestamps, for every peer but aiortc as "
        "legba-bench counts it on the RTP floor (aiortc: its sender's "
        "outbound-rtp bytesSent from getStats over the measured "
        "seconds). To a clock-synced sink (synced_*): the "
        "same calls with the stamps read after a clocksync and before a "
        "sink with sync=true, where a display would show each frame: "
        "its time on the pipeline clock plus the pipeline's latency, of "
        "which the receiver's jitter buffer is most; legba and webrtcbin "
        "with the receiving jitter buffer at 20 ms (the room's `latency` "
        "property, webrtcbin's `latency`), legba-100ms at the room's "
        "default of 100 ms.")


def suite_audio(r, q, series, notes):
    counts = [1, 10] if q else [1, 10, 50]
    seconds = 2 if q else 5
    for n in counts:
        def body(peer, rnd):
            got = {}
            for floor in (False, True):
                res = r.run(peer, [PY, os.path.join(HERE, "media.py"),
                                   "audio", peer, "--streams", str(n),
                                   "--seconds", str(seconds)] +
                            (["--floor"] if floor else []),
                            f"{n} streams{' floor' if floor else ''} "
                            f"round {rnd}")
                if res:
                    got[floor] = res["cpu_s"]
            if len(got) == 2:
                add(series, f"opus_cpu_pct_per_stream_{n}", peer,
                    (got[False] - got[True]) / seconds / n * 100)
        r.rounds(["gstreamer", "aiortc"], 1 if q else 3, body)
    notes.append(
        f"N streams of {seconds} s of 48 kHz stereo encoded to Opus in 20 ms "
        "frames as fast as they go: CPU per stream as a percentage of one "
        "core in real time, net of the same run without the encoder. "
        "GStreamer's opusenc is the encoder Legba's rooms use (the row "
        "stands for Legba and plain webrtcbin); aiortc: its OpusEncoder.")


def suite_scale(r, q, series, notes):
    count, seconds = (10, 30) if q else (1500, 600)
    # legba-inproc: the same rooms through an in-process signaller, no
    # WebSocket a pair, as plain webrtcbin's pairs hand their descriptions
    # across in process
    peers = ["legba", "legba-inproc", "webrtcbin", "webrtcbin-1dc",
             "aiortc", "pion"]
    census = {}

    def body(peer, rnd):
        opts = ["--count", str(count), "--seconds", str(seconds)]
        if peer in ("legba", "legba-inproc", "webrtcbin", "webrtcbin-1dc"):
            # stopping the pairs one by one is not measured, and takes
            # minutes at a thousand pairs
            opts += ["--no-teardown"]
        server = None
        if peer == "legba":
            # the signalling server of its own process, as in a deployment:
            # its sockets are not the rooms' process's
            server = LegbaServerProcess(r.args.build, r.args.workdir)
            opts += ["--server-url", server.url]
        elif peer == "webrtcbin":
            opts += ["--like-legba"]
        try:
            res = r.run(peer, r.command(peer, "pairs", opts),
                        f"round {rnd}", timeout=seconds + 600)
        finally:
            if server is not None:
                server.stop()
        if res:
            add(series, "pairs_connected", peer, res["connected"])
            if res["connected"] and res.get("seconds"):
                add(series, "pairs_setup_ms_per_pair", peer,
                    res["seconds"] * 1000 / res["connected"])
            for k in ("rss_kib_per_pair", "fds_per_pair",
                      "threads_per_pair"):
                if res.get(k) is not None:
                    add(series, k, peer, res[k])
            if res.get("census"):
                census[peer] = res["census"]
            if res.get("stopped") != "count":
                notes.append(f"{peer}: stopped at {res['connected']} pairs "
                             f"({res['stopped']}).")
    # one round at full size by default: a run sets up pairs for up to ten
    # minutes (bench/run.sh --scale-rounds N for more)
    r.rounds(peers, 1 if q else r.args.scale_rounds, body)
    for peer, c in census.items():
        per = c["per_pair_after_first"]
        if not per.get("pairs"):
            continue
        fds = ", ".join(f"{k} {v:g}" for k, v in sorted(
            per["fds"].items(), key=lambda kv: -kv[1]) if v > 0)
        threads = ", ".join(f"{k} {v:g}" for k, v in sorted(
            per["threads"].items(), key=lambda kv: -kv[1]) if v > 0)
        notes.append(f"{peer}, what each pair after the first added "
                     f"(/proc/self/fd and /proc/self/task, over "
                     f"{per['pairs']} pairs): fds {fds}; threads {threads}.")
    notes.append(
        f"Pairs set up one after the other in one process, up to {count} "
        f"or {seconds} s (a time bound of this suite, not a limit of any "
        "peer), or until the next pair would not fit the process's "
        "open-files limit or the machine's thread ids or the process's "
        "memory mappings (the C peers check before each pair and stop "
        "with the reason; a process that ran out would abort inside GLib); "
        "per-pair RSS, file descriptors and threads over the pairs "
        "connected; the setup time per pair is the time all of them took "
        "over their number (a pair set up late waits longer: every pair "
        "already up adds to the process's load, and each peer stops at its "
        "own count; the plain webrtcbin pairs pace their ICE checks at "
        "libnice's default 20 ms, Legba's rooms at 1 ms with a 1 s idle "
        "timeout, their defaults: with few pairs that, not the "
        "signalling, makes the difference, and the setup suite compares "
        "them alike). Heap separately: not measured (RSS only; native media "
        "memory is not heap anyway). The same session for Legba and "
        "webrtcbin: webrtcbin here is webrtcbin-peer --like-legba, a "
        "video and an audio transceiver, receive-only, on each side and "
        "the data channel legba (reliable; a room opens legba-lossy only "
        "to send on it), what a pair of Legba's rooms negotiates when "
        "neither publishes nor sends lossy data (docs/room-protocol.md §5 "
        "and §6), "
        "and no ICE-TCP host candidates, as a room's default; "
        "webrtcbin-1dc is the plain pair this section reported before, "
        "one reliable data channel and no transceiver (ICE-TCP on, "
        "webrtcbin's default). Each pair is one "
        "pipeline (Legba: both rooms' bins in it). webrtcbin gets a unique "
        "SCTP association id per webrtcbin, as Legba's rooms do. Legba's "
        "pairs include their two signalling clients' WebSockets; the "
        "signalling server is a legba-server process of its own. "
        "legba-inproc's rooms meet through an in-process signaller "
        "(legba-peer --in-process): no WebSocket. The C "
        "peers exit once their figures are printed, their pairs still up "
        "(--no-teardown): stopping them one by one is not measured here.")


def suite_footprint(r, q, series, notes):
    b = r.args.build
    files = {
        "liblegba-gst-1.0.so": os.path.join(
            b, "lib", "legba", "liblegba-gst-1.0.so.0.0.0"),
        "libgstlegba.so (plugin)": os.path.join(
            b, "plugins", "legba", "libgstlegba.so"),
    }
    sizes = {}
    for name, path in files.items():
        out = path + ".stripped"
        subprocess.run(["strip", "-o", out, path], check=True)
        sizes[name] = os.path.getsize(out)
        os.unlink(out)
    for name, path in {
            "libgstwebrtc.so (system, for scale)":
            "/usr/lib/x86_64-linux-gnu/gstreamer-1.0/libgstwebrtc.so",
            "libgstwebrtc-1.0.so.0 (system, for scale)":
            "/usr/lib/x86_64-linux-gnu/libgstwebrtc-1.0.so.0"}.items():
        if os.path.exists(path):
            sizes[name] = os.path.getsize(os.path.realpath(path))
    for name, size in sizes.items():
        add(series, "stripped_bytes", name, size)
    notes.append("Stripped size (strip -o) of the release build's library "
                 "and plugin; the system's webrtc plugin and library as "
                 "shipped (already stripped), for scale.")


# ---- data: Legba's data channels (issue: data-channel adaptation) ----

DATA_CPU_CONFIGS = {"send": ["floor", "json-glib", "legba"],
                    "recv": ["floor", "json-glib", "legba", "legba-burst",
                             "json-glib-hop", "legba-sync"]}


class LegbaServerProcess:
    """A real legba-server of its own process on 127.0.0.1, port 0."""

    def __init__(self, build, workdir, extra=()):
        self.workdir = workdir
        conf = os.path.join(workdir, "legba.conf")
        with open(conf, "w") as f:
            f.write("[limits]\nclient-events-per-second=0\n"
                    "max-connections=0\n\n[app bench]\nid=bench\n"
                    "key=bench-key\nsecret=bench-secret\n")
        self.log = open(os.path.join(workdir, "legba-server.log"), "w+")
        self.proc = subprocess.Popen(
            [os.path.join(build, "tools", "legba-server"), "--config", conf,
             "--bind", "127.0.0.1", "--port", "0"] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            self.log.seek(0)
            for line in self.log:
                if line.startswith("legba-server listening on "):
                    port = int(line.strip().rsplit(":", 1)[1])
                    self.url = f"ws://127.0.0.1:{port}"
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.url is None:
            self.stop()
            raise RuntimeError("legba-server did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def callgrind_ir(r, cmd, label, timeout=600):
    """Instructions (Ir) counted in measured_batch() only."""
    out = os.path.join(r.args.workdir, "callgrind.out")
    full = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
            "--toggle-collect=measured_batch",
            f"--callgrind-out-file={out}"] + cmd
    res = r.run("callgrind", full, label, timeout=timeout)
    total = None
    if res is not None and os.path.exists(out):
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
        os.unlink(out)
    return res, total


def suite_data(r, q, series, notes):
    exe = os.path.join(r.args.build, "bench", "data-cpu")
    smoke = r.args.smoke
    rounds = 1 if (q or smoke) else 2
    batches = 2 if smoke else (6 if q else 30)
    sizes = {"short": 2000, "4k": 200}
    if smoke:
        sizes = {"short": 20, "4k": 5}

    def checked(res, d, n_configs, batch, nbatches):
        # every message went the whole way: into the transport's hand-over
        # (send) or to the application's handler (recv); the +1 on send is
        # the room's own first message (its mute state)
        total = (nbatches + 1) * batch * n_configs
        if d == "send":
            return res.get("sink_msgs") == total + 1
        return res.get("app_msgs") == total

    # 1. the library's own CPU, timed in batches
    msg_bytes = {}
    for rnd in range(rounds):
        for d in ("send", "recv"):
            for size, batch in sizes.items():
                res = r.run("data-cpu", [exe, "--dir", d, "--size", size,
                                         "--batches", str(batches),
                                         "--batch", str(batch)],
                            f"round {rnd} {d} {size}")
                if res is None:
                    continue
                if not checked(res, d, len(DATA_CPU_CONFIGS[d]), batch,
                               batches):
                    r.runs[-1]["error"] = "message counts do not add up"
                    continue
                for config, values in res["ns_per_msg"].items():
                    series.setdefault(f"cpu_ns_{d}_{size}", {}).setdefault(
                        config, []).extend(values)
                msg_bytes[size] = (res["data_bytes"], res["wire_bytes"])
    # the same, counted in instructions (deterministic: one run each)
    if shutil.which("valgrind") and not smoke:
        cg_sizes = {"short": 1000, "4k": 100}
        for d in ("send", "recv"):
            for size, batch in cg_sizes.items():
                for config in DATA_CPU_CONFIGS[d]:
                    res, total = callgrind_ir(
                        r, [exe, "--dir", d, "--size", size, "--batches", "1",
                            "--batch", str(batch), "--only", config],
                        f"callgrind {d} {size} {config}")
                    if res is not None and total is not None:
                        add(series, f"ir_{d}_{size}", config, total / batch)
    elif not smoke:
        notes.append("Instruction counts: not measured (valgrind is "
                     "missing: bench/setup.sh installs it).")

    # 2. end to end through a legba-server process, and 3. memory
    server = LegbaServerProcess(r.args.build, r.args.workdir)
    try:
        url = ["--server-url", server.url]
        bulk_bytes = 200 * 1024 if smoke else (1 * 10**6 if q else 4 * 10**6)
        count = 5 if smoke else (50 if q else 500)
        rtt_rounds = 1 if (q or smoke) else 12
        pairs = 2 if smoke else (4 if q else 20)

        def memory(peer, rnd, extra):
            res = r.run(peer, r.command(peer, "pairs", [
                "--count", str(pairs), "--seconds", "300"] + extra),
                f"round {rnd} {pairs} pairs", timeout=400)
            if res and res.get("stopped") == "count":
                add(series, "rss_kib_per_pair", peer, res["rss_kib_per_pair"])
                for k in ("heap_kib_per_pair",
                          "heap_kib_per_pair_after_first"):
                    if res.get(k):
                        add(series, k, peer, res[k])

        def body(peer, rnd):
            if peer == "webrtcbin-1dc":
                # memory only: the one-channel pair, for comparison
                memory(peer, rnd, [])
                return
            extra = url if peer == "legba" else []
            res = r.run(peer, r.command(peer, "bulk", [
                "--bytes", str(bulk_bytes), "--size", "1024"] + extra),
                f"round {rnd} bulk 1 KiB")
            if res and res.get("complete"):
                add(series, "bulk_mb_per_s", peer, res["mb_per_s"])
                add(series, "bulk_cpu_s_per_mb", peer, res["cpu_s_per_mb"])
            # memory like for like: plain webrtcbin with Legba's session
            memory(peer, rnd, extra if peer == "legba" else ["--like-legba"])
        r.rounds(["legba", "webrtcbin", "webrtcbin-1dc"],
                 1 if (q or smoke) else 5, body)
        # the round trip, in rounds of its own: each is a few seconds, and
        # a p50 per run wants more runs than the rest to settle. legba-sync:
        # both rooms on sync-bytes-received, the echo sent from there
        r.rounds(["legba", "legba-sync", "webrtcbin"], rtt_rounds,
                 lambda peer, rnd: round_trip(
                     r, series, peer, rnd, count,
                     url if peer.startswith("legba") else []))
    finally:
        server.stop()
    notes.append(
        "CPU per message (bench/data/data-cpu.c): the transport left out; "
        "the same message three ways: floor = the envelope's bytes encoded "
        "beforehand and handed over (send) or reported by plain webrtcbin "
        "(receive); json-glib = plain webrtcbin with json-glib building and "
        "serializing the envelope {\"topic\", \"data\"} (send) or parsing it "
        "and checking its members (receive), the baseline; legba = "
        "legba_room_send_json() to the hand-over to the channel, and "
        "from SCTP to data-received, through LegbaRoom's own code "
        "with one participant whose channels are open. Receiving starts "
        "where SCTP hands a message over (a buffer with its receive meta "
        "pushed on the channel's stream, as sctpdec does): plain webrtcbin's "
        "path is its data channel's (an appsink, the text copied out, a "
        "task on webrtcbin's thread emitting on-message-string), Legba's is "
        "the room's tap on the stream; webrtcbin's tasks and the room's "
        "reports run on the measuring thread's context. Receive also: "
        "legba-burst (a batch's messages arrive before the room's context "
        "runs: one dispatch for all) and json-glib-hop (json-glib plus the "
        "hand-over to the application's main context that the room does) and "
        "legba-sync (the application handles the messages on the thread "
        "they arrive on, LegbaRoom::sync-data-received, alone: no "
        "hand-over). "
        "Messages (data bytes / on the wire with the envelope): " +
        ", ".join(f"{k} {v[0]} / {v[1]}" for k, v in msg_bytes.items()) +
        ". Timed on the thread's CPU clock in batches of "
        f"{sizes['short']} (short) and {sizes['4k']} (4k) messages, "
        f"{batches} batches per configuration per process, the "
        "configurations alternating batch by batch (A B C, C B A) after a "
        f"warm-up batch, {rounds} process(es); each batch is one sample. "
        "Instructions: callgrind, one run per row, counting measured_batch() "
        "only (the warm-up left out), over its messages. End to end: two "
        "LegbaRooms in one process through a legba-server process on "
        "127.0.0.1 (binary messages of 1 KiB, legba_room_send_bytes) "
        "against two plain webrtcbins in one process, alternating, "
        f"{bulk_bytes / 1e6:g} MB bulk and {count} messages at 100/s "
        "echoed (Legba with bytes-received on the rooms' main context; "
        "legba-sync with sync-bytes-received, the echo sent from the "
        "thread the message arrived on, as plain webrtcbin's echo is sent "
        "from webrtcbin's; the round trip in rounds of its own, "
        f"{rtt_rounds} run(s) a configuration); "
        f"memory: {pairs} pairs set up in one process (plain "
        "webrtcbin with the session a pair of Legba's rooms negotiates: "
        "webrtcbin-peer --like-legba, its receive-only video and audio "
        "transceivers and its reliable channel; webrtcbin-1dc is the "
        "pair of the other rows, with no transceiver, for comparison), "
        "heap in use "
        "(mallinfo2: every arena, mmapped blocks included) and RSS per "
        "pair, and the heap per pair after the first one (what one more "
        "pair adds, once the process-wide state is made); every pair's "
        "pipeline drops its bus messages, as an application that reads its "
        "bus keeps none of them. Native memory (GStreamer's buffer pools, libnice, OpenSSL "
        "and GLib slices are all malloc here) is in both figures; "
        "memory mapped outside malloc (thread stacks) is in RSS only.")


# ---- first-frame and mesh: a call's first frame, a 4-way mesh ----

VIDEO_OPTS = ["--width", "640", "--height", "360", "--bitrate", "1000"]


def suite_first_frame(r, q, series, notes):
    smoke = r.args.smoke
    iterations = 2 if (q or smoke) else 5
    rounds = 1 if (q or smoke) else 5
    opts = ["--iterations", str(iterations)] + VIDEO_OPTS

    def body(peer, rnd):
        res = r.run(peer, r.command(peer, "first-frame", opts),
                    f"round {rnd}", timeout=60 + 70 * iterations)
        if not res:
            return
        for i, t in enumerate(res.get("first_frame_ms") or []):
            if t >= 0 and i == 0:
                add(series, "first_frame_cold_ms", peer, t)
            elif t >= 0:
                add_in_run(r, series, "first_frame_warm_ms", peer, t, rnd)
    r.rounds(["legba", "webrtcbin"], rounds, body)
    notes.append(
        f"Two participants, 640x360 at 30 fps: one sends a moving zone "
        "plate (videotestsrc pattern=zone-plate kx2=20 ky2=20 kt=1, "
        "legbastamp, x264enc ultrafast zerolatency, 1 Mbit/s, a key frame "
        "at least every 60 frames), the other decodes it (avdec_h264). "
        f"Each run: a fresh process, {iterations} calls in turn; the first "
        "is the cold figure, the others warm. legba: two LegbaRooms "
        "through the embedded LegbaServer, each with its pipeline already "
        "playing; timed from the first of the two legba_room_connect_async "
        "calls (made back to back) to the first frame out of the "
        "receiver's decoder, one clock. Legba's one-time work "
        "(legba_room_prepare()) is made and waited for before the first "
        "call, as in the setup suite; everything after the connect call is "
        "in: the signalling over a WebSocket, ICE, DTLS, the key frame the "
        "receiving room asks for (a PLI) when its track is linked, the "
        "jitter buffer (100 ms) and the decoder. webrtcbin: two plain "
        "webrtcbins in one process (descriptions and candidates handed "
        "across directly, no signalling server), the same sender line "
        "and jitter-buffer latency, timed from setting the pipeline to "
        "PLAYING (which starts the negotiation and the encoder) to the "
        "first frame out of the decoder; its first call includes "
        "GStreamer's one-time work (the DTLS certificate).")


def proc_cpu_s(pid):
    """user+sys of a process from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# What a mesh participant prints on standard error when one of its peer
# connections failed for good: plain webrtcbin's at its first failure (it
# has no other), a room's once the fresh connection that replaced a failed
# one failed too (docs/room-protocol.md §3).
CONNECTION_FAILED = ("mesh: the connection with ",
                     "room error: Could not connect to participant ")


def first_connection_failure(text):
    """The first line of a participant's standard error saying a peer
    connection of its own failed for good, stripped, or None."""
    return next((line.strip() for line in text.splitlines()
                 if line.startswith(CONNECTION_FAILED)), None)


class MeshProcess:
    """One participant of the mesh, driven through its standard input,
    read line by line from its standard output. legba: legba-peer mesh,
    through the legba-server at url. webrtcbin: webrtcbin-peer mesh, whose
    signalling lines ({"to": ID, ...}) are handed to route."""

    def __init__(self, r, peer, identity, others, url=None, route=None,
                 loss=0.0):
        self.identity = identity
        self.route = route
        if peer == "legba":
            opts = ["--server-url", url, "--identity", identity,
                    "--expect", str(len(others))]
        else:
            opts = ["--identity", identity, "--peers", ",".join(others)]
        if loss > 0:
            opts += ["--loss", str(loss)]
        self.cmd = r.command(peer, "mesh", opts + VIDEO_OPTS)
        self.err_path = os.path.join(r.args.workdir, f"{identity}.err")
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                self.cmd, env=r.env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        self.buf = ""
        self.lines = []
        self.failure = None

    def poll_lines(self):
        """Lines ready on stdout now (non-blocking)."""
        while select.select([self.proc.stdout], [], [], 0)[0]:
            chunk = os.read(self.proc.stdout.fileno(), 65536).decode()
            if not chunk:
                break
            self.buf += chunk
        *done, self.buf = self.buf.split("\n")
        for line in done:
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if "to" in msg and self.route:
                self.route(self.identity, msg)
            else:
                self.lines.append(msg)
        return self.lines

    def event(self, name=None, mode=None):
        for line in self.poll_lines():
            if (name and line.get("event") == name) or \
                    (mode and line.get("mode") == mode):
                return line
        return None

    def send(self, command):
        """A line to its standard input; False if it has closed it."""
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def stderr(self):
        """Its standard error so far (read through a file of our own: the
        process writes at its own offset)."""
        with open(self.err_path) as f:
            return f.read()

    def stderr_tail(self):
        return last_line(self.stderr())

    def criticals(self):
        return glib_criticals(self.stderr())

    def connection_failure(self):
        """The line in which it said a peer connection of its own failed
        for good, or None (once said, it stands: not read again)."""
        if self.failure is None:
            self.failure = first_connection_failure(self.stderr())
        return self.failure

    def close(self):
        """Ends its input (it leaves the room and exits); None if it
        exited with 0, else what went wrong."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            # a sanitizer's report takes long to symbolize on a busy
            # machine: it is let finish, so that it says where
            try:
                if SANITIZER_ERROR.search(self.stderr()):
                    self.proc.wait(300)
            except subprocess.TimeoutExpired:
                pass
            if self.proc.returncode is None:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        problem = (None if rc == 0 else
                   f"{self.identity} exit {rc}: {self.stderr_tail()}")
        self.proc.stdout.close()
        return problem

    def sanitizer_report(self):
        """Its sanitizer's report, whole, or None."""
        text = self.stderr()
        found = SANITIZER_ERROR.search(text)
        return None if found is None else \
            text[text.rfind("\n", 0, found.start()) + 1:]


# How long a mesh is still waited for once one of its participants said a
# connection of its own failed. The other end of that connection does not
# always say so (in the plain-webrtcbin failures seen, one side gave up on
# ICE while the other still waited), and it never decodes that stream:
# without this it would hold the mesh to its 240 s deadline.
FAILED_GRACE_S = 60


def wait_all(procs, found, seconds, ended=None, grace=0):
    """Reads every process's output (handing signalling lines on as they
    come) until found(p) holds for every process or the deadline; the
    processes that have not. ended (asked after found, each round): once
    it holds, the deadline comes grace seconds later at the latest."""
    deadline = time.monotonic() + seconds
    while True:
        for p in procs:
            p.poll_lines()
        missing = [p for p in procs if not found(p)]
        if ended is not None and ended():
            deadline = min(deadline, time.monotonic() + grace)
            ended = None
        if not missing or time.monotonic() > deadline:
            return missing
        if any(p.proc.poll() is not None for p in missing):
            return missing
        select.select([p.proc.stdout for p in procs
                       if p.proc.poll() is None], [], [], 0.1)


def mesh_run(r, peer, n, window, settle, label, loss=0.0):
    """One mesh of n fresh processes of peer: legba through a fresh
    legba-server process, webrtcbin with this driver as its signalling
    (each line handed on as it is read); loss: each process drops the
    RTP packets it sends with that probability."""
    record = {"peer": peer, "label": label, "started": time.time(),
              "participants": n, "window_s": window, "settle_s": settle,
              "loss": loss}
    server = None
    procs = []
    ids = [f"p{i}" for i in range(n)]
    by_id = {}
    relayed = {"offer": 0, "answer": 0, "candidate": 0}

    def route(sender, msg):
        to = by_id.get(msg.pop("to"))
        relayed[msg.get("type")] = relayed.get(msg.get("type"), 0) + 1
        if to is not None:
            msg["from"] = sender
            to.send(json.dumps(msg))

    try:
        if peer == "legba":
            server = LegbaServerProcess(r.args.build, r.args.workdir)
            procs = [MeshProcess(r, peer, i, [o for o in ids if o != i],
                                 url=server.url, loss=loss) for i in ids]
        else:
            procs = [MeshProcess(r, peer, i, [o for o in ids if o != i],
                                 route=route, loss=loss) for i in ids]
            record["relayed"] = relayed
        by_id.update((p.identity, p) for p in procs)
        record["command"] = [p.cmd for p in procs]
        t0 = time.monotonic()
        # each participant decodes every stream, or says a connection of
        # its own failed (no stream comes of that one: no use waiting);
        # once one has, the others have FAILED_GRACE_S more (the
        # failures found has just read, not read again)
        missing = wait_all(procs, lambda p: p.event(name="decoding") or
                           p.connection_failure(), 240,
                           ended=lambda: any(p.failure for p in procs),
                           grace=FAILED_GRACE_S)
        failures = [f"{p.identity}: {p.connection_failure()}" for p in procs
                    if p.connection_failure()]
        if failures:
            record["error"] = ("a peer connection failed: " +
                               "; ".join(failures))
            record["connection_failed"] = True
            # the participants that decode every stream all the same
            record["decoding"] = sorted(p.identity for p in procs
                                        if p.event(name="decoding"))
            return record
        if missing:
            record["error"] = ("not every stream decoded within 240 s: " +
                               ", ".join(f"{p.identity} ({p.stderr_tail()})"
                                         for p in missing))
            return record
        record["all_decoding_s"] = time.monotonic() - t0
        record["decoding_ms"] = {p.identity: p.event(name="decoding")["ms"]
                                 for p in procs}
        wait_all(procs, lambda p: False, settle)
        record["load_window_start"] = loadavg()
        if server:
            server_cpu = proc_cpu_s(server.proc.pid)
        for p in procs:
            p.send("start")
        w0 = time.monotonic()
        wait_all(procs, lambda p: False, window)
        for p in procs:
            p.send("stop")
        if server:
            record["server_cpu_pct"] = 100 * (
                proc_cpu_s(server.proc.pid) - server_cpu) / (
                time.monotonic() - w0)
        record["load_window_end"] = loadavg()
        # a process closes its window once each of its streams has given
        # a frame in it: a starved stream holds it open
        missing = wait_all(procs, lambda p: p.event(mode="mesh"), 300)
        if missing:
            record["error"] = "no window result from " + ", ".join(
                f"{p.identity} ({p.stderr_tail()})" for p in missing)
            return record
        record["result"] = [p.event(mode="mesh") for p in procs]
    finally:
        criticals = [f"{p.identity}: {line}" for p in procs
                     for line in p.criticals()]
        if criticals:
            record["criticals"] = criticals
        problems = [x for x in (p.close() for p in procs) if x]
        if problems and "error" not in record:
            record["error"] = "; ".join(problems)
        reports = [x for x in (p.sanitizer_report() for p in procs) if x]
        if reports:
            record["sanitizer"] = reports
        if server:
            server.stop()
        record["wall_s"] = time.time() - record["started"]
        r.runs.append(record)
        print(f"  {label} {peer} mesh: {record.get('error') or 'ok'} "
              f"({record['wall_s']:.1f} s)", flush=True)
    return record


def mesh_body(r, series, n, window, settle, loss=0.0):
    """A round's body for r.rounds: one mesh of the peer, its figures
    added to series."""
    def body(peer, rnd):
        record = mesh_run(r, peer, n, window, settle, f"round {rnd}", loss)
        for again in (", again", ", again twice"):
            # a connection of the peer itself failed (plain webrtcbin's,
            # now and then, under load): the failed mesh stays among the
            # runs (the report lists it), and the round is run again,
            # twice at most
            if not record.get("connection_failed"):
                break
            record = mesh_run(r, peer, n, window, settle,
                              f"round {rnd}{again}", loss)
        results = record.get("result")
        if not results or "error" in record:
            return
        streams = [s for res in results for s in res["streams"]
                   if s["frames"] > 0]
        if len(streams) != n * (n - 1):
            record["error"] = (f"{len(streams)} streams decoded in the "
                               f"window, not {n * (n - 1)}")
            return
        for res in results:
            add_in_run(r, series, "mesh_cpu_pct_participant", peer,
                       res["cpu_pct"], rnd)
            add_in_run(r, series, "mesh_rss_mib_participant", peer,
                       res["rss_kib"] / 1024, rnd)
            if "key_frames" in res:
                add_in_run(r, series, "mesh_key_frames_participant", peer,
                           res["key_frames"], rnd)
            if loss > 0:
                add_in_run(r, series, "mesh_rtp_dropped_pct", peer,
                           100.0 * res["rtp_dropped"] /
                           max(res["rtp_packets"], 1), rnd)
        add(series, "mesh_cpu_pct_all", peer,
            sum(res["cpu_pct"] for res in results))
        for s in streams:
            add_in_run(r, series, "mesh_fps_stream", peer, s["fps"], rnd)
            if s.get("latency_p50_ms", -1) >= 0:
                add_in_run(r, series, "mesh_latency_p50_ms", peer,
                           s["latency_p50_ms"], rnd)
        add(series, "mesh_fps_slowest", peer,
            min(s["fps"] for s in streams))
        lost = sum(s.get("lost", 0) for s in streams)
        add(series, "mesh_frames_lost_pct", peer,
            100.0 * lost / max(lost + sum(s["frames"] for s in streams), 1))
        if "server_cpu_pct" in record:
            add(series, "mesh_server_cpu_pct", peer,
                record["server_cpu_pct"])
        add(series, "mesh_all_decoding_s", peer, record["all_decoding_s"])
    return body


def mesh_timing(r, q):
    """A mesh suite's window and settling time (s) and its rounds: the
    full run's, --quick's or --smoke's."""
    smoke = r.args.smoke
    window = 4 if smoke else (10 if q else 20)
    settle = 2 if smoke else 5
    rounds = 1 if (q or smoke) else 3
    return window, settle, rounds


def suite_mesh(r, q, series, notes):
    n = 4
    window, settle, rounds = mesh_timing(r, q)
    body = mesh_body(r, series, n, window, settle)
    # aiortc: not in the smoke run (bench/setup.sh installs it)
    r.rounds(["legba", "webrtcbin"] + ([] if r.args.smoke else ["aiortc"]),
             rounds, body)
    notes.append(
        f"{n} participants, each its own process (legba-peer mesh) with one "
        "LegbaRoom, all in one room through a legba-server process on "
        "127.0.0.1: each sends 640x360 at 30 fps (the first-frame suite's "
        "line: moving zone plate, legbastamp, x264enc ultrafast zerolatency, "
        "1 Mbit/s, encoded once and sent to the 3 others) and decodes the 3 "
        f"streams it receives (avdec_h264, legbastampcheck, fakesink). Once "
        f"all {n * (n - 1)} streams have decoded a frame, {settle} s to "
        f"settle, then a window of {window} s opened and closed by the "
        "driver on every process at once (a process whose stream gave no "
        "frame in it holds it open until that stream's next frame, and "
        "reports the window it measured): each process's CPU (getrusage, "
        "user+sys, every thread: capture, encoder, its 3 peer connections, "
        "3 decoders, signalling) over the window as a percentage of one "
        "core, and frames decoded per stream over the window (30 fps is a "
        "stream keeping up; fewer is a starved mesh), with the frames lost "
        "in the window (gaps in legbastampcheck's frame counter: frames "
        "the sender stamped that were never decoded). One fresh server and "
        "four fresh processes per run; the server's CPU over the window "
        "beside them (signalling only: media goes peer to peer). "
        f"webrtcbin: the same mesh of {n} processes of plain webrtcbin "
        "(webrtcbin-peer mesh), one webrtcbin per other participant, with "
        "the same sender line (encoded once, then per peer a queue and "
        "rtph264pay), the same session as Legba's rooms negotiate (an H.264 "
        "video transceiver sending and receiving, a receive-only Opus one, "
        "the channel legba), the same jitter-buffer "
        "latency (100 ms), the same receive chain (rtph264depay, h264parse, "
        "avdec_h264, legbastampcheck, fakesink) and the same window and "
        "counting; no signalling server: this driver hands each process's "
        "descriptions and candidates (JSON lines on its standard output) "
        "to the other's standard input as it reads them, the lower id "
        f"offering. aiortc: the same mesh of {n} processes "
        "(bench/peers/aiortc-mesh.py), one RTCPeerConnection per other "
        "participant, signalled as plain webrtcbin is (aiortc does not "
        "trickle: a description leaves with its candidates), the same "
        "source line up to legbastamp feeding aiortc's MediaRelay "
        "(unbuffered: a connection whose encoder is behind gets the newest "
        "frame), and aiortc's own media path: an H264Encoder per connection "
        "(libx264 through PyAV at aiortc's settings: baseline, "
        "zerolatency, x264's default preset, 1 Mbit/s moved by REMB between "
        "0.5 and 3; so three encodes per participant, not one), its "
        "jitter buffer and H264Decoder, each decoded frame pushed into a "
        "legbastampcheck; the session has the video transceiver and the two "
        "channels but no audio m-line (aiortc 1.4 gives audio-level and "
        "abs-send-time one header-extension id, which breaks audio and "
        "video in one BUNDLE). In every round every peer runs, in the "
        "opposite order each other round. "
        "mesh_cpu_pct_all: the 4 processes together, one value per run. "
        "mesh_key_frames_participant: the key frames each participant's "
        "x264enc made in the window (aiortc's encoders are not counted). "
        "mesh_latency_p50_ms: each stream's glass-to-glass p50, legbastamp "
        "before the sender's encoder to legbastampcheck after the "
        "receiver's decoder, one clock (the processes share a host), over "
        "every frame the stream decoded from its first (legbastampcheck's "
        "running percentile, read when the window closes).")


MESH_LOSS = 0.05


def suite_mesh_loss(r, q, series, notes):
    n = 4
    window, settle, rounds = mesh_timing(r, q)
    body = mesh_body(r, series, n, window, settle, MESH_LOSS)
    r.rounds(["legba", "webrtcbin"], rounds, body)
    notes.append(
        f"The mesh suite's {n}-way mesh (the same processes, lines, "
        "session, window and counting; Legba through a legba-server "
        "process, plain webrtcbin signalled by this driver) with a "
        f"controlled loss: every participant drops each RTP packet it "
        f"sends with probability {MESH_LOSS:g} (--loss: for plain "
        "webrtcbin a netsim as each webrtcbin's auxiliary sender, after "
        "the RTX sender and before SRTP; for Legba, whose room takes that "
        "slot for its congestion control, a probe on each connection's "
        "nicesink dropping SRTP packets as they leave; so media packets "
        "and their retransmissions are dropped alike; RTCP, and with it "
        "the receivers' NACKs and PLIs, is not). "
        "A receiver asks for a retransmission of each missing packet "
        "(NACK) while its jitter buffer (100 ms) waits, and for a key "
        "frame (PLI) when a frame stays incomplete. A Legba room passes "
        "at most one key-frame request per 100 ms to its encoder, "
        "whoever asks (a later one waits for the end of the 100 ms; "
        "500 ms in the runs before 2026-12-02 01:50Z); "
        "plain webrtcbin passes each on at once. "
        "mesh_key_frames_participant: the key frames each participant's "
        "encoder made in the window; mesh_frames_lost_pct: the stamped "
        "frames of the window that a receiver never decoded; "
        "mesh_rtp_dropped_pct: the RTP packets each participant's netsims "
        "dropped in the window, over those that came into them (the loss "
        "as applied).")


SUITES = {
    "setup": suite_setup, "datachannel": suite_datachannel,
    "video-receive": suite_video_receive, "video-call": suite_video_call,
    "audio": suite_audio, "scale": suite_scale,
    "footprint": suite_footprint, "data": suite_data,
    "first-frame": suite_first_frame, "mesh": suite_mesh,
    "mesh-loss": suite_mesh_loss,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("suite", choices=sorted(SUITES))
    parser.add_argument("--build", required=True)
    parser.add_argument("--pion", default="pion-peer")
    parser.add_argument("--output", required=True)
    parser.add_argument("--command", default="")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scale-rounds", type=int, default=1,
                        help="scale: rounds of the five peers (alternating "
                        "order), one by default")
    parser.add_argument("--smoke", action="store_true",
                        help="data, first-frame, mesh: a few messages, calls "
                        "or seconds, to test the suite")
    parser.add_argument("--peers", default="",
                        help="run these of the suite's peers alone "
                        "(comma-separated), every one by default")
    args = parser.parse_args()
    r = Runner(args)
    series, notes = {}, []
    result = {
        "suite": args.suite, "command": args.command, "quick": args.quick,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "conditions": conditions(args.build),
        "load_start": loadavg(), "busy_start": busy_processes(),
    }
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="legba-bench-") as workdir:
        args.workdir = workdir
        SUITES[args.suite](r, args.quick, series, notes)
    result.update({
        "seconds": time.time() - t0,
        "load_end": loadavg(), "busy_end": busy_processes(),
        "series": series, "run_ids": r.run_ids, "notes": notes,
        "runs": r.runs,
    })
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(f"bench: wrote {args.output}")
    errors = [run for run in r.runs if "error" in run]
    return 0 if len(errors) < len(r.runs) or not r.runs else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The mesh suite's aiortc peer (Debian python3-aiortc): one participant
of a mesh, one process each, one RTCPeerConnection per other participant,
as an application on aiortc would make it. Same lines as
`webrtcbin-peer mesh`, so bench/suites.py drives it the same way:

  aiortc-mesh.py --identity ID --peers ID,ID,... [--width W --height H]
                 [--bitrate KBPS]

Sender: the mesh's source line (videotestsrc is-live=true
pattern=zone-plate kx2=20 ky2=20 kt=1, I420 at 30 fps, legbastamp) ends in
an appsink holding one frame; a VideoStreamTrack hands each frame to
aiortc's MediaRelay, unbuffered (a connection whose encoder is behind
gets the newest frame, as the other peers' leaky queues drop rather than
stall). aiortc encodes per connection: each RTCRtpSender has its own
H264Encoder (libx264 through PyAV at aiortc's settings: baseline,
zerolatency, x264's default preset, a target of 1 Mbit/s moved by REMB
between 0.5 and 3), so a participant encodes its video once per other
participant. --bitrate is accepted for the suite's common options and
not applied: aiortc has no setting for it.

Receiver: each other participant's video (aiortc's jitter buffer and
H264Decoder) is pushed, frame by frame in the event loop's thread, into
a legbastampcheck of its own (bench/peers/aiortc_media.py).

Session: the lower id offers; the offer has the video transceiver
(sendrecv, H.264 only) and the data channel a room offers, legba
(reliable; a room makes legba-lossy only to send on it), and no audio
m-line: aiortc 1.4 gives the audio-level and abs-send-time header
extensions one id, which breaks audio and video in one BUNDLE. aiortc
does not trickle: a description leaves with its candidates.

Lines: descriptions are JSON on standard output ({"to": ID, "type":
"offer" | "answer", "sdp": ...}) and the caller hands them on to ID's
standard input, "to" replaced by "from". Standard input also takes
"start" and "stop" (a window: CPU of the process, user+sys of every
thread, and frames decoded per stream; a stream that gave no frame in
it holds it open until its next frame); standard output has
{"event": "decoding"} once every other participant's video has given a
decoded frame, and the window's result. End of input leaves.
"""

import argparse
import asyncio
import json
import os
import sys
import time

from aiortc import (RTCConfiguration, RTCPeerConnection,
                    RTCSessionDescription)
from aiortc.contrib.media import MediaRelay
from aiortc.mediastreams import MediaStreamError

from aiortc_media import (Checker, Gst, StampedTrack, cpu_s, h264_only,
                          init_gstreamer)

SOURCE_LINE = (
    "videotestsrc is-live=true pattern=zone-plate kx2=20 ky2=20 kt=1 ! "
    "video/x-raw,format=I420,width={w},height={h},framerate=30/1 ! "
    "legbastamp ! appsink name=sink max-buffers=1 drop=false sync=false")


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    return 0.0


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Remote:
    """Another participant: the connection with it and its video."""

    def __init__(self, mesh, rid):
        self.id = rid
        self.offerer = mesh.identity < rid
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.checker = None
        self.frames = 0
        self.first_us = 0
        self.window_frames = 0
        self.window_lost = 0
        self.pc.on("track", lambda track: mesh.on_track(self, track))
        self.pc.on("connectionstatechange", lambda: mesh.on_state(self))

    def lost(self):
        return self.checker.check.get_property("frames-lost") \
            if self.checker else 0


class Mesh:
    def __init__(self, args, loop):
        self.args = args
        self.loop = loop
        self.identity = args.identity
        self.started_us = time.monotonic_ns() // 1000
        self.source = Gst.parse_launch(
            SOURCE_LINE.format(w=args.width, h=args.height))
        self.track = StampedTrack(self.source.get_by_name("sink"),
                                  args.width, args.height)
        self.relay = MediaRelay()
        self.remotes = {rid: Remote(self, rid)
                        for rid in args.peers.split(",") if rid}
        self.decoding = False
        self.in_window = False
        self.stopping = False
        self.window = None
        self.done = loop.create_future()
        self.tasks = set()
        self.buf = b""

    def spawn(self, coro):
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.task_done)

    def task_done(self, task):
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.fail(f"{task.exception()!r}")

    def fail(self, why):
        print(f"mesh: {why}", file=sys.stderr, flush=True)
        if not self.done.done():
            self.done.set_result(1)

    def add_session(self, remote):
        h264_only(remote.pc.addTransceiver(
            self.relay.subscribe(self.track, buffered=False),
            direction="sendrecv"))

    async def offer(self, remote):
        self.add_session(remote)
        remote.pc.createDataChannel("legba")
        await remote.pc.setLocalDescription(await remote.pc.createOffer())
        emit({"to": remote.id, "type": "offer",
              "sdp": remote.pc.localDescription.sdp})

    async def answer(self, remote, sdp):
        await remote.pc.setRemoteDescription(
            RTCSessionDescription(sdp=sdp, type="offer"))
        for t in remote.pc.getTransceivers():
            if t.kind == "video":
                t.sender.replaceTrack(
                    self.relay.subscribe(self.track, buffered=False))
                t.direction = "sendrecv"
                h264_only(t)
        await remote.pc.setLocalDescription(await remote.pc.createAnswer())
        emit({"to": remote.id, "type": "answer",
              "sdp": remote.pc.localDescription.sdp})

    def on_state(self, remote):
        if remote.pc.connectionState == "failed":
            self.fail(f"the connection with {remote.id} failed")

    def on_track(self, remote, track):
        if track.kind == "video":
            self.spawn(self.consume(remote, track))

    async def consume(self, remote, track):
        remote.checker = Checker(self.args.width, self.args.height,
                                 series=False)
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            remote.checker.push(frame)
            if remote.checker.error:
                self.fail(f"{remote.id}: {remote.checker.error}")
                return
            remote.frames += 1
            if remote.first_us == 0:
                remote.first_us = time.monotonic_ns() // 1000
                self.check_decoding()
            if self.stopping and self.window_full():
                self.close_window()

    def check_decoding(self):
        if self.decoding or any(r.first_us == 0
                                for r in self.remotes.values()):
            return
        self.decoding = True
        emit({"event": "decoding", "identity": self.identity,
              "streams": len(self.remotes),
              "ms": (time.monotonic_ns() // 1000 - self.started_us) / 1e3})

    def window_full(self):
        return all(r.frames > r.window_frames for r in self.remotes.values())

    def open_window(self):
        self.in_window = True
        self.window = (cpu_s(), time.monotonic())
        for r in self.remotes.values():
            r.window_frames = r.frames
            r.window_lost = r.lost()

    def close_window(self):
        cpu = cpu_s() - self.window[0]
        s = time.monotonic() - self.window[1]
        streams = []
        for r in self.remotes.values():
            if r.checker is None:
                continue
            check = r.checker.check
            frames = r.frames - r.window_frames
            streams.append({
                "from": r.id, "frames": frames, "fps": frames / s,
                "lost": r.lost() - r.window_lost,
                "first_frame_ms": (r.first_us - self.started_us) / 1e3,
                "stamps_valid": check.get_property("frames-valid"),
                "stamps_failed": check.get_property("frames-failed"),
                "latency_p50_ms": check.get_property("latency-p50"),
                "latency_p95_ms": check.get_property("latency-p95")})
        emit({"peer": "aiortc", "mode": "mesh", "identity": self.identity,
              "window_s": s, "cpu_s": cpu, "cpu_pct": 100 * cpu / s,
              "rss_kib": rss_kib(),
              "threads": len(os.listdir("/proc/self/task")),
              "frames_sent": self.track.sent, "streams": streams})
        self.in_window = False
        self.stopping = False

    def on_input(self):
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            self.loop.remove_reader(sys.stdin.fileno())
            if not self.done.done():
                self.done.set_result(0)
            return
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            self.command(raw.decode().strip())

    def command(self, line):
        if line == "start":
            self.open_window()
        elif line == "stop":
            self.stopping = self.in_window
            if self.in_window and self.window_full():
                self.close_window()
        elif line.startswith("{"):
            msg = json.loads(line)
            remote = self.remotes.get(msg.get("from"))
            if remote is None:
                print(f"mesh: a message from no participant: {line}",
                      file=sys.stderr, flush=True)
            elif msg.get("type") == "offer" and not remote.offerer:
                self.spawn(self.answer(remote, msg["sdp"]))
            elif msg.get("type") == "answer" and remote.offerer:
                self.spawn(remote.pc.setRemoteDescription(
                    RTCSessionDescription(sdp=msg["sdp"], type="answer")))
            else:
                print(f"mesh: unexpected {msg.get('type')} from "
                      f"{remote.id}", file=sys.stderr, flush=True)
        elif line:
            print(f"mesh: unknown command '{line}'", file=sys.stderr,
                  flush=True)

    async def run(self):
        self.source.set_state(Gst.State.PLAYING)
        self.loop.add_reader(sys.stdin.fileno(), self.on_input)
        for remote in self.remotes.values():
            if remote.offerer:
                self.spawn(self.offer(remote))
        status = await self.done
        self.loop.remove_reader(sys.stdin.fileno())
        for remote in self.remotes.values():
            await remote.pc.close()
        self.track.stop()
        self.source.set_state(Gst.State.NULL)
        for remote in self.remotes.values():
            if remote.checker:
                remote.checker.close()
        return status


async def main_async(args):
    return await Mesh(args, asyncio.get_running_loop()).run()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--identity", required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--bitrate", type=int, default=1000)
    args = parser.parse_args()
    init_gstreamer("aiortc-mesh")
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()

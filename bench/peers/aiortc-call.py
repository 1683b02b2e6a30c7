#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The video-call suite's aiortc peer (Debian python3-aiortc): a stamped
720p30 H.264 call between two RTCPeerConnections in this process, the
offer and answer handed across directly. Same JSON as the call mode of
bench/peers/webrtcbin-peer.c:

  aiortc-call.py [--frames N] [--width W --height H]

Sender: GStreamer makes the frames (videotestsrc is-live=true
pattern=smpte horizontal-speed=4 ! I420 ! legbastamp ! appsink, the
suite's source line); a VideoStreamTrack hands each one to aiortc as an
av.VideoFrame with the buffer's timestamp as its pts, and aiortc encodes
it with its own H264Encoder and sends it. The appsink holds one frame
and then blocks the source, as an encoder in the same line would: a
frame waits for aiortc at most one of its encode cycles, and none is
dropped before it.

Receiver: each av.VideoFrame that the receiving track yields (aiortc's
jitter buffer and H264Decoder) is pushed, in the same thread, straight
into legbastampcheck (a source pad linked to its sink pad; no queue),
which reads the stamp with the same CLOCK_MONOTONIC.

ICE as for every peer of the suites: no STUN server (iceServers=[]) and
host candidates on 127.0.0.1 only. Video only: aiortc 1.4 gives the
audio-level and abs-send-time header extensions one id.

cpu_ms_per_frame: process user+sys from the call's connection to its
last frame, over the frames received (both ends and both GStreamer
lines, as in the other peers' figure).
"""

import argparse
import asyncio
import json
import sys
import time

from aiortc import RTCConfiguration, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from aiortc_media import (Checker, Gst, StampedTrack, cpu_s, h264_only,
                          init_gstreamer, latency_series)


async def call(args):
    source = Gst.parse_launch(
        "videotestsrc is-live=true pattern=smpte horizontal-speed=4 ! "
        f"video/x-raw,format=I420,width={args.width},height={args.height},"
        "framerate=30/1 ! legbastamp name=stamp ! appsink name=sink "
        "max-buffers=1 drop=false sync=false")
    sink = source.get_by_name("sink")
    checker = Checker(args.width, args.height)
    track = StampedTrack(sink, args.width, args.height)

    config = RTCConfiguration(iceServers=[])
    a, b = RTCPeerConnection(config), RTCPeerConnection(config)
    h264_only(a.addTransceiver(track, direction="sendonly"))
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    state = {"c0": None, "t0": None, "cpu": None, "seconds": None,
             "bytes0": 0}

    async def bytes_sent():
        stats = await a.getSenders()[0].getStats()
        return sum(s.bytesSent for s in stats.values()
                   if s.type == "outbound-rtp")

    async def consume(remote):
        while checker.count < args.frames and checker.error is None:
            try:
                frame = await remote.recv()
            except MediaStreamError:
                break
            first = state["c0"] is None
            if first:
                state["c0"], state["t0"] = cpu_s(), time.monotonic()
            checker.push(frame)
            if first:
                state["bytes0"] = await bytes_sent()
        state["cpu"] = cpu_s() - state["c0"] if state["c0"] else 0
        state["seconds"] = (time.monotonic() - state["t0"]
                            if state["t0"] else 0)
        if not done.done():
            done.set_result(1)

    @b.on("track")
    def on_track(remote):
        if remote.kind == "video":
            asyncio.ensure_future(consume(remote))

    source.set_state(Gst.State.PLAYING)
    await a.setLocalDescription(await a.createOffer())
    await b.setRemoteDescription(a.localDescription)
    await b.setLocalDescription(await b.createAnswer())
    await a.setRemoteDescription(b.localDescription)
    complete = True
    try:
        await asyncio.wait_for(done, 30 + args.frames / 10)
    except asyncio.TimeoutError:
        complete = False
    if state["cpu"] is None:
        state["cpu"] = cpu_s() - state["c0"] if state["c0"] else 0
        state["seconds"] = (time.monotonic() - state["t0"]
                            if state["t0"] else 0)
    complete = complete and checker.count >= args.frames
    sent_bytes = await bytes_sent() - state["bytes0"]
    summary = checker.summary()
    stamped = source.get_by_name("stamp").get_property("frames")
    await a.close()
    await b.close()
    source.set_state(Gst.State.NULL)
    checker.close()

    result = {
        "peer": "aiortc", "mode": "call", "frames": checker.count,
        "complete": complete,
        "cpu_ms_per_frame": state["cpu"] * 1000 / max(checker.count, 1),
        "seconds": state["seconds"], "frames_stamped": stamped,
        "frames_sent": track.sent,
        "bitrate_bps": (sent_bytes * 8 / state["seconds"]
                        if state["seconds"] else None),
    }
    if checker.error:
        result["error"] = checker.error
    if summary is not None:
        result["failed"] = summary.get_uint64("failed")[1]
        result["lost"] = summary.get_uint64("lost")[1]
        result["latency_ms"] = latency_series(summary)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    args = parser.parse_args()
    init_gstreamer("aiortc-call")
    result = asyncio.run(call(args))
    print(json.dumps(result))
    sys.exit(0 if result["complete"] and "error" not in result else 1)


if __name__ == "__main__":
    main()

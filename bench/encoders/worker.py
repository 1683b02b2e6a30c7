#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One measurement of the video-send benchmark (bench/encoders/bench.py).

Encodes FRAMES frames of scrolling SMPTE bars (videotestsrc pattern=smpte
horizontal-speed=4: moving, detailed, with a noise patch; the content the
issue's figures were taken on) at WIDTHxHEIGHT, 30 fps, under a cap, in
this fresh process, and prints one JSON object:

  cpu_s        process user+sys time (getrusage, every thread) from the
               WARMUP-th source frame to the end of the stream
  units        source frames in that window
  bytes        encoded bytes over the whole stream (the cap holds from the
               first frame: the key frame counts)
  frames_in    source frames
  frames_out   encoded frames
  duration_s   FRAMES / 30
  frame_dropping  for encoders whose frame dropping legbavideoenc
               switches by the cap (openh264enc): {frame_dropping,
               min_bitrate} from its stats; null otherwise
  output_size  legbavideoenc's stats at the end: {width, height} sent to
               the encoder (smaller than the source when the cap is below
               the encoder's floor), scaling_floor; null for other peers

Peers:
  legba ENCODER   videotestsrc ! legbavideoenc encoder-factory=ENCODER ! fakesink
  legba none      videotestsrc ! fakesink (the floor to subtract)
  aiortc vp8|h264 videotestsrc ! appsink, each frame through aiortc's own
                  Vp8Encoder / H264Encoder (python3-aiortc)
  aiortc none     the same without the encoder (the floor to subtract)

The plugin is found through GST_PLUGIN_PATH (bench.py points it at the
release build).
"""

import argparse
import fractions
import json
import resource
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import GLib, Gst  # noqa: E402
# loads the typelib that gives appsink its try_pull_sample()
from gi.repository import GstApp  # noqa: E402,F401

FPS = 30
CONTENT = "videotestsrc pattern=smpte horizontal-speed=4"
PROOF_TIMEOUT_MS = 60000
CODEC_OF = {"x264enc": "h264", "openh264enc": "h264", "vp8enc": "vp8",
            "vp9enc": "vp9", "av1enc": "av1"}


def cpu_now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def raw_caps(args):
    return (f"video/x-raw,format=I420,width={args.width},"
            f"height={args.height},framerate={FPS}/1")


def run_pipeline(pipeline, timeout_s):
    bus = pipeline.get_bus()
    pipeline.set_state(Gst.State.PLAYING)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no EOS within {timeout_s} s")
            msg = bus.timed_pop_filtered(
                int(left * Gst.SECOND),
                Gst.MessageType.EOS | Gst.MessageType.ERROR)
            if msg is None:
                continue
            if msg.type == Gst.MessageType.ERROR:
                err, debug = msg.parse_error()
                raise RuntimeError(f"{err.message} ({debug})")
            return
    finally:
        pipeline.set_state(Gst.State.NULL)


def measure_legba(args):
    enc = ""
    if args.encoder != "none":
        codec = CODEC_OF.get(args.encoder, "h264")
        # a proof of 2160p can take more than the default 5 s on a loaded
        # machine; the proof is before the CPU window either way
        enc = (f"! legbavideoenc name=enc codec={codec} "
               f"encoder-factory={args.encoder} bitrate={args.cap} "
               f"proof-timeout={PROOF_TIMEOUT_MS} ")
    pipeline = Gst.parse_launch(
        f"{CONTENT} num-buffers={args.frames} ! {raw_caps(args)} "
        f"! identity name=in {enc}! fakesink name=sink sync=false")
    state = {"in": 0, "out": 0, "bytes": 0, "cpu0": None}

    def on_input(pad, info):
        state["in"] += 1
        if state["in"] == args.warmup + 1:
            state["cpu0"] = cpu_now()
        return Gst.PadProbeReturn.OK

    def on_output(pad, info):
        state["out"] += 1
        state["bytes"] += info.get_buffer().get_size()
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("in").get_static_pad("src").add_probe(
        Gst.PadProbeType.BUFFER, on_input)
    pipeline.get_by_name("sink").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, on_output)
    run_pipeline(pipeline, args.timeout)
    cpu1 = cpu_now()
    current = None
    dropping = None
    output_size = None
    if args.encoder != "none":
        enc = pipeline.get_by_name("enc")
        current = enc.get_property("current-encoder")
        if current != args.encoder:
            raise RuntimeError(f"legbavideoenc used {current}")
        stats = enc.get_property("stats")
        if stats.get_value("min-bitrate"):
            dropping = {"frame_dropping": stats.get_value("frame-dropping"),
                        "min_bitrate": stats.get_value("min-bitrate")}
        output_size = {"width": stats.get_value("output-width"),
                       "height": stats.get_value("output-height"),
                       "scaling_floor": stats.get_value("scaling-floor")}
    return {
        "cpu_s": cpu1 - state["cpu0"],
        "units": state["in"] - args.warmup,
        "bytes": state["bytes"] if args.encoder != "none" else 0,
        "frames_in": state["in"],
        "frames_out": state["out"],
        "current_encoder": current,
        # encoders whose frame dropping legbavideoenc switches by the cap
        "frame_dropping": dropping,
        "output_size": output_size,
    }


def make_aiortc_encoder(name, cap):
    if name == "vp8":
        from aiortc.codecs.vpx import Vp8Encoder
        encoder = Vp8Encoder()
    else:
        from aiortc.codecs.h264 import H264Encoder
        encoder = H264Encoder()
    # aiortc clamps the target to its own range (VP8 250k-1.5M, H.264
    # 500k-3M); the value it took is recorded.
    encoder.target_bitrate = cap
    return encoder


def measure_aiortc(args):
    import av
    import numpy

    pipeline = Gst.parse_launch(
        f"{CONTENT} num-buffers={args.frames} ! {raw_caps(args)} "
        f"! appsink name=sink sync=false max-buffers=2")
    sink = pipeline.get_by_name("sink")
    encoder = None
    if args.encoder != "none":
        encoder = make_aiortc_encoder(args.encoder, args.cap)
    time_base = fractions.Fraction(1, 90000)
    state = {"in": 0, "out": 0, "bytes": 0, "cpu0": None}
    height = args.height * 3 // 2
    pipeline.set_state(Gst.State.PLAYING)
    deadline = time.monotonic() + args.timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not done within {args.timeout} s")
            sample = sink.try_pull_sample(5 * Gst.SECOND)
            if sample is None:
                if sink.is_eos():
                    break
                continue
            buf = sample.get_buffer()
            ok, info = buf.map(Gst.MapFlags.READ)
            array = numpy.frombuffer(info.data, dtype=numpy.uint8,
                                     count=args.width * height).reshape(
                                         height, args.width)
            frame = av.VideoFrame.from_ndarray(array, format="yuv420p")
            buf.unmap(info)
            frame.pts = state["in"] * (90000 // FPS)
            frame.time_base = time_base
            state["in"] += 1
            if state["in"] == args.warmup + 1:
                state["cpu0"] = cpu_now()
            if encoder is not None:
                payloads, _ = encoder.encode(frame)
                if payloads:
                    state["out"] += 1
                    state["bytes"] += sum(len(p) for p in payloads)
    finally:
        pipeline.set_state(Gst.State.NULL)
    cpu1 = cpu_now()
    return {
        "cpu_s": cpu1 - state["cpu0"],
        "units": state["in"] - args.warmup,
        "bytes": state["bytes"],
        "frames_in": state["in"],
        "frames_out": state["out"] if encoder else state["in"],
        "target_bitrate": encoder.target_bitrate if encoder else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("peer", choices=["legba", "aiortc"])
    parser.add_argument("encoder")
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--height", type=int, required=True)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--cap", type=int, default=1500000)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    if args.frames <= args.warmup:
        parser.error("--frames must exceed --warmup")
    Gst.init(None)
    GLib.set_prgname("legba-bench-encoder")
    measure = measure_legba if args.peer == "legba" else measure_aiortc
    result = measure(args)
    result["duration_s"] = args.frames / FPS
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

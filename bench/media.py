#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One measurement of the video-receive or audio suite, in this fresh
process; prints one JSON object.

  media.py decode gstreamer|aiortc h264|vp8 --width W --height H --frames N
      Encodes N frames of scrolling SMPTE bars (x264enc ultrafast /
      vp8enc deadline=1, 1.5 Mbit/s; not timed), then decodes them all,
      timed: GStreamer's decoders (avdec_h264, vp8dec: what Legba's rooms
      and plain webrtcbin use) fed by appsrc, or aiortc's own H264Decoder
      and Vp8Decoder. cpu_s is process user+sys over the decode.

  media.py audio gstreamer|aiortc --streams N --seconds S
      Encodes N streams of S seconds of 48 kHz stereo (a sine per
      stream) to Opus in 20 ms frames: GStreamer's opusenc (what Legba's
      rooms use), or aiortc's own OpusEncoder. cpu_s is over the encode.
      With --floor, the same without the encoder (subtracted by the
      suite).
"""

import argparse
import fractions
import json
import resource
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import Gst  # noqa: E402
from gi.repository import GstApp  # noqa: E402,F401


def cpu_now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pull_all(pipeline, sink):
    out = []
    pipeline.set_state(Gst.State.PLAYING)
    while True:
        sample = sink.try_pull_sample(10 * Gst.SECOND)
        if sample is None:
            break
        buf = sample.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        out.append(bytes(info.data))
        buf.unmap(info)
    pipeline.set_state(Gst.State.NULL)
    return out


def encode(args):
    enc = ("x264enc tune=zerolatency speed-preset=ultrafast bitrate=1500 "
           "key-int-max=60 ! video/x-h264,stream-format=byte-stream,"
           "alignment=au,profile=constrained-baseline"
           if args.codec == "h264" else
           "vp8enc deadline=1 target-bitrate=1500000 end-usage=cbr "
           "keyframe-max-dist=60")
    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=smpte horizontal-speed=4 "
        f"num-buffers={args.frames} ! video/x-raw,format=I420,"
        f"width={args.width},height={args.height},framerate=30/1 ! {enc} "
        f"! appsink name=sink sync=false")
    return pull_all(pipeline, pipeline.get_by_name("sink"))


def decode_gstreamer(args, frames):
    caps = ("video/x-h264,stream-format=byte-stream,alignment=au"
            if args.codec == "h264" else
            f"video/x-vp8,width={args.width},height={args.height},"
            "framerate=30/1")
    dec = "h264parse ! avdec_h264" if args.codec == "h264" else "vp8dec"
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time caps=\"{caps}\" ! {dec} "
        f"! fakesink name=sink sync=false")
    src = pipeline.get_by_name("src")
    count = {"out": 0}

    def on_output(pad, info):
        count["out"] += 1
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("sink").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, on_output)
    pipeline.set_state(Gst.State.PLAYING)
    c0 = cpu_now()
    for i, data in enumerate(frames):
        buf = Gst.Buffer.new_wrapped(data)
        buf.pts = i * Gst.SECOND // 30
        buf.duration = Gst.SECOND // 30
        src.emit("push-buffer", buf)
    src.emit("end-of-stream")
    bus = pipeline.get_bus()
    msg = bus.timed_pop_filtered(120 * Gst.SECOND,
                                 Gst.MessageType.EOS | Gst.MessageType.ERROR)
    c = cpu_now() - c0
    pipeline.set_state(Gst.State.NULL)
    if msg is None or msg.type == Gst.MessageType.ERROR:
        raise RuntimeError("the decoder did not finish")
    return c, count["out"]


def decode_aiortc(args, frames):
    from aiortc.jitterbuffer import JitterFrame
    if args.codec == "h264":
        from aiortc.codecs.h264 import H264Decoder
        decoder = H264Decoder()
    else:
        from aiortc.codecs.vpx import Vp8Decoder
        decoder = Vp8Decoder()
    out = 0
    c0 = cpu_now()
    for i, data in enumerate(frames):
        out += len(decoder.decode(JitterFrame(data=data, timestamp=i * 3000)))
    return cpu_now() - c0, out


def audio_gstreamer(args):
    buffers = int(args.seconds * 50)
    enc = "" if args.floor else "! opusenc bitrate=32000 frame-size=20 "
    branches = " ".join(
        f"audiotestsrc freq={220 + 10 * i} num-buffers={buffers} "
        f"samplesperbuffer=960 ! audio/x-raw,format=S16LE,rate=48000,"
        f"channels=2 {enc}! fakesink sync=false"
        for i in range(args.streams))
    pipeline = Gst.parse_launch(branches)
    c0 = cpu_now()
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        600 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    c = cpu_now() - c0
    pipeline.set_state(Gst.State.NULL)
    if msg is None or msg.type == Gst.MessageType.ERROR:
        raise RuntimeError("the encoders did not finish")
    return c


def audio_aiortc(args):
    import av
    import numpy
    from aiortc.codecs.opus import OpusEncoder

    frames = int(args.seconds * 50)
    t = numpy.arange(960) / 48000
    encoders = [None if args.floor else OpusEncoder()
                for _ in range(args.streams)]
    c0 = cpu_now()
    for n in range(frames):
        for i, encoder in enumerate(encoders):
            wave = (numpy.sin(2 * numpy.pi * (220 + 10 * i)
                              * (t + n * 0.02)) * 8000).astype(numpy.int16)
            frame = av.AudioFrame.from_ndarray(
                numpy.repeat(wave, 2).reshape(1, -1), format="s16",
                layout="stereo")
            frame.sample_rate = 48000
            frame.pts = n * 960
            frame.time_base = fractions.Fraction(1, 48000)
            if encoder is not None:
                encoder.encode(frame)
    return cpu_now() - c0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["decode", "audio"])
    parser.add_argument("peer", choices=["gstreamer", "aiortc"])
    parser.add_argument("codec", nargs="?", default="h264")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--floor", action="store_true")
    args = parser.parse_args()
    Gst.init(None)
    if args.what == "decode":
        frames = encode(args)
        decode = decode_gstreamer if args.peer == "gstreamer" \
            else decode_aiortc
        cpu, out = decode(args, frames)
        result = {"cpu_s": cpu, "frames_in": len(frames), "frames_out": out,
                  "cpu_ms_per_frame": cpu * 1000 / max(out, 1)}
    else:
        cpu = (audio_gstreamer if args.peer == "gstreamer"
               else audio_aiortc)(args)
        result = {"cpu_s": cpu, "streams": args.streams,
                  "seconds": args.seconds, "floor": args.floor,
                  "cpu_pct_per_stream":
                      cpu / args.seconds / args.streams * 100}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

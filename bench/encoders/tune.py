#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Rate-control tuning runs for one encoder, outside legbavideoenc.

Encodes FRAMES frames of the video-send benchmark's content (scrolling
SMPTE bars, bench/encoders/worker.py) or of the element tests' content
(a moving zone plate, tests/elements/test-legbavideoenc.c) with ENCODER
configured as legbavideoenc configures its family (speed "fastest"), plus
each variant's settings on top, at every size and cap given, and reports
the output bitrate over the cap (bytes over the whole stream, key frame
included) and the frames out over the frames in. Bitrate and frame counts
follow the buffers' timestamps (sync=false), not the wall clock, so a
loaded machine changes the time a run takes, not its figures. CPU time is
not measured here (bench/encoders/run.sh does that).

  tune.py openh264enc --sizes 360p,720p,1080p \\
      --caps 250000,500000,1000000 \\
      --variant enable-frame-skip=false --variant enable-frame-skip=true

writes bench/results/tune-ENCODER-DATE.json (--output overrides) and
prints one line per run. Standard library and PyGObject only.
"""

import argparse
import datetime
import json
import os
import shlex
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bench  # noqa: E402

FPS = 30
CONTENT = {
    "smpte": "videotestsrc pattern=smpte horizontal-speed=4",
    "zoneplate": "videotestsrc pattern=zone-plate kx2=20 ky2=20 kt=1",
}
# The family rows of lib/legba/encoder/legba-encoder-family.c, speed "fastest";
# {cap} is the cap in the property's unit.
BASE = {
    "openh264enc": "rate-control=bitrate usage-type=camera complexity=low "
                   "bitrate={cap} max-bitrate={cap}",
    "vp8enc": "deadline=1 end-usage=cbr lag-in-frames=0 "
              "error-resilient=default undershoot=100 overshoot=15 "
              "buffer-size=750 buffer-initial-size=375 "
              "buffer-optimal-size=450 dropframe-threshold=30 cpu-used=-8 "
              "target-bitrate={cap}",
    "x264enc": "tune=zerolatency bframes=0 b-adapt=false rc-lookahead=0 "
               "sync-lookahead=0 speed-preset=ultrafast bitrate={kcap}",
}


def parse_size(size):
    """A size of the sweep (360p ...) or WIDTHxHEIGHT."""
    if size in bench.SIZES:
        return bench.SIZES[size]
    width, _, height = size.partition("x")
    return int(width), int(height)


def run(encoder, settings, width, height, frames, content):
    pipeline = Gst.parse_launch(
        f"{CONTENT[content]} num-buffers={frames} "
        f"! video/x-raw,format=I420,width={width},height={height},"
        f"framerate={FPS}/1 ! {encoder} {settings} "
        f"! fakesink name=sink sync=false")
    state = {"out": 0, "bytes": 0}

    def on_output(pad, info):
        state["out"] += 1
        state["bytes"] += info.get_buffer().get_size()
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("sink").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, on_output)
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        600 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    pipeline.set_state(Gst.State.NULL)
    if msg is None:
        raise RuntimeError("no EOS within 600 s")
    if msg.type == Gst.MessageType.ERROR:
        err, debug = msg.parse_error()
        raise RuntimeError(f"{err.message} ({debug})")
    return state


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("encoder", choices=sorted(BASE))
    parser.add_argument("--sizes", default="360p,720p,1080p",
                        help="sizes of the sweep (360p, 720p, 1080p, 2160p) "
                        "or WIDTHxHEIGHT, comma-separated")
    parser.add_argument("--caps", default="500000,1000000,2500000")
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--content", choices=sorted(CONTENT), default="smpte")
    parser.add_argument("--variant", action="append",
                        help="settings on top of the family's (repeatable; "
                        "default: none)")
    parser.add_argument("--output")
    args = parser.parse_args()
    Gst.init(None)
    variants = args.variant or [""]
    stamp = datetime.datetime.now(datetime.timezone.utc)
    output = args.output or os.path.join(
        ROOT, "bench", "results",
        f"tune-{args.encoder}-{stamp.strftime('%Y%m%dT%H%M%SZ')}.json")
    result = {
        "suite": "encoders-tune",
        "command": "bench/encoders/tune.py " + shlex.join(sys.argv[1:]),
        "date": stamp.isoformat(),
        "encoder": args.encoder, "base": BASE[args.encoder],
        "content": CONTENT[args.content], "frames": args.frames, "fps": FPS,
        "conditions": bench.conditions(),
        "load_start": bench.loadavg(), "runs": [],
    }
    for size in args.sizes.split(","):
        width, height = parse_size(size)
        for cap in [int(c) for c in args.caps.split(",")]:
            for variant in variants:
                settings = BASE[args.encoder].format(
                    cap=cap, kcap=max(1, cap // 1000)) + " " + variant
                state = run(args.encoder, settings, width, height,
                            args.frames, args.content)
                rate = state["bytes"] * 8.0 * FPS / args.frames
                record = {"size": size, "width": width, "height": height,
                          "cap": cap, "variant": variant,
                          "bytes": state["bytes"], "frames_in": args.frames,
                          "frames_out": state["out"],
                          "bitrate": rate, "over_cap": rate / cap,
                          "frames_ratio": state["out"] / args.frames}
                result["runs"].append(record)
                print(f"{size} {cap // 1000:5d} kbit/s [{variant}]: "
                      f"{rate / cap:.2f}x cap, {state['out']}/{args.frames} "
                      f"frames", flush=True)
    result["load_end"] = bench.loadavg()
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w") as f:
        json.dump(result, f, indent=1)
    print(f"tune: wrote {output}")


if __name__ == "__main__":
    main()

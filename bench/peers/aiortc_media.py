# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the aiortc peers of the video suites share (bench/peers/
aiortc-call.py, aiortc-mesh.py): the stamped source as an aiortc track,
legbastampcheck fed with aiortc's decoded frames, and the ICE settings
of every peer of the suites (no STUN server: iceServers=[]; host
candidates on 127.0.0.1 only, which aioice leaves out by default)."""

import asyncio
import fractions
import resource
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import Gst  # noqa: E402
from gi.repository import GstApp  # noqa: E402,F401

import aioice.ice  # noqa: E402
import av  # noqa: E402
import numpy  # noqa: E402
from aiortc import RTCRtpSender, VideoStreamTrack  # noqa: E402
from aiortc.mediastreams import MediaStreamError  # noqa: E402

aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]

TIME_BASE = fractions.Fraction(1, 90000)


def init_gstreamer(program):
    """Gst.init, and the build's legbastamp must be found (exits if not)."""
    Gst.init(None)
    if Gst.ElementFactory.find("legbastamp") is None:
        sys.exit(f"{program}: legbastamp not found: set GST_PLUGIN_PATH to "
                 "the build's plugins/legba")


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class StampedTrack(VideoStreamTrack):
    """Frames of the GStreamer source line, stamped by legbastamp."""

    def __init__(self, sink, width, height):
        super().__init__()
        self.sink = sink
        self.shape = (height * 3 // 2, width)
        self.sent = 0

    async def recv(self):
        if self.readyState != "live":
            raise MediaStreamError
        loop = asyncio.get_running_loop()
        sample = await loop.run_in_executor(
            None, self.sink.try_pull_sample, 5 * Gst.SECOND)
        if sample is None:
            self.stop()
            raise MediaStreamError
        buf = sample.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        try:
            plane = numpy.frombuffer(info.data, numpy.uint8,
                                     self.shape[0] * self.shape[1])
            frame = av.VideoFrame.from_ndarray(plane.reshape(self.shape),
                                               format="yuv420p")
        finally:
            buf.unmap(info)
        frame.pts = buf.pts * 90000 // Gst.SECOND
        frame.time_base = TIME_BASE
        self.sent += 1
        return frame


class Checker:
    """legbastampcheck ! fakesink, fed frame by frame in the caller's
    thread through a source pad linked to the checker."""

    def __init__(self, width, height, series=True):
        self.pipeline = Gst.parse_launch(
            "legbastampcheck name=check interval=0 series="
            f"{'true' if series else 'false'} "
            "! fakesink sync=false async=false")
        self.check = self.pipeline.get_by_name("check")
        self.pad = Gst.Pad.new("src", Gst.PadDirection.SRC)
        self.pad.set_active(True)
        self.pad.link(self.check.get_static_pad("sink"))
        self.pipeline.set_state(Gst.State.PLAYING)
        self.pad.push_event(Gst.Event.new_stream_start("aiortc"))
        self.pad.push_event(Gst.Event.new_caps(Gst.Caps.from_string(
            f"video/x-raw,format=I420,width={width},height={height},"
            "framerate=30/1")))
        segment = Gst.Segment()
        segment.init(Gst.Format.TIME)
        self.pad.push_event(Gst.Event.new_segment(segment))
        self.size = width * height * 3 // 2
        self.count = 0
        self.error = None

    def push(self, frame):
        data = frame.to_ndarray(format="yuv420p").tobytes()
        if len(data) != self.size:
            self.error = f"a decoded frame of {frame.width}x{frame.height}"
            return
        buf = Gst.Buffer.new_wrapped(data)
        buf.pts = self.count * Gst.SECOND // 30
        buf.duration = Gst.SECOND // 30
        self.count += 1
        ret = self.pad.push(buf)
        if ret != Gst.FlowReturn.OK:
            self.error = f"legbastampcheck refused a frame: {ret}"

    def summary(self):
        self.pad.push_event(Gst.Event.new_eos())
        bus = self.pipeline.get_bus()
        while True:
            msg = bus.timed_pop_filtered(10 * Gst.SECOND,
                                         Gst.MessageType.ELEMENT)
            if msg is None:
                return None
            s = msg.get_structure()
            if s.has_name("legba-stamp-summary"):
                return s

    def close(self):
        self.pipeline.set_state(Gst.State.NULL)


def latency_series(summary):
    """The summary's latency-series (a GstValueArray, which PyGObject
    cannot hand over without gst-python) from its serialized form."""
    text = summary.to_string()
    start = text.find("latency-series=(double)<")
    if start < 0:
        return []
    body = text[start:].split("<", 1)[1].split(">", 1)[0]
    return [float(v) for v in body.split(",") if v.strip()]


def h264_only(transceiver):
    codecs = [c for c in RTCRtpSender.getCapabilities("video").codecs
              if c.mimeType == "video/H264"]
    transceiver.setCodecPreferences(codecs)

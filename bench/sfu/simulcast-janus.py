#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Simulcast from a GStreamer webrtcbin to Janus 1.1, tried for real
(docs/rooms.md, "Simulcast").

    bench/sfu/simulcast-janus.py [--layers 2|3] [--mode ssrc|rid]
        [--no-mid] [--seconds 8]

Starts a Janus of its own (tests/common/start-janus.sh, no API secret),
creates a VideoRoom (H.264) and publishes one video track from a plain
webrtcbin: a test picture encoded at --layers sizes (x264enc each, 160,
320, 640 pixels wide, the smallest first), each payloaded with an SSRC of
its own and funnelled into the one transceiver's sink pad (rtpfunnel).
webrtcbin 1.22 writes one SSRC into its offer and knows nothing of
layers, so the offer is rewritten before it is applied:

- --mode ssrc: `a=ssrc-group:SIM` with the layers' SSRCs, smallest
  first, and an `a=ssrc` cname line for each (what Chrome's legacy
  simulcast sends; Janus reads it in janus_sdp_process_remote());
- --mode rid: `a=rid:N send` for each layer, `a=simulcast:send 0;1;2`
  and the `extmap`s of the RTP stream id and mid header extensions,
  which each layer's payloader writes (rtphdrextstreamid, rtphdrextmid;
  webrtcbin 1.22 negotiates neither for a transceiver of its own), and
  `rid_order: "lmh"` in the publish's jsep. --no-mid leaves the mid
  extension out: Janus then drops every packet.

Then one subscriber per layer (a receive-only webrtcbin each, Janus
offering) asks for that layer (`configure` with `substream`), decodes
what comes and reports the width of its frames. Prints what Janus said
of the publisher's stream (`simulcast` in its publisher list) and each
subscriber's widths; exits 0 when each subscriber got the layer it asked
for.

Everything on loopback; nothing is built; the Janus is stopped at exit."""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
gi.require_version("GstRtp", "1.0")
# GstRtp: GstRTPHeaderExtension's methods (set_id) on the extensions
from gi.repository import GLib, Gst, GstRtp, GstSdp, GstWebRTC  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WIDTHS = [160, 320, 640]
SSRCS = [1111, 2222, 3333]
PT = 96


class Janus:
    """A session on Janus's HTTP API, with a thread that long-polls its
    events and hands each to on_event on the main loop."""

    def __init__(self, url):
        self.url = url
        self.handlers = {}
        self.session = self.post(url, {"janus": "create"})["data"]["id"]
        self.polling = True
        threading.Thread(target=self.poll, daemon=True).start()

    def post(self, url, body):
        body = dict(body, transaction=str(time.monotonic_ns()))
        req = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def attach(self, on_event):
        handle = self.post(f"{self.url}/{self.session}", {
            "janus": "attach",
            "plugin": "janus.plugin.videoroom"})["data"]["id"]
        self.handlers[handle] = on_event
        return handle

    def message(self, handle, body, jsep=None):
        msg = {"janus": "message", "body": body}
        if jsep:
            msg["jsep"] = jsep
        return self.post(f"{self.url}/{self.session}/{handle}", msg)

    def trickle(self, handle, mline, candidate):
        c = {"completed": True} if candidate is None else {
            "sdpMLineIndex": mline, "candidate": candidate}
        self.post(f"{self.url}/{self.session}/{handle}",
                  {"janus": "trickle", "candidate": c})

    def poll(self):
        while self.polling:
            try:
                with urllib.request.urlopen(
                        f"{self.url}/{self.session}?maxev=10",
                        timeout=40) as r:
                    events = json.loads(r.read())
            except (OSError, ValueError, http.client.HTTPException):
                continue
            for ev in events if isinstance(events, list) else [events]:
                cb = self.handlers.get(ev.get("sender"))
                if cb:
                    GLib.idle_add(cb, ev)


def sdp_text(desc):
    return desc.sdp.as_text()


def munge_offer(sdp, layers, mode, mid_ext):
    """The offer webrtcbin made, with the layers announced."""
    out = []
    in_video = False
    for line in sdp.splitlines():
        if line.startswith("m="):
            in_video = line.startswith("m=video")
        if in_video and line.startswith("a=ssrc"):
            continue            # webrtcbin's one SSRC: replaced below
        out.append(line)
        if in_video and line.startswith("a=mid:"):
            if mode == "ssrc":
                out.append("a=ssrc-group:SIM " + " ".join(
                    str(s) for s in SSRCS[:layers]))
                for s in SSRCS[:layers]:
                    out.append(f"a=ssrc:{s} cname:legba-simulcast")
                    out.append(f"a=ssrc:{s} msid:legba video")
            else:
                out.append("a=extmap:9 urn:ietf:params:rtp-hdrext:sdes:"
                           "rtp-stream-id")
                if mid_ext:
                    out.append("a=extmap:10 urn:ietf:params:rtp-hdrext:"
                               "sdes:mid")
                for i in range(layers):
                    out.append(f"a=rid:{i} send")
                out.append("a=simulcast:send " + ";".join(
                    str(i) for i in range(layers)))
    return "\r\n".join(out) + "\r\n"


def sdp_message(text):
    _, msg = GstSdp.SDPMessage.new()
    GstSdp.sdp_message_parse_buffer(text.encode(), msg)
    return msg


class Publisher:
    def __init__(self, janus, room, layers, mode, done, mid_ext=True):
        self.janus, self.room, self.layers, self.mode = \
            janus, room, layers, mode
        self.done = done
        self.offer_sent = None
        self.answer = None
        branches = []
        for i in range(layers):
            w = WIDTHS[i]
            branches.append(
                f"t. ! queue ! videoscale ! video/x-raw,width={w},"
                f"height={w * 9 // 16} ! x264enc tune=zerolatency "
                f"speed-preset=ultrafast key-int-max=15 "
                f"bitrate={w // 2} ! video/x-h264,profile="
                f"constrained-baseline ! rtph264pay name=pay{i} "
                f"config-interval=-1 pt={PT} ssrc={SSRCS[i]} "
                "aggregate-mode=zero-latency ! f.")
        desc = ("videotestsrc is-live=true pattern=ball ! video/x-raw,"
                f"width={WIDTHS[layers - 1]},height="
                f"{WIDTHS[layers - 1] * 9 // 16},framerate=15/1 ! tee "
                "name=t " + " ".join(branches) +
                " rtpfunnel name=f ! webrtcbin name=w "
                "bundle-policy=max-bundle")
        self.pipe = Gst.parse_launch(desc)
        self.w = self.pipe.get_by_name("w")
        self.mids = []
        if mode == "rid":
            # the RTP stream id (id 9) and mid (id 10) extensions on each
            # layer's packets: Janus reads the rid only from a packet that
            # has a mid too (janus_ice_cb_nice_recv())
            for i in range(layers):
                pay = self.pipe.get_by_name(f"pay{i}")
                ext = Gst.ElementFactory.make("rtphdrextstreamid")
                ext.set_property("rid", str(i))
                ext.set_id(9)
                pay.emit("add-extension", ext)
                if mid_ext:
                    mid = Gst.ElementFactory.make("rtphdrextmid")
                    mid.set_id(10)
                    pay.emit("add-extension", mid)
                    self.mids.append(mid)
        caps = Gst.Caps.from_string(
            f"application/x-rtp,media=video,encoding-name=H264,payload={PT},"
            "clock-rate=90000,packetization-mode=(string)1,"
            "profile-level-id=(string)42e01f")
        trans = self.w.emit("get-transceiver", 0)
        trans.set_property("codec-preferences", caps)
        trans.set_property("direction",
                           GstWebRTC.WebRTCRTPTransceiverDirection.SENDONLY)
        self.sent = 0
        self.w.get_static_pad("sink_0").add_probe(
            Gst.PadProbeType.BUFFER, self.count_sent)
        bus = self.pipe.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", lambda b, m: print(
            "publisher error:", m.parse_error(), file=sys.stderr))
        self.w.connect("on-negotiation-needed", self.on_negotiation_needed)
        self.w.connect("on-ice-candidate", self.on_candidate)
        self.handle = janus.attach(self.on_event)

    def count_sent(self, pad, info):
        self.sent += 1
        return Gst.PadProbeReturn.OK

    def start(self):
        self.janus.message(self.handle, {
            "request": "join", "ptype": "publisher", "room": self.room,
            "display": "simulcast-publisher"})
        self.pipe.set_state(Gst.State.PLAYING)

    def on_negotiation_needed(self, w):
        p = Gst.Promise.new_with_change_func(self.on_offer, None)
        w.emit("create-offer", None, p)

    def on_offer(self, promise, _):
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply else None
        if offer is None:
            print("publisher: webrtcbin made no offer:", reply and
                  reply.to_string(), file=sys.stderr)
            return
        text = munge_offer(sdp_text(offer), self.layers, self.mode,
                           bool(self.mids))
        for line in text.splitlines():
            if line.startswith("a=mid:"):
                for m in self.mids:
                    m.set_property("mid", line[6:])
                break
        self.offer_sent = text
        desc = GstWebRTC.WebRTCSessionDescription.new(
            GstWebRTC.WebRTCSDPType.OFFER, sdp_message(text))
        self.w.emit("set-local-description", desc, None)
        GLib.idle_add(self.send_offer, text)

    def send_offer(self, text):
        jsep = {"type": "offer", "sdp": text}
        if self.mode == "rid":
            # the rids are listed smallest first; Janus takes the first for
            # the highest unless told
            jsep["rid_order"] = "lmh"
        self.janus.message(self.handle, {"request": "publish"}, jsep)
        return False

    def on_candidate(self, w, mline, candidate):
        GLib.idle_add(lambda: self.janus.trickle(self.handle, mline,
                                                 candidate) and False)

    def on_event(self, ev):
        jsep = ev.get("jsep")
        data = ev.get("plugindata", {}).get("data", {})
        if data.get("videoroom") == "joined":
            self.feed = data["id"]
        if jsep and jsep.get("type") == "answer":
            self.answer = jsep["sdp"]
            desc = GstWebRTC.WebRTCSessionDescription.new(
                GstWebRTC.WebRTCSDPType.ANSWER, sdp_message(jsep["sdp"]))
            self.w.emit("set-remote-description", desc, None)
            self.done()
        if data.get("error"):
            print("publisher:", data["error"], file=sys.stderr)
        return False


class Subscriber:
    """Receives the feed and asks for one layer; records frame widths."""

    def __init__(self, janus, room, feed, substream):
        self.janus, self.room, self.feed = janus, room, feed
        self.substream = substream
        self.widths = {}
        self.pipe = Gst.Pipeline()
        self.rtp = 0
        bus = self.pipe.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", lambda b, m: print(
            f"subscriber {substream} error:", m.parse_error(),
            file=sys.stderr))
        self.w = Gst.ElementFactory.make("webrtcbin")
        self.w.set_property("bundle-policy", "max-bundle")
        self.pipe.add(self.w)
        self.w.connect("pad-added", self.on_pad)
        self.w.connect("on-ice-candidate", self.on_candidate)
        self.handle = janus.attach(self.on_event)
        self.mid = None
        self.pipe.set_state(Gst.State.PLAYING)
        janus.message(self.handle, {
            "request": "join", "ptype": "subscriber", "room": room,
            "streams": [{"feed": feed}]})

    def on_pad(self, w, pad):
        if pad.direction != Gst.PadDirection.SRC:
            return
        self.rtp = 0
        pad.add_probe(Gst.PadProbeType.BUFFER, self.count_rtp)
        dec = Gst.parse_bin_from_description(
            "queue ! rtph264depay ! avdec_h264 ! videoconvert ! "
            "fakesink name=sink sync=false", True)
        self.pipe.add(dec)
        dec.sync_state_with_parent()
        res = pad.link(dec.get_static_pad("sink"))
        if res != Gst.PadLinkReturn.OK:
            print(f"subscriber {self.substream}: link {res}",
                  file=sys.stderr)
        sink = dec.get_by_name("sink")
        sink.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER,
                                              self.count)

    def count_rtp(self, pad, info):
        self.rtp += 1
        return Gst.PadProbeReturn.OK

    def count(self, pad, info):
        caps = pad.get_current_caps()
        if caps:
            width = caps.get_structure(0).get_value("width")
            self.widths[width] = self.widths.get(width, 0) + 1
        return Gst.PadProbeReturn.OK

    def on_candidate(self, w, mline, candidate):
        GLib.idle_add(lambda: self.janus.trickle(self.handle, mline,
                                                 candidate) and False)

    def on_event(self, ev):
        jsep = ev.get("jsep")
        data = ev.get("plugindata", {}).get("data", {})
        if data.get("error"):
            print("subscriber:", data["error"], file=sys.stderr)
        if jsep and jsep.get("type") == "offer":
            for s in data.get("streams", []):
                if s.get("type") == "video":
                    self.mid = s.get("mid")
            self.offer = GstWebRTC.WebRTCSessionDescription.new(
                GstWebRTC.WebRTCSDPType.OFFER, sdp_message(jsep["sdp"]))
            p = Gst.Promise.new_with_change_func(self.on_remote_set, None)
            self.w.emit("set-remote-description", self.offer, p)
        return False

    def on_remote_set(self, promise, _):
        reply = promise.get_reply()
        if reply is not None and reply.has_field("error"):
            print(f"subscriber {self.substream}: Janus's offer refused:",
                  reply.get_value("error"), file=sys.stderr)
            return
        p = Gst.Promise.new_with_change_func(self.on_answer, None)
        self.w.emit("create-answer", None, p)

    def on_answer(self, promise, _):
        reply = promise.get_reply()
        answer = reply.get_value("answer") if reply else None
        if answer is None:
            print(f"subscriber {self.substream}: webrtcbin made no answer:",
                  reply and reply.to_string(), file=sys.stderr)
            return
        self.w.emit("set-local-description", answer, None)
        text = sdp_text(answer)
        GLib.idle_add(self.send_answer, text)

    def send_answer(self, text):
        self.janus.message(self.handle, {"request": "start"},
                           {"type": "answer", "sdp": text})
        self.janus.message(self.handle, {
            "request": "configure",
            "streams": [{"mid": self.mid or "0",
                         "substream": self.substream}]})
        return False


def start_janus(workdir):
    env = dict(os.environ, JANUS_API_SECRET="")
    out = subprocess.run(
        [os.path.join(ROOT, "tests", "common", "start-janus.sh"),
         os.path.join(workdir, "janus")], env=env, capture_output=True,
        text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines()
                if "=" in line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2, choices=[2, 3])
    ap.add_argument("--mode", default="ssrc", choices=["ssrc", "rid"])
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--no-mid", action="store_true",
                    help="--mode rid without the mid header extension")
    args = ap.parse_args()
    Gst.init(None)
    loop = GLib.MainLoop()
    with tempfile.TemporaryDirectory(prefix="legba-simulcast-") as workdir:
        j = start_janus(workdir)
        try:
            return run(args, j, loop, workdir)
        finally:
            subprocess.run([os.path.join(ROOT, "tests", "common",
                                         "start-janus.sh"), "--stop",
                            os.path.join(workdir, "janus")])


def run(args, j, loop, workdir):
    janus = Janus(j["JANUS_HTTP_URL"])
    admin = janus.attach(lambda ev: False)
    room = janus.message(admin, {
        "request": "create", "admin_key": j["JANUS_ADMIN_KEY"],
        "publishers": 4, "videocodec": "h264",
        "h264_profile": "42e01f"})["plugindata"]["data"]["room"]
    subs = []
    state = {}

    def published():
        GLib.timeout_add(3000, subscribe)

    def subscribe():
        lst = janus.message(admin, {"request": "listparticipants",
                                    "room": room})
        state["participants"] = lst["plugindata"]["data"]["participants"]
        # the publisher list, as a joining participant gets it
        probe = janus.attach(lambda ev: state.setdefault(
            "joined", ev.get("plugindata", {}).get("data")) and False)
        janus.message(probe, {"request": "join", "ptype": "publisher",
                              "room": room, "display": "probe"})
        for i in range(args.layers):
            subs.append(Subscriber(janus, room, pub.feed, i))
        GLib.timeout_add(int(args.seconds * 1000), loop.quit)
        return False

    pub = Publisher(janus, room, args.layers, args.mode, published,
                    not args.no_mid)
    pub.start()
    GLib.timeout_add(60000, loop.quit)
    loop.run()
    janus.polling = False
    with open(os.path.join(workdir, "janus", "janus.log")) as f:
        log = [l.rstrip() for l in f
               if any(w in l for w in ("SSRC", "imulcast", "substream",
                                       "media is now", "DTLS", "ICE",
                                       "rid", "WARN", "ERR"))
               and "has been disabled" not in l]
    print(f"RTP packets into the publisher's webrtcbin: {pub.sent}")
    print("offer sent (video m-line):")
    print("\n".join(l for l in (pub.offer_sent or "").splitlines()
                    if l.startswith(("a=ssrc", "a=rid", "a=simulcast",
                                     "a=extmap", "m=video"))))
    print("answer's video lines:")
    print("\n".join(l for l in (pub.answer or "").splitlines()
                    if l.startswith(("a=ssrc", "a=rid", "a=simulcast",
                                     "a=extmap:", "m=video"))))
    joined = state.get("joined") or {}
    for p in joined.get("publishers", []):
        print("Janus lists publisher", p.get("display"), "streams:",
              json.dumps(p.get("streams")))
    print("Janus log lines on SSRCs and simulcast:")
    print("\n".join(log[-40:]))
    ok = True
    for s in subs:
        print(f"subscriber asking for substream {s.substream}: {s.rtp} "
              f"RTP packets, frame widths {s.widths}")
        want = WIDTHS[s.substream]
        if not s.widths or max(s.widths, key=s.widths.get) != want:
            ok = False
    for s in subs:
        s.pipe.set_state(Gst.State.NULL)
    pub.pipe.set_state(Gst.State.NULL)
    print("each subscriber got the layer it asked for" if ok else
          "NOT each subscriber got the layer it asked for")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""legba-server soak: one server process under a mixed load for a bounded
time, watched each second (docs/benchmarks.md, "The soak").

The load, all on 127.0.0.1, every rate and count bounded:
  watchers   well-behaved sockets on the public channel soak-public and
             the presence channel presence-soak; each must receive every
             HTTP API event, in order, and end with the presence list the
             server ends with
  idle       sockets subscribed to soak-idle, which gets one event every
             5 s; each must receive all of them
  pairs      two sockets on private-soak-N bouncing client events; each
             must receive every event the other sent, in order
  publisher  HTTP API events to soak-public at a steady rate
  churn      short-lived sockets: connect, subscribe, join presence-soak
             (every other one), stay a moment, leave cleanly or drop the
             TCP connection
  hostile    a socket that never reads (and pings), one that sends its
             handshake a byte at a time, one that sends a frame a byte at a
             time, one that sends garbage and an oversize frame, one that
             subscribes to more channels than allowed; each reconnects
             when the server closes it
Round trips are timed by `legba-probe rtt` (pusher:ping and a client-event
relay, C, a process of its own): quiet before the load (the quiet figure),
over and over during it, and quiet again after. Each run against the server
is followed by one against the control: a second legba-server process that
nothing but the probe talks to, so that what the load does to the machine
(scheduling, caches, the generator) is measured beside what it does to the
server. On a machine with two CPUs or more, the server, the control and the
probe run on one CPU and the generator (this process) on the others: a
round trip between two CPUs costs two cross-CPU wake-ups, which on a small
virtual machine doubles a loopback round trip, and left to itself the
scheduler puts the probe and the server on one CPU or two as the rest of
the machine happens to be busy (docs/benchmarks.md, "The soak").

Verdict: every load run's p50 round trips within 2x the quiet ones; nothing
lost by any well-behaved socket; no GLib critical or warning in the server's
log; RSS and descriptors flat after the warm-up; the server exits 0 on
SIGTERM. Writes the JSON result and a summary. Standard library only.
"""

import argparse
import asyncio
import base64
import datetime
import hashlib
import hmac
import json
import os
import random
import re
import resource
import signal
import statistics
import struct
import subprocess
import sys
import time

APP_ID = "soak"
APP_KEY = "soak-key"
APP_SECRET = "soak-secret"
HOST = "127.0.0.1"
PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")
IO_TIMEOUT = 20          # seconds for any one exchange a client waits on


class SoakError(Exception):
    pass


# ---- The server process ----

def proc_sample(pid):
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * PAGE
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return {"t": time.monotonic(), "rss": rss,
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "cpu_s": cpu}


def schedstat(pid):
    """The process's main thread: nanoseconds on a CPU, nanoseconds waiting
    for one while runnable, and the number of times it ran."""
    with open(f"/proc/{pid}/schedstat") as f:
        run, wait, slices = (int(x) for x in f.read().split())
    return {"run_ns": run, "wait_ns": wait, "timeslices": slices}


def sched_phases(marks):
    """Per phase between two schedstat marks: the mean wait for a CPU each
    time the thread became runnable, and the run time per timeslice."""
    out = {}
    for (name, a), (_, b) in zip(marks, marks[1:]):
        slices = b["timeslices"] - a["timeslices"]
        out[name] = {"timeslices": slices,
                     "wait_us_per_slice": (b["wait_ns"] - a["wait_ns"]) /
                     1000 / slices if slices else None,
                     "run_us_per_slice": (b["run_ns"] - a["run_ns"]) /
                     1000 / slices if slices else None}
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


class pinned:
    """Runs the calling thread (and what it starts) on cpus; None: as it
    was. Linux applies sched_setaffinity(0) to the calling thread only."""

    def __init__(self, cpus):
        self.cpus = cpus
        self.old = None

    def __enter__(self):
        if self.cpus is not None:
            self.old = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.cpus)

    def __exit__(self, *exc):
        if self.old is not None:
            os.sched_setaffinity(0, self.old)


def placement(args):
    """Which CPUs the server (and the control), the probe and the generator
    run on: None each when not pinned."""
    allowed = sorted(os.sched_getaffinity(0))
    server_cpu = allowed[-1] if args.server_cpu is None else args.server_cpu
    if len(allowed) < 2 or server_cpu < 0:
        return {"allowed": allowed, "server": None, "probe": None,
                "generator": None}
    probe_cpu = server_cpu if args.probe_cpu is None else args.probe_cpu
    for cpu in (server_cpu, probe_cpu):
        if cpu not in allowed:
            raise SoakError(f"CPU {cpu} is not one of {allowed}")
    generator = [c for c in allowed if c not in (server_cpu, probe_cpu)] \
        or [c for c in allowed if c != server_cpu]
    return {"allowed": allowed, "server": [server_cpu], "probe": [probe_cpu],
            "generator": generator}


class Server:
    def __init__(self, binary, workdir, max_channels):
        self.binary = binary
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.config = os.path.join(workdir, "legba.conf")
        self.log_path = os.path.join(workdir, "legba-server.log")
        with open(self.config, "w") as f:
            f.write(f"[limits]\nmax-channels-per-socket={max_channels}\n\n"
                    f"[app soak]\nid={APP_ID}\nkey={APP_KEY}\n"
                    f"secret={APP_SECRET}\n")
        self.proc = None
        self.port = None

    def start(self, cpus=None):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        env = dict(os.environ)
        env.pop("G_DEBUG", None)        # criticals are counted, not fatal
        self.log = open(self.log_path, "w")
        with pinned(cpus):
            self.proc = subprocess.Popen(
                [self.binary, "--config", self.config, "--bind", HOST,
                 "--port", "0"], stdout=self.log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                m = re.search(r"^legba-server listening on .*:(\d+)$",
                              f.read(), re.M)
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                raise SoakError(f"legba-server exited: {self.log_path}")
            time.sleep(0.05)
        raise SoakError("legba-server did not print its listening line")

    def stop(self):
        """SIGTERM; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def log_problems(self):
        """GLib criticals and warnings (any domain) in the log, and
        sanitizer reports when the server is a sanitized build."""
        with open(self.log_path, errors="replace") as f:
            return [line.rstrip() for line in f
                    if re.search(r"-(CRITICAL|WARNING|ERROR) \*\*|"
                                 r"ERROR: \w+Sanitizer|runtime error:", line)]


# ---- A WebSocket client (RFC 6455): what the soak needs ----

class Closed(Exception):
    def __init__(self, code=None):
        super().__init__(f"closed ({code})")
        self.code = code


def ws_frame(opcode, payload):
    """A masked client frame."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) \
        if n < 4096 else _mask_large(payload, mask)
    return head + mask + body


def _mask_large(payload, mask):
    whole = (mask * (len(payload) // 4 + 1))[:len(payload)]
    return (int.from_bytes(payload, "big") ^
            int.from_bytes(whole, "big")).to_bytes(len(payload), "big")


def upgrade_request(port):
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /app/{APP_KEY}?protocol=7 HTTP/1.1\r\n"
            f"Host: {HOST}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode()


class Ws:
    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port, limit=2 ** 16):
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(HOST, port, limit=limit), IO_TIMEOUT)
        writer.write(upgrade_request(port))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                      IO_TIMEOUT)
        if not head.startswith(b"HTTP/1.1 101"):
            writer.close()
            raise SoakError(f"handshake refused: {head[:40]!r}")
        return cls(reader, writer)

    def send_raw(self, data):
        self.writer.write(data)

    def send(self, obj):
        self.writer.write(ws_frame(0x1, json.dumps(obj).encode()))

    async def recv(self):
        """The next text message as a dict; answers pings itself."""
        parts = []
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(n)
            opcode = b0 & 0x0f
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] \
                    if len(payload) >= 2 else None
                raise Closed(code)
            if opcode == 0x9:
                self.writer.write(ws_frame(0xA, payload))
                continue
            if opcode in (0x1, 0x0, 0x2):
                parts.append(payload)
                if b0 & 0x80:
                    if opcode == 0x2 or (opcode == 0x0 and not parts):
                        parts = []
                        continue
                    return json.loads(b"".join(parts))

    def close(self, clean=True):
        try:
            if clean:
                self.writer.write(ws_frame(0x8, struct.pack("!H", 1000)))
                self.writer.close()
            else:
                self.writer.transport.abort()
        except Exception:
            pass


def decode_data(event):
    data = event.get("data")
    if isinstance(data, str):
        try:
            return json.loads(data)
        except ValueError:
            return data
    return data


def sign(text):
    return hmac.new(APP_SECRET.encode(), text.encode(),
                    hashlib.sha256).hexdigest()


class Pusher:
    """A well-behaved Pusher protocol 7 client: answers pusher:ping and
    hands every other event to on_event."""

    def __init__(self, name, on_event=None):
        self.name = name
        self.on_event = on_event or (lambda e: None)
        self.ws = None
        self.socket_id = None
        self.waiting = {}       # channel -> Future of its subscription
        self.task = None
        self.closed = None      # the close code, once closed

    async def open(self, port):
        self.ws = await Ws.connect(port)
        first = await asyncio.wait_for(self.ws.recv(), IO_TIMEOUT)
        if first.get("event") != "pusher:connection_established":
            raise SoakError(f"{self.name}: {first}")
        self.socket_id = decode_data(first)["socket_id"]
        self.task = asyncio.ensure_future(self._read())

    async def _read(self):
        try:
            while True:
                event = await self.ws.recv()
                name = event.get("event")
                channel = event.get("channel")
                if name == "pusher:ping":
                    self.ws.send({"event": "pusher:pong", "data": {}})
                elif name in ("pusher_internal:subscription_succeeded",
                              "pusher:subscription_error"):
                    waiter = self.waiting.pop(channel, None)
                    if waiter and not waiter.done():
                        waiter.set_result(event)
                    self.on_event(event)
                else:
                    self.on_event(event)
        except Closed as e:
            self.closed = e.code
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            self.closed = -1
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(SoakError(f"{self.name} closed"))

    async def subscribe(self, channel, user_id=None):
        data = {"channel": channel}
        if user_id is not None:
            channel_data = json.dumps({"user_id": user_id,
                                       "user_info": {"name": user_id}})
            data["channel_data"] = channel_data
            data["auth"] = f"{APP_KEY}:" + sign(
                f"{self.socket_id}:{channel}:{channel_data}")
        elif channel.startswith("private-"):
            data["auth"] = f"{APP_KEY}:" + sign(f"{self.socket_id}:{channel}")
        waiter = asyncio.get_running_loop().create_future()
        self.waiting[channel] = waiter
        self.ws.send({"event": "pusher:subscribe", "data": data})
        event = await asyncio.wait_for(waiter, IO_TIMEOUT)
        if event["event"] != "pusher_internal:subscription_succeeded":
            raise SoakError(f"{self.name}: {channel} refused: {event}")
        return decode_data(event)

    def close(self, clean=True):
        if self.ws:
            self.ws.close(clean)
        if self.task:
            self.task.cancel()


# ---- HTTP ----

async def http(port, method, path, body=b"", signed=True):
    params = {}
    if signed:
        params = {"auth_key": APP_KEY,
                  "auth_timestamp": str(int(time.time())),
                  "auth_version": "1.0"}
        if body:
            params["body_md5"] = hashlib.md5(body).hexdigest()
        query = "&".join(f"{k}={params[k]}" for k in sorted(params))
        params["auth_signature"] = sign(f"{method}\n{path}\n{query}")
    query = "&".join(f"{k}={v}" for k, v in params.items())
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(HOST, port), IO_TIMEOUT)
    try:
        writer.write((f"{method} {path}{'?' + query if query else ''} "
                      f"HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
                      "Content-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n"
                      "Connection: close\r\n\r\n").encode() + body)
        raw = await asyncio.wait_for(reader.read(), IO_TIMEOUT)
    finally:
        writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, rest


async def publish(port, channel, event, data):
    body = json.dumps({"name": event, "channels": [channel],
                       "data": json.dumps(data)}).encode()
    status, _ = await http(port, "POST", f"/apps/{APP_ID}/events", body)
    return status


# ---- The load ----

class Load:
    def __init__(self, port, args):
        self.port = port
        self.args = args
        self.running = True
        self.tasks = []
        self.stats = {
            "published": 0, "publish_failures": 0,
            "idle_published": 0,
            "churn": {"connected": 0, "joined": 0, "dropped": 0,
                      "failures": 0, "failure_samples": []},
            "client_events_sent": 0, "client_event_errors": 0,
            "hostile": {},
        }
        self.watchers = []      # (Pusher, record)
        self.idle = []
        self.pairs = []         # [(a, a_record), (b, b_record)]

    def hostile_count(self, who, what):
        counts = self.stats["hostile"].setdefault(who, {})
        counts[what] = counts.get(what, 0) + 1

    # -- well-behaved, long-lived --

    async def start_watchers(self):
        for i in range(self.args.watchers):
            record = {"seqs": [], "members": set(), "errors": []}
            p = Pusher(f"watcher-{i}", self._watcher_event(record))
            await p.open(self.port)
            await p.subscribe("soak-public")
            presence = await p.subscribe("presence-soak", f"watcher-{i}")
            record["members"] = set(presence["presence"]["ids"])
            self.watchers.append((p, record))

    @staticmethod
    def _watcher_event(record):
        def on_event(event):
            name = event.get("event")
            if name == "soak":
                record["seqs"].append(decode_data(event)["seq"])
            elif name == "pusher_internal:member_added":
                record["members"].add(decode_data(event)["user_id"])
            elif name == "pusher_internal:member_removed":
                record["members"].discard(decode_data(event)["user_id"])
            elif name == "pusher:error":
                record["errors"].append(event)
        return on_event

    async def start_idle(self):
        for i in range(self.args.idle):
            record = {"seqs": [], "errors": []}

            def on_event(event, record=record):
                if event.get("event") == "idle":
                    record["seqs"].append(decode_data(event)["seq"])
                elif event.get("event") == "pusher:error":
                    record["errors"].append(event)
            p = Pusher(f"idle-{i}", on_event)
            await p.open(self.port)
            await p.subscribe("soak-idle")
            self.idle.append((p, record))

    async def start_pairs(self):
        for i in range(self.args.pairs):
            pair = []
            for side in "ab":
                record = {"got": [], "sent": 0, "errors": []}

                def on_event(event, record=record):
                    if event.get("event") == "client-soak":
                        record["got"].append(decode_data(event)["seq"])
                    elif event.get("event") == "pusher:error":
                        record["errors"].append(event)
                p = Pusher(f"pair-{i}{side}", on_event)
                await p.open(self.port)
                await p.subscribe(f"private-soak-{i}")
                pair.append((p, record))
            self.pairs.append(pair)

    async def pair_sender(self, p, record, channel):
        period = 1 / self.args.client_event_rate
        while self.running:
            p.ws.send({"event": "client-soak", "channel": channel,
                       "data": {"seq": record["sent"]}})
            record["sent"] += 1
            self.stats["client_events_sent"] += 1
            await asyncio.sleep(period)

    async def publisher(self):
        period = 1 / self.args.publish_rate
        pad = "x" * self.args.event_bytes
        n = 0
        next_idle = time.monotonic()
        while self.running:
            status = await publish(self.port, "soak-public", "soak",
                                   {"seq": n, "pad": pad})
            if status == 200:
                self.stats["published"] += 1
                n += 1
            else:
                self.stats["publish_failures"] += 1
            if time.monotonic() >= next_idle:
                await self.publish_idle()
                next_idle += 5
            await asyncio.sleep(period)

    async def publish_idle(self):
        status = await publish(self.port, "soak-idle", "idle",
                               {"seq": self.stats["idle_published"]})
        if status == 200:
            self.stats["idle_published"] += 1
        else:
            self.stats["publish_failures"] += 1

    # -- churn --

    async def churner(self, k, slots):
        churn = self.stats["churn"]
        p = Pusher(f"churn-{k}")
        try:
            await p.open(self.port)
            await p.subscribe("soak-public")
            churn["connected"] += 1
            if k % 2 == 0:
                await p.subscribe("presence-soak", f"churn-{k}")
                churn["joined"] += 1
            await asyncio.sleep(random.uniform(0.2, 2.0))
            clean = random.random() < 0.5
            if not clean:
                churn["dropped"] += 1
            p.close(clean)
        except Exception as e:      # a well-behaved socket refused
            churn["failures"] += 1
            if len(churn["failure_samples"]) < 5:
                churn["failure_samples"].append(f"churn-{k}: {e!r}")
            p.close(False)
        finally:
            slots.release()

    async def churn(self):
        slots = asyncio.Semaphore(self.args.churn_concurrency)
        period = 1 / self.args.churn_rate
        k = 0
        while self.running:
            await slots.acquire()
            if not self.running:
                break
            self.tasks.append(asyncio.ensure_future(self.churner(k, slots)))
            k += 1
            await asyncio.sleep(period)

    # -- hostile --

    async def hostile_loop(self, who, body):
        """Runs body() again whenever the server closes it."""
        while self.running:
            try:
                await body()
                self.hostile_count(who, "rounds")
            except Closed as e:
                self.hostile_count(who, f"closed {e.code}")
            except (asyncio.IncompleteReadError, ConnectionError, OSError,
                    asyncio.TimeoutError, SoakError) as e:
                self.hostile_count(who, type(e).__name__)
            await asyncio.sleep(0.5)

    async def never_reads(self):
        """Subscribes to the busy channel, pings every second, never
        reads (asyncio stops reading once its small buffer is full)."""
        ws = await Ws.connect(self.port, limit=1024)
        try:
            ws.send({"event": "pusher:subscribe",
                     "data": {"channel": "soak-public"}})
            while self.running:
                ws.send({"event": "pusher:ping", "data": {}})
                await asyncio.wait_for(ws.writer.drain(), IO_TIMEOUT)
                await asyncio.sleep(1)
        finally:
            ws.close(False)

    async def slow_handshake(self):
        """The upgrade request, one byte every 0.5 s."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(HOST, self.port), IO_TIMEOUT)
        try:
            for byte in upgrade_request(self.port):
                if not self.running:
                    return
                writer.write(bytes([byte]))
                await writer.drain()
                if reader.at_eof():
                    raise Closed("eof")
                await asyncio.sleep(0.5)
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                   IO_TIMEOUT)
        finally:
            writer.transport.abort()

    async def slow_frame(self):
        """A subscription frame, one byte every 0.2 s, reading what comes."""
        p = Pusher("slow-frame")
        await p.open(self.port)
        try:
            frame = ws_frame(0x1, json.dumps({
                "event": "pusher:subscribe",
                "data": {"channel": "soak-slow"}}).encode())
            for byte in frame:
                if not self.running or p.closed is not None:
                    break
                p.ws.send_raw(bytes([byte]))
                await p.ws.writer.drain()
                await asyncio.sleep(0.2)
            if p.closed is not None:
                raise Closed(p.closed)
        finally:
            p.close(False)

    async def garbage(self):
        """Frames the server must refuse, one a second, on a socket it keeps;
        then one that closes it: an oversize frame (1009) or invalid UTF-8
        (1007), in turn."""
        errors = []
        p = Pusher("garbage", lambda e: errors.append(e))
        await p.open(self.port)
        self.garbage_rounds = getattr(self, "garbage_rounds", 0) + 1
        bad = [ws_frame(0x1, b"{not json"), ws_frame(0x2, b"\x00\x01"),
               ws_frame(0x1, b'{"event":"soak:unknown","data":{}}'),
               ws_frame(0x1, b'{"event":"client-x","channel":"soak-public",'
                        b'"data":{}}'),
               ws_frame(0x1, json.dumps({
                   "event": "pusher:subscribe",
                   "data": {"channel": "private-soak-0",
                            "auth": f"{APP_KEY}:forged"}}).encode())]
        last = ws_frame(0x1, b'{"event":"client-x","data":"' +
                        b"x" * 300000 + b'"}') \
            if self.garbage_rounds % 2 else ws_frame(0x1, b"\xff\xfe")
        try:
            for frame in bad + [last]:
                if not self.running or p.closed is not None:
                    break
                p.ws.send_raw(frame)
                await asyncio.sleep(1)
            deadline = time.monotonic() + IO_TIMEOUT
            while p.closed is None and self.running and \
                    time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            for e in errors:
                if e.get("event") == "pusher:error":
                    self.hostile_count("garbage", "pusher:error %s" %
                                       decode_data(e).get("code"))
            if p.closed is not None:
                self.hostile_count("garbage", f"closed {p.closed}")
            p.close(False)

    async def channel_hog(self):
        """Subscribes to more channels than a socket may hold, then leaves
        them all."""
        refused = []
        p = Pusher("hog", lambda e: refused.append(e)
                   if e.get("event") == "pusher:subscription_error" else None)
        await p.open(self.port)
        try:
            n = self.args.max_channels + 20
            for i in range(n):
                p.ws.send({"event": "pusher:subscribe",
                           "data": {"channel": f"soak-hog-{i}"}})
            await p.ws.writer.drain()
            deadline = time.monotonic() + IO_TIMEOUT
            while len(refused) < 20 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            self.hostile_count("hog", f"refused {len(refused)} of {n}")
            for i in range(n):
                p.ws.send({"event": "pusher:unsubscribe",
                           "data": {"channel": f"soak-hog-{i}"}})
            await asyncio.sleep(2)
        finally:
            p.close(True)

    # -- running it --

    async def start(self):
        await self.start_watchers()
        await self.start_idle()
        await self.start_pairs()
        self.tasks.append(asyncio.ensure_future(self.publisher()))
        self.tasks.append(asyncio.ensure_future(self.churn()))
        for i, pair in enumerate(self.pairs):
            for p, record in pair:
                self.tasks.append(asyncio.ensure_future(
                    self.pair_sender(p, record, f"private-soak-{i}")))
        if not self.args.no_hostile:
            for who, body in [("never-reads", self.never_reads),
                              ("slow-handshake", self.slow_handshake),
                              ("slow-frame", self.slow_frame),
                              ("garbage", self.garbage),
                              ("hog", self.channel_hog)]:
                self.tasks.append(asyncio.ensure_future(
                    self.hostile_loop(who, body)))

    async def stop(self):
        self.running = False
        await asyncio.wait(self.tasks, timeout=IO_TIMEOUT + 5)
        for t in self.tasks:
            t.cancel()

    async def drain(self):
        """Waits until every well-behaved socket has what was sent to it
        (or IO_TIMEOUT), a last idle event included."""
        await self.publish_idle()
        deadline = time.monotonic() + IO_TIMEOUT
        while time.monotonic() < deadline:
            if all(len(r["seqs"]) >= self.stats["published"]
                   for _, r in self.watchers) and \
               all(len(r["seqs"]) >= self.stats["idle_published"]
                   for _, r in self.idle) and \
               all(len(a[1]["got"]) >= b[1]["sent"] and
                   len(b[1]["got"]) >= a[1]["sent"]
                   for a, b in self.pairs):
                return
            await asyncio.sleep(0.1)

    def losses(self):
        """What well-behaved sockets missed, got twice or out of order."""
        problems = []

        def check(name, got, expected):
            if got != list(range(expected)):
                missing = sorted(set(range(expected)) - set(got))
                problems.append(f"{name}: got {len(got)} of {expected}, "
                                f"missing {missing[:5]}, in order: "
                                f"{got == sorted(got)}")

        for p, r in self.watchers:
            check(p.name, r["seqs"], self.stats["published"])
        for p, r in self.idle:
            check(p.name, r["seqs"], self.stats["idle_published"])
        for a, b in self.pairs:
            check(a[0].name, a[1]["got"], b[1]["sent"])
            check(b[0].name, b[1]["got"], a[1]["sent"])
        for p, r in self.watchers + self.idle + [x for pr in self.pairs
                                                 for x in pr]:
            if r["errors"]:
                problems.append(f"{p.name}: pusher:error {r['errors'][:2]}")
            if p.closed is not None:
                problems.append(f"{p.name}: closed ({p.closed})")
        churn = self.stats["churn"]
        if churn["failures"]:
            problems.append(f"churn: {churn['failures']} failed: "
                            f"{churn['failure_samples']}")
        if self.stats["publish_failures"]:
            problems.append(f"{self.stats['publish_failures']} publishes "
                            "refused")
        return problems

    async def presence_check(self):
        """Once every churner has left, the server's presence-soak list and
        every watcher's own are the watchers."""
        expected = {p.name for p, _ in self.watchers}
        deadline = time.monotonic() + IO_TIMEOUT
        server = None
        while time.monotonic() < deadline:
            status, body = await http(
                self.port, "GET",
                f"/apps/{APP_ID}/channels/presence-soak/users")
            server = {u["id"] for u in json.loads(body)["users"]} \
                if status == 200 else None
            if server == expected and all(r["members"] == expected
                                          for _, r in self.watchers):
                return []
            await asyncio.sleep(0.2)
        problems = [f"server presence list: {sorted(server or [])[:8]} "
                    f"({len(server or [])}), expected the "
                    f"{len(expected)} watchers"] if server != expected else []
        for p, r in self.watchers:
            if r["members"] != expected:
                problems.append(f"{p.name} ends with {len(r['members'])} "
                                "members")
        return problems

    def close_all(self):
        for p, _ in self.watchers + self.idle + [x for pr in self.pairs
                                                 for x in pr]:
            p.close(True)


# ---- Round trips: legba-probe rtt ----

def rtt_run(probe, port, count, cpus=None):
    """One `legba-probe rtt` run; in an executor thread, which it pins
    (with the probe it starts) to cpus for the while."""
    with pinned(cpus):
        r = subprocess.run([probe, "rtt", "--url", f"ws://{HOST}:{port}",
                            "--app-id", APP_ID, "--app-key", APP_KEY,
                            "--app-secret", APP_SECRET, "--count", str(count),
                            "--json", "--timeout", "60"],
                           capture_output=True, text=True, timeout=90)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip()[-500:],
                "t": time.monotonic()}
    result = json.loads(r.stdout)
    result["t"] = time.monotonic()
    return result


async def rtt_series(args, targets, runs=None, until=None, gap=5):
    """Rounds of one run against each target (name -> Server) in turn, the
    server first; returns name -> the list of its runs, each with the
    target's run-queue wait and run time while it ran."""
    loop = asyncio.get_running_loop()
    out = {name: [] for name in targets}
    rounds = 0
    while (runs is None or rounds < runs) and \
            (until is None or time.monotonic() < until):
        for name, target in targets.items():
            before = schedstat(target.proc.pid)
            run = await loop.run_in_executor(
                None, rtt_run, args.legba_probe, target.port,
                args.rtt_count, args.placement["probe"])
            run["sched"] = sched_phases([("run", before), (
                "end", schedstat(target.proc.pid))])["run"]
            out[name].append(run)
        rounds += 1
        if runs is None or rounds < runs:
            await asyncio.sleep(gap if until else 1)
    return out


def quiet_figure(runs):
    ok = [r for r in runs if "error" not in r]
    if not ok:
        raise SoakError(f"no quiet round trip: {runs}")
    return {kind: {q: statistics.median(r[kind][q] for r in ok)
                   for q in ("p50", "p99")}
            for kind in ("ping_ms", "relay_ms")}


# ---- Sampling and the verdict ----

async def sampler(pid, samples, stop):
    while not stop.is_set():
        try:
            samples.append(proc_sample(pid))
        except (FileNotFoundError, ProcessLookupError):
            return
        try:
            await asyncio.wait_for(stop.wait(), 1)
        except asyncio.TimeoutError:
            pass


def flatness(samples, t0, warmup, window):
    """Median RSS and descriptors over the first and the last `window`
    seconds after the warm-up, and their least-squares slope."""
    after = [s for s in samples if s["t"] - t0 >= warmup]
    if len(after) < 4:
        return None
    first = [s for s in after if s["t"] - after[0]["t"] < window]
    last = [s for s in after if after[-1]["t"] - s["t"] < window]
    out = {"samples": len(after), "window_s": window}
    for key in ("rss", "fds"):
        xs = [s["t"] - t0 for s in after]
        ys = [s[key] for s in after]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var \
            if var else 0
        out[key] = {"first": statistics.median(s[key] for s in first),
                    "last": statistics.median(s[key] for s in last),
                    "min": min(ys), "max": max(ys),
                    "slope_per_min": slope * 60}
        out[key]["growth"] = out[key]["last"] - out[key]["first"]
    return out


def metrics_text(port):
    async def get():
        return await http(port, "GET", "/metrics", signed=False)
    return get()


def parse_metrics(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def verdict(result, args):
    checks = []
    quiet = result["rtt"]["quiet"]
    load_runs = [r for r in result["rtt"]["load"] if "error" not in r]
    failed_runs = [r for r in result["rtt"]["load"] if "error" in r]
    for kind in ("ping_ms", "relay_ms"):
        bound = args.rtt_factor * quiet[kind]["p50"]
        worst = max((r[kind]["p50"] for r in load_runs), default=None)
        checks.append({
            "check": f"{kind} p50 under load within {args.rtt_factor}x quiet",
            "ok": worst is not None and worst <= bound and not failed_runs,
            "quiet": quiet[kind]["p50"], "worst": worst, "bound": bound,
            "runs": len(load_runs), "failed_runs": len(failed_runs)})
    checks.append({"check": "nothing lost by well-behaved sockets",
                   "ok": not result["losses"],
                   "problems": result["losses"][:20]})
    checks.append({"check": "no GLib critical or warning in the log",
                   "ok": not result["log_problems"],
                   "lines": result["log_problems"][:10]})
    flat = result["flatness"]
    if flat is None:
        checks.append({"check": "RSS and descriptors flat after warm-up",
                       "ok": False, "why": "run too short"})
    else:
        rss_bound = max(args.rss_growth_mib * 2 ** 20,
                        0.05 * flat["rss"]["first"])
        checks.append({"check": "RSS flat after warm-up",
                       "ok": flat["rss"]["growth"] <= rss_bound,
                       "growth_mib": flat["rss"]["growth"] / 2 ** 20,
                       "bound_mib": rss_bound / 2 ** 20})
        checks.append({"check": "descriptors flat after warm-up",
                       "ok": flat["fds"]["growth"] <= args.fd_growth,
                       "growth": flat["fds"]["growth"],
                       "bound": args.fd_growth})
    checks.append({"check": "legba-server exits 0 on SIGTERM",
                   "ok": result["exit_status"] == 0,
                   "status": result["exit_status"]})
    return checks


def rtt_lines(who, rtt):
    q = rtt["quiet"]
    ok = [r for r in rtt["load"] if "error" not in r]
    lines = []
    for kind in ("ping_ms", "relay_ms"):
        if ok:
            lines.append(
                "%s %s p50: quiet %.3f, under load median %.3f, worst %.3f "
                "(%d runs); p99 quiet %.3f, under load median %.3f, worst "
                "%.3f; p50 quiet after %s" % (
                    who, kind, q[kind]["p50"],
                    statistics.median(r[kind]["p50"] for r in ok),
                    max(r[kind]["p50"] for r in ok), len(ok),
                    q[kind]["p99"],
                    statistics.median(r[kind]["p99"] for r in ok),
                    max(r[kind]["p99"] for r in ok),
                    ", ".join("%.3f" % r[kind]["p50"] for r in rtt["after"]
                              if "error" not in r)))
    return lines


def summary(result):
    pin = result["placement"]
    lines = [f"legba-server soak, {result['seconds']} s of load "
             f"({result['started']}), {result['source']}, "
             f"{result['config']['buildtype'] or 'build type not given'}",
             "CPUs: server and control %s, probe %s, generator %s (of %s); "
             "load average %s before, %s after" % (
                 pin["server"] or "any", pin["probe"] or "any",
                 pin["generator"] or "any", pin["allowed"],
                 " ".join("%.2f" % x for x in result["loadavg"]["before"]),
                 " ".join("%.2f" % x for x in result["loadavg"]["after"]))]
    flat = result["flatness"]
    if flat:
        lines.append(
            "RSS %.1f -> %.1f MiB after warm-up (max %.1f, slope %+.2f "
            "MiB/min); descriptors %d -> %d (max %d)" % (
                flat["rss"]["first"] / 2 ** 20, flat["rss"]["last"] / 2 ** 20,
                flat["rss"]["max"] / 2 ** 20,
                flat["rss"]["slope_per_min"] / 2 ** 20,
                flat["fds"]["first"], flat["fds"]["last"],
                flat["fds"]["max"]))
    lines += rtt_lines("server", result["rtt"])
    if result["control"]:
        lines += rtt_lines("control", result["control"])
    ok = [r for r in result["rtt"]["load"] if "error" not in r]
    if ok:
        worst = max(ok, key=lambda r: r["ping_ms"]["p50"] /
                    result["rtt"]["quiet"]["ping_ms"]["p50"])
        sched = worst["sched"]
        lines.append(
            "the server's worst ping run under load (p50 %.3f): it waited "
            "%.1f us for a CPU per timeslice and ran %.1f (%d timeslices) "
            "during that run, %.1f and %.1f in the median run" % (
                worst["ping_ms"]["p50"], sched["wait_us_per_slice"] or 0,
                sched["run_us_per_slice"] or 0, sched["timeslices"],
                statistics.median(r["sched"]["wait_us_per_slice"] or 0
                                  for r in ok),
                statistics.median(r["sched"]["run_us_per_slice"] or 0
                                  for r in ok)))
    for who, phases in sorted(result["sched"].items()):
        lines.append(f"{who} waits for a CPU: " + "; ".join(
            "%s %.1f us waiting per timeslice (%d), %.1f us running" % (
                phase, p["wait_us_per_slice"], p["timeslices"],
                p["run_us_per_slice"])
            for phase, p in phases.items() if p["timeslices"]))
    s = result["load"]
    lines.append(
        "load: %d API events to %d watchers, %d to %d idle sockets, %d "
        "client events over %d pairs, %d churned sockets (%d joined "
        "presence, %d dropped without a close), server CPU %.1f%%" % (
            s["published"], result["config"]["watchers"], s["idle_published"],
            result["config"]["idle"], s["client_events_sent"],
            result["config"]["pairs"], s["churn"]["connected"],
            s["churn"]["joined"], s["churn"]["dropped"],
            result["server_cpu_percent"]))
    for who, counts in sorted(s["hostile"].items()):
        lines.append(f"hostile {who}: " + ", ".join(
            f"{k} x{v}" for k, v in sorted(counts.items())))
    for c in result["checks"]:
        detail = {k: v for k, v in c.items() if k not in ("check", "ok")}
        lines.append(f"{'PASS' if c['ok'] else 'FAIL'}  {c['check']}  "
                     f"{json.dumps(detail, default=str)}")
    return "\n".join(lines)


async def soak(args, server, control):
    port = server.port
    pid = server.proc.pid
    targets = {"server": server}
    if control:
        targets["control"] = control
    samples = []
    marks = {name: [] for name in ("server", "control")}

    def mark(phase):
        for name, proc in (("server", server), ("control", control)):
            if proc:
                marks[name].append((phase, schedstat(proc.proc.pid)))

    stop_sampling = asyncio.Event()
    t0 = time.monotonic()
    loadavg_before = loadavg()
    sampling = asyncio.ensure_future(sampler(pid, samples, stop_sampling))

    print(f"soak: quiet round trips ({args.quiet_runs} runs)", flush=True)
    mark("quiet")
    quiet = await rtt_series(args, targets, runs=args.quiet_runs)
    mark("warm-up")
    load = Load(port, args)
    print(f"soak: {args.seconds} s of load", flush=True)
    await load.start()
    load_t0 = time.monotonic()
    end = load_t0 + args.seconds
    warmup = min(args.warmup, args.seconds / 4)
    # the first run once the warm-up is over
    await asyncio.sleep(min(warmup, args.seconds))
    mark("load")
    rtt_load = await rtt_series(args, targets, until=end - 2)
    await asyncio.sleep(max(0, end - time.monotonic()))
    mark("end")
    metrics_load = parse_metrics((await metrics_text(port))[1].decode())
    cpu = [s for s in samples if s["t"] >= load_t0]
    await load.stop()
    await load.drain()
    losses = load.losses() + await load.presence_check()
    load.close_all()
    print("soak: quiet round trips after", flush=True)
    after = await rtt_series(args, targets, runs=2)
    metrics_end = parse_metrics((await metrics_text(port))[1].decode())
    stop_sampling.set()
    await sampling

    exit_status = server.stop()
    rtt = {name: {"quiet": quiet_figure(quiet[name]),
                  "quiet_runs": quiet[name], "load": rtt_load[name],
                  "after": after[name]} for name in targets}
    result = {
        "config": {k: v for k, v in vars(args).items()},
        "seconds": args.seconds,
        "warmup_s": warmup,
        "placement": args.placement,
        "loadavg": {"before": loadavg_before, "after": loadavg()},
        "load": load.stats,
        "rtt": rtt["server"],
        "control": rtt.get("control"),
        "sched": {name: sched_phases(m) for name, m in marks.items() if m},
        "flatness": flatness([s for s in samples if s["t"] <= end], load_t0,
                             warmup, min(60, args.seconds / 5)),
        "samples": [{"t": round(s["t"] - t0, 2), "rss": s["rss"],
                     "fds": s["fds"], "cpu_s": s["cpu_s"]} for s in samples],
        "server_cpu_percent": 100 * (cpu[-1]["cpu_s"] - cpu[0]["cpu_s"]) /
        (cpu[-1]["t"] - cpu[0]["t"]) if len(cpu) > 1 else 0,
        "metrics_end_of_load": {k: v for k, v in metrics_load.items()
                                if "errors" in k or "total" in k or
                                k in ("legba_connections", "legba_sockets",
                                      "legba_subscriptions")},
        "metrics_end": {k: v for k, v in metrics_end.items()
                        if k in ("legba_connections", "legba_sockets",
                                 "legba_subscriptions",
                                 "legba_queued_bytes")},
        "losses": losses,
        "log_problems": server.log_problems(),
        "exit_status": exit_status,
    }
    return result


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--legba-server", required=True)
    ap.add_argument("--legba-probe", required=True)
    ap.add_argument("--seconds", type=float, default=600,
                    help="load duration (default 600)")
    ap.add_argument("--warmup", type=float, default=60,
                    help="seconds of load before RSS and descriptors are "
                    "judged and round trips timed (at most a quarter of the "
                    "run; default 60)")
    ap.add_argument("--watchers", type=int, default=20)
    ap.add_argument("--idle", type=int, default=1000,
                    help="idle subscribed sockets (default 1000: past the "
                    "255 that one GClosure holds)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--client-event-rate", type=float, default=4,
                    help="client events per second per pair side")
    ap.add_argument("--publish-rate", type=float, default=10,
                    help="HTTP API events per second to the watchers")
    ap.add_argument("--event-bytes", type=int, default=512)
    ap.add_argument("--churn-rate", type=float, default=5,
                    help="short-lived sockets started per second")
    ap.add_argument("--churn-concurrency", type=int, default=20)
    ap.add_argument("--max-channels", type=int, default=100,
                    help="the server's max-channels-per-socket")
    ap.add_argument("--no-hostile", action="store_true")
    ap.add_argument("--rtt-count", type=int, default=50)
    ap.add_argument("--quiet-runs", type=int, default=3)
    ap.add_argument("--rtt-factor", type=float, default=2.0)
    ap.add_argument("--no-control", action="store_true",
                    help="no control server: time the server alone")
    ap.add_argument("--server-cpu", type=int,
                    help="the CPU the server and the control run on "
                    "(default: the last one this process may use, when it "
                    "may use two or more; -1: no pinning at all)")
    ap.add_argument("--probe-cpu", type=int,
                    help="the CPU legba-probe runs on (default: the "
                    "server's); the generator runs on the others")
    ap.add_argument("--rss-growth-mib", type=float, default=2.0)
    ap.add_argument("--fd-growth", type=int, default=16)
    ap.add_argument("--buildtype", default="",
                    help="recorded in the result (soak.sh passes it)")
    ap.add_argument("--source", default=root)
    ap.add_argument("--output")
    args = ap.parse_args()

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y%m%dT%H%M%SZ")
    workdir = os.path.join(root, "bench", "results", "tmp",
                           f"soak-{stamp}")
    os.makedirs(workdir, exist_ok=True)
    output = args.output or os.path.join(root, "bench", "results", "tmp",
                                         f"soak-{stamp}.json")
    args.placement = placement(args)
    server = Server(args.legba_server, workdir, args.max_channels)
    control = None if args.no_control else Server(
        args.legba_server, os.path.join(workdir, "control"),
        args.max_channels)
    try:
        server.start(args.placement["server"])
        if control:
            control.start(args.placement["server"])
        if args.placement["generator"]:
            os.sched_setaffinity(0, args.placement["generator"])
        result = asyncio.run(soak(args, server, control))
    except BaseException:
        for proc in (server, control):
            if proc and proc.proc:
                proc.stop()
        raise
    if control:
        result["control_exit_status"] = control.stop()
        result["control_log_problems"] = control.log_problems()
    result["started"] = stamp
    result["source"] = subprocess.run(
        ["git", "-C", args.source, "describe", "--always", "--dirty"],
        capture_output=True, text=True).stdout.strip()
    result["server_log"] = server.log_path
    result["checks"] = verdict(result, args)
    text = summary(result)
    with open(output, "w") as f:
        json.dump(result, f, indent=1, default=str)
    with open(os.path.splitext(output)[0] + ".txt", "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"soak: {output}")
    return 0 if all(c["ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The benchmarks' aiortc peer (Debian python3-aiortc): two
RTCPeerConnections in this process, the offer and answer handed across
directly. Same modes and JSON as bench/peers/webrtcbin-peer.c:

  aiortc-peer.py setup [--iterations N]
  aiortc-peer.py bulk  [--bytes B] [--size S]
  aiortc-peer.py rtt   [--count N] [--rate R] [--size S]
  aiortc-peer.py pairs [--count N] [--seconds S]

ICE as for every peer of the suite: no STUN server (iceServers=[], where
aiortc would otherwise use a public one) and host candidates on 127.0.0.1
only (aioice leaves loopback out: its host-address lookup is replaced).
aiortc gathers all candidates before it returns a description, so no
trickle is needed.
"""

import argparse
import asyncio
import json
import os
import resource
import struct
import sys
import time

import aioice.ice
from aiortc import RTCConfiguration, RTCPeerConnection

aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def now_ms():
    return time.monotonic() * 1000


class Pair:
    async def open(self, timeout=30):
        config = RTCConfiguration(iceServers=[])
        self.a = RTCPeerConnection(config)
        self.b = RTCPeerConnection(config)
        self.dca = self.a.createDataChannel("bench")
        self.dcb = None
        loop = asyncio.get_running_loop()
        opened_a, opened_b = loop.create_future(), loop.create_future()
        self.dca.on("open", lambda: opened_a.done() or opened_a.set_result(1))

        @self.b.on("datachannel")
        def on_datachannel(channel):
            self.dcb = channel
            if not opened_b.done():
                opened_b.set_result(1)

        await self.a.setLocalDescription(await self.a.createOffer())
        await self.b.setRemoteDescription(self.a.localDescription)
        await self.b.setLocalDescription(await self.b.createAnswer())
        await self.a.setRemoteDescription(self.b.localDescription)
        await asyncio.wait_for(asyncio.gather(opened_a, opened_b), timeout)

    async def close(self):
        await self.a.close()
        await self.b.close()


async def setup(args):
    times = []
    failed = 0
    for _ in range(args.iterations):
        t0 = now_ms()
        pair = Pair()
        try:
            await pair.open()
            times.append(now_ms() - t0)
        except asyncio.TimeoutError:
            failed += 1
        await pair.close()
    return {"setup_ms": times, "failed": failed}


async def bulk(args):
    pair = Pair()
    await pair.open()
    msg = b"x" * args.size
    total = (args.bytes // args.size) * args.size
    done = asyncio.get_running_loop().create_future()
    received = 0

    def on_message(m):
        nonlocal received
        received += len(m)
        if received >= total and not done.done():
            done.set_result(1)

    pair.dcb.on("message", on_message)
    pair.dca.bufferedAmountLowThreshold = 256 * 1024
    low = asyncio.Event()
    pair.dca.on("bufferedamountlow", low.set)
    t0, c0 = now_ms(), cpu_s()
    sent = 0
    while sent < total:
        if pair.dca.bufferedAmount > 1024 * 1024:
            low.clear()
            await low.wait()
            continue
        pair.dca.send(msg)
        sent += args.size
    complete = True
    try:
        await asyncio.wait_for(done, 120)
    except asyncio.TimeoutError:
        complete = False
    t, c = (now_ms() - t0) / 1000, cpu_s() - c0
    await pair.close()
    return {"bytes": sent, "received": received, "size": args.size,
            "seconds": t, "cpu_s": c, "mb_per_s": sent / 1e6 / t,
            "cpu_s_per_mb": c / (sent / 1e6), "complete": complete}


async def rtt(args):
    pair = Pair()
    await pair.open()
    rtts = []
    done = asyncio.get_running_loop().create_future()
    pair.dcb.on("message", lambda m: pair.dcb.send(m))

    def on_echo(m):
        rtts.append(now_ms() - struct.unpack("d", m[:8])[0])
        if len(rtts) >= args.count and not done.done():
            done.set_result(1)

    pair.dca.on("message", on_echo)
    pad = b"\0" * (args.size - 8)
    c0 = cpu_s()
    start = now_ms()
    for i in range(args.count):
        due = start + i * 1000 / args.rate
        wait = due - now_ms()
        if wait > 0:
            await asyncio.sleep(wait / 1000)
        pair.dca.send(struct.pack("d", now_ms()) + pad)
    complete = True
    try:
        await asyncio.wait_for(done, 10)
    except asyncio.TimeoutError:
        complete = False
    c = cpu_s() - c0
    await pair.close()
    return {"rtt_ms": rtts, "sent": args.count, "size": args.size,
            "rate": args.rate, "cpu_s": c, "complete": complete}


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    return -1


async def pairs(args):
    rss0 = rss_kib()
    fds0, threads0 = len(os.listdir("/proc/self/fd")), \
        len(os.listdir("/proc/self/task"))
    t0 = now_ms()
    live, stop = [], "count"
    for _ in range(args.count):
        pair = Pair()
        live.append(pair)
        try:
            await pair.open()
        except asyncio.TimeoutError:
            stop = "a pair did not connect within 30 s"
            live.pop()
            break
        if now_ms() - t0 > args.seconds * 1000:
            stop = "time bound"
            break
    n = len(live)
    result = {
        "asked": args.count, "connected": n, "stopped": stop,
        "seconds": (now_ms() - t0) / 1000,
        "rss_kib_per_pair": (rss_kib() - rss0) / n if n else 0,
        "fds_per_pair":
            (len(os.listdir("/proc/self/fd")) - fds0) / n if n else 0,
        "threads_per_pair":
            (len(os.listdir("/proc/self/task")) - threads0) / n if n else 0,
    }
    for pair in live:
        await pair.close()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["setup", "bulk", "rtt", "pairs"])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--bytes", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--seconds", type=float, default=120)
    args = parser.parse_args()
    result = asyncio.run(globals()[args.mode](args))
    ok = result.get("complete", True) and (
        result.get("setup_ms", [1]) or result.get("connected"))
    print(json.dumps(dict({"peer": "aiortc", "mode": args.mode}, **result)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

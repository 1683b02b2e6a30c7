#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reliable data-channel messages across the network lab's bottleneck
while video fills it, as root (docs/congestion-control.md, "Data
channels under congestion").

  data.py --build DIR --output FILE [--scenarios NAME,...]
          [--modes data,cc,nocc] [--runs N] [--window S] [--interval MS]
          [--message-bytes N] [--lab-name NAME]

In a lab of its own per run (bench/netlab/lab.sh, netlab.py's scenarios),
legba-server in the router namespace, a Legba sender (legba-call --chat)
on the sender side and a Legba receiver (legba-call, sending nothing) on
the receiver side. From 10 s after the start, for the window, this
script writes a line to the sender's standard input every --interval ms
(100): the sender sends it as a reliable chat message
(legba_room_send_json, {"text": "SEQ TIME PADDING"}), the receiver
prints it when it arrives. The send time is this script's monotonic
clock when it writes the line, the arrival time the same clock when the
receiver's line reaches it (the namespaces share the clock, and one
process reads both): one-way latency, stdin and stdout pipes included.

Modes, each in turn on every scenario (in the opposite order every
other run):
  data  the sender sends no media: the messages alone (the baseline)
  cc    legba-call --video CLIP --bitrate 2000 (netlab's zone-plate
        clip; congestion control on) beside the messages
  nocc  the same with --no-congestion-control

Per run: messages sent, arrived, lost (not arrived 15 s after the
window), out of order (arrived after one sent later), duplicated; one-
way latency p50/p95/p99/max; the bottleneck's queue (tc backlog at its
rate, every 100 ms) p50/p95/max over the window, the packets it
dropped from the window's start to the last arrival; what the receiver's
interface took in; how late the script wrote a message after its slot
(send_late_ms_max: the measuring process stalled). Every message's
times are in the results.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netlab  # noqa: E402

WARMUP_S = 10
DRAIN_S = 15
MODES = ("data", "cc", "nocc")
# "<snd> 12 123.456789 xxxx"
ARRIVED = re.compile(r"^<snd> (\d+) (\d+\.\d+)")


def messages_summary(sent, arrived):
    """sent: {seq: send time}; arrived: [(seq, arrival time)] in the
    order the receiver reported them. Lost: sent and never arrived; out
    of order: arrived after a message sent later had; duplicated: a seq
    that arrived again. Latency over the first arrival of each."""
    first, dup, ooo, top = {}, 0, 0, -1
    for seq, t in arrived:
        if seq in first:
            dup += 1
            continue
        first[seq] = t
        if seq < top:
            ooo += 1
        top = max(top, seq)
    lat = [(first[s] - sent[s]) * 1000 for s in sent if s in first]
    return {
        "messages_sent": len(sent), "messages_arrived": len(first),
        "lost": sum(1 for s in sent if s not in first),
        "out_of_order": ooo, "duplicated": dup,
        "latency_ms_p50": netlab.percentile(lat, 50),
        "latency_ms_p95": netlab.percentile(lat, 95),
        "latency_ms_p99": netlab.percentile(lat, 99),
        "latency_ms_max": max(lat) if lat else None,
        "latency_ms_mean": statistics.mean(lat) if lat else None,
    }


class Run:
    def __init__(self, args, scenario, mode, clip):
        self.args, self.scenario, self.mode = args, scenario, mode
        self.spec = netlab.SCENARIOS[scenario]
        self.clip = clip
        self.name = args.lab_name or f"legba-lab-d{os.getpid()}"
        self.procs = []

    def start(self, ns, cmd, env, keep, stdin=None):
        p = subprocess.Popen(netlab.ns_exec(ns, cmd), stdin=stdin,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env,
                             bufsize=1)
        r = netlab.Reader(p.stdout, keep)
        r.start()
        self.procs.append(p)
        return p, r

    def run(self):
        build = self.args.build
        env = dict(os.environ, LEGBA_DELAYLINE=os.path.join(
            build, "bench", "netlab-delayline"))
        try:
            subprocess.run([netlab.LAB, "up", "--name", self.name]
                           + self.spec["lab"], check=True, env=env,
                           timeout=60)
            return self.measure(env)
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.terminate()
            subprocess.run([netlab.LAB, "down", "--name", self.name],
                           timeout=60)
            for p in self.procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()

    def member(self, identity, server, extra):
        duration = WARMUP_S + self.args.window + DRAIN_S + 5
        return [os.path.join(self.args.build, "tools", "legba-call"),
                "--server", server, "--key", "lab", "--secret",
                "lab-secret", "--room", "lab", "--identity", identity,
                "--duration", str(duration)] + extra

    def measure(self, env):
        n, build, port = self.name, self.args.build, netlab.PORT
        self.start(n + "-rtr", [
            os.path.join(build, "tools", "legba-server"), "--bind",
            "0.0.0.0", "--port", str(port), "--app-id", "1", "--app-key",
            "lab", "--app-secret", "lab-secret"], env, lambda l: False)
        netlab.Scenario.wait_server(self, n + "-rtr")
        _, rcv = self.start(n + "-rcv", self.member(
            "rcv", f"ws://10.201.2.1:{port}",
            ["--video", "none", "--audio", "none"]), env,
            lambda l: l.startswith("<snd> "))
        media = {"data": ["--video", "none", "--audio", "none"],
                 "cc": ["--video", self.clip["mp4"], "--bitrate", "2000"],
                 "nocc": ["--video", self.clip["mp4"], "--bitrate", "2000",
                          "--no-congestion-control"]}[self.mode]
        sender, snd = self.start(n + "-snd", self.member(
            "snd", f"ws://10.201.1.1:{port}", media + ["--chat", "--stats"]),
            env, lambda l: l.startswith("stats:") or "warning" in l,
            stdin=subprocess.PIPE)
        t0 = time.monotonic()
        sent = {}
        writer = threading.Thread(target=self.write, daemon=True,
                                  args=(sender, t0, sent))
        writer.start()
        queue, traffic = self.sample(t0, rcv, sent)
        writer.join()
        arrived = []
        for t, line in list(rcv.lines):
            m = ARRIVED.match(line)
            if m:
                arrived.append((int(m.group(1)), t - t0))
        sent_rel = {s: t - t0 for s, t in sent.items()}
        start, end = WARMUP_S, WARMUP_S + self.args.window
        win = [q for t, q, _ in queue if start <= t <= end]
        drops = [d for t, _, d in queue if start <= t]
        kbps = [k for t, k in traffic if start < t <= end + 0.5]
        res = {
            "scenario": self.scenario, "lab": self.spec["lab"],
            "mode": self.mode, "window_s": self.args.window,
            "interval_ms": self.args.interval,
            "message_bytes": self.args.message_bytes,
            **messages_summary(sent_rel, arrived),
            # how late this script wrote each message after its slot: a
            # stall of the measuring process on a loaded machine, which
            # shows in the latencies too (both ends are its threads)
            "send_late_ms_max": max(
                (t - WARMUP_S - s * self.args.interval / 1000) * 1000
                for s, t in sent_rel.items()) if sent_rel else None,
            "queue_ms_p50": netlab.percentile(win, 50),
            "queue_ms_p95": netlab.percentile(win, 95),
            "queue_ms_max": max(win) if win else None,
            "qdisc_drops": drops[-1] - drops[0] if drops else None,
            "received_kbps_median": statistics.median(kbps) if kbps
            else None,
            "sender_warnings": [l for _, l in snd.lines if "warning" in l],
            "encoder": [netlab.legba_sender_line(t - t0, l)
                        for t, l in snd.lines
                        if re.match(r"stats: \S+ \d+ kbit/s", l)],
            "messages": [[s, round(sent_rel[s], 4)] for s in sorted(sent)],
            "arrivals": [[s, round(t, 4)] for s, t in arrived],
            "queue": [[round(t, 2), round(q, 1), d] for t, q, d in queue],
        }
        if not arrived:
            res["receiver_output"] = list(rcv.tail)
            res["sender_output"] = list(snd.tail)
        return res

    def write(self, sender, t0, sent):
        """A line every interval over the window, on a fixed schedule;
        the send time is taken just before the write."""
        interval = self.args.interval / 1000
        pad = "x" * self.args.message_bytes
        tick = t0 + WARMUP_S
        seq = 0
        while tick < t0 + WARMUP_S + self.args.window:
            time.sleep(max(0, tick - time.monotonic()))
            now = time.monotonic()
            sent[seq] = now
            try:
                sender.stdin.write(f"{seq} {now - t0:.6f} {pad}\n")
                sender.stdin.flush()
            except (BrokenPipeError, ValueError):
                del sent[seq]
                return
            seq += 1
            tick += interval

    def sample(self, t0, rcv, sent):
        """The bottleneck's queue every 100 ms, the receiver's interface
        every second, until the window ends and then until every message
        arrived or DRAIN_S passed."""
        rate = self.spec.get("rate")
        queue, traffic, last = [], [], None
        end = t0 + WARMUP_S + self.args.window
        tick = t0
        while True:
            now = time.monotonic()
            backlog, drops = netlab.qdisc(self.name + "-rtr", "to-rcv")
            queue.append((now - t0, backlog * 8 / rate if rate else 0,
                          drops))
            if len(queue) % 10 == 1:
                _, rx = netlab.counters(self.name + "-rcv", "lab0")
                if last:
                    traffic.append((now - t0, (rx - last[1]) * 8
                                    / (now - last[0]) / 1000))
                last = (now, rx)
            if now >= end and (len(rcv.lines) >= len(sent)
                               or now >= end + DRAIN_S):
                return queue, traffic
            tick += 0.1
            time.sleep(max(0, tick - time.monotonic()))


def summary_line(rows):
    def med(key):
        v = [r[key] for r in rows if r.get(key) is not None]
        return statistics.median(v) if v else None

    return {k: med(k) for k in (
        "latency_ms_p50", "latency_ms_p95", "latency_ms_p99",
        "latency_ms_max", "queue_ms_p50", "queue_ms_p95",
        "received_kbps_median")} | {
        k: sum(r.get(k, 0) for r in rows) for k in (
            "messages_sent", "lost", "out_of_order", "duplicated")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--scenarios", default="1mbit,300kbit")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--window", type=int, default=30)
    ap.add_argument("--interval", type=int, default=100,
                    help="ms between messages (default 100)")
    ap.add_argument("--message-bytes", type=int, default=100,
                    help="padding in each message's text (default 100)")
    ap.add_argument("--lab-name",
                    help="lab.sh --name: legba-lab-SUFFIX (default "
                    "legba-lab-dPID)")
    args = ap.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    for s in scenarios:
        if s not in netlab.SCENARIOS:
            ap.error(f"unknown scenario {s} (netlab.py --list)")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m} ({', '.join(MODES)})")
    if args.lab_name and not re.fullmatch(r"legba-lab-[a-z0-9]+",
                                          args.lab_name):
        ap.error("--lab-name is legba-lab-SUFFIX (lowercase, digits)")
    if os.geteuid() != 0:
        print("data.py: the lab needs root (network namespaces)",
              file=sys.stderr)
        return 2
    netlab.signal.signal(netlab.signal.SIGTERM, lambda *_: sys.exit(143))
    result = {
        "suite": "netlab-data", "command": args.command or " ".join(
            ["bench/netlab/data.py"] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "legba": netlab.build_version(args.build),
        "netlab": netlab.source_version(HERE),
        "kernel": os.uname().release, "load_start": netlab.loadavg(),
        "warmup_s": WARMUP_S, "window_s": args.window,
        "interval_ms": args.interval, "runs": []}
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="legba-netdata-") as workdir:
        clip = netlab.make_clip(workdir, False)
        k = 0
        for rep in range(args.runs):
            for scenario in scenarios:
                order = modes if k % 2 == 0 else modes[::-1]
                k += 1
                for mode in order:
                    print(f"data: {scenario}, {mode}, run {rep + 1}",
                          file=sys.stderr)
                    load = netlab.loadavg()
                    try:
                        res = Run(args, scenario, mode, clip).run()
                    except (subprocess.SubprocessError, RuntimeError,
                            OSError) as e:
                        res = {"scenario": scenario, "mode": mode,
                               "error": str(e)}
                    res.update({"repetition": rep, "load_before": load,
                                "load": netlab.loadavg()})
                    result["runs"].append(res)
                    print("data: " + json.dumps({
                        x: res.get(x) for x in (
                            "lost", "out_of_order", "latency_ms_p50",
                            "latency_ms_p95", "latency_ms_p99",
                            "latency_ms_max", "queue_ms_p95", "qdisc_drops",
                            "received_kbps_median", "send_late_ms_max",
                            "load")}),
                        file=sys.stderr)
    result["summary"] = [
        {"scenario": s, "mode": m, "runs": len(rows), **summary_line(rows)}
        for s in scenarios for m in modes
        for rows in [[r for r in result["runs"] if r["scenario"] == s
                      and r["mode"] == m and "error" not in r]]]
    result.update({"seconds": time.time() - t_start,
                   "load_end": netlab.loadavg()})
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    for row in result["summary"]:
        print(json.dumps(row))
    print(f"data: wrote {args.output}", file=sys.stderr)
    return 1 if any("error" in r for r in result["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())

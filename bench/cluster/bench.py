#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Scale-out benchmark: fan-out over two legba-server instances sharing
their rooms through one redis-server (docs/scale-out.md).

For each size N, a fresh redis-server (Unix socket, no persistence) and two
fresh instances A and B: legba-probe load --targets A,B splits N sockets
evenly over them and publishes W warm-up and E timed events through A's
HTTP API, each once the previous one reached every socket. A delivers to
its half itself; B gets each event through Redis. Recorded per size:
delivered/total, the split, publish-to-receipt p50/p95/p99, CPU
(/proc schedstat) of A, B and redis-server over the timed events,
RSS per connection of each instance, and the relay's own append round
trip (legba_relay_append_seconds from A's /metrics).

Then the latency Redis adds to one message: one socket on A against one
socket on B, each receiving K sequential events published through A,
alternating A B B A over R rounds; the difference of the medians of the
runs' p50, with a bootstrap 95% interval (10,000 resamples, fixed seed).

Standard library only; bench/cluster/run.sh builds the release binaries
and runs this. Loopback only; every run is bounded by its own timeout.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import probeload  # noqa: E402
from probeload import BenchError  # noqa: E402
import stats  # noqa: E402

APP_ID = "bench"
APP_KEY = "bench-key"
APP_SECRET = "bench-secret"


# ---- /proc ----

def proc_cpu_s(pid):
    """Time on CPU of the process's threads (schedstat: nanoseconds, where
    utime+stime counts 10 ms ticks; threads that exited are not counted,
    and neither legba-server nor redis-server ends threads under load)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


def proc_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no VmRSS for {pid}")


def sample(procs):
    return {name: {"cpu_s": proc_cpu_s(p.pid), "rss": proc_rss(p.pid)}
            for name, p in procs.items()}


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---- the cluster ----

class Cluster:
    """redis-server and two legba-server instances, fresh; or, with
    single, one legba-server without Redis."""

    def __init__(self, args, workdir, tag, single=False):
        self.args = args
        self.single = single
        self.names = ("a",) if single else ("a", "b")
        self.dir = tempfile.mkdtemp(prefix="cluster-", dir=workdir)
        self.tag = tag
        self.procs = {}
        self.ports = {}
        self.logs = []

    def spawn(self, name, argv):
        log = open(os.path.join(self.dir, f"{name}.log"), "w")
        self.logs.append(log)
        self.procs[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=raise_nofile)
        return log.name

    def wait_line(self, name, path, text, deadline):
        while time.monotonic() < deadline:
            with open(path) as f:
                for line in f:
                    if text in line:
                        return line.strip()
            if self.procs[name].poll() is not None:
                raise BenchError(f"{name} exited: see {path}")
            time.sleep(0.05)
        raise BenchError(f"{name} did not say '{text}' in time")

    def start(self):
        deadline = time.monotonic() + 30
        sock = os.path.join(self.dir, "redis.sock")
        if not self.single:
            path = self.spawn("redis", [
                self.args.redis_server, "--port", "0", "--unixsocket", sock,
                "--unixsocketperm", "700", "--save", "", "--appendonly",
                "no", "--dir", self.dir])
            self.wait_line("redis", path, "ready to accept connections",
                           deadline)
        config = os.path.join(self.dir, "legba.conf")
        with open(config, "w") as f:
            f.write("[limits]\nclient-events-per-second=0\n"
                    "max-connections=0\n\n"
                    f"[app bench]\nid={APP_ID}\nkey={APP_KEY}\n"
                    f"secret={APP_SECRET}\n")
        for name in self.names:
            redis = [] if self.single else [
                "--redis", f"unix://{sock}", "--instance-id", name]
            path = self.spawn(name, [
                self.args.legba_server, "--config", config, "--port", "0"]
                + redis)
            line = self.wait_line(name, path, "legba-server listening on ",
                                  deadline)
            self.ports[name] = int(line.rsplit(":", 1)[1])
        for name in () if self.single else self.names:
            while self.metric(name, "legba_relay_instances") != 1:
                if time.monotonic() > deadline:
                    raise BenchError(f"instance {name} did not join")
                time.sleep(0.05)

    def metric(self, name, metric):
        url = f"http://127.0.0.1:{self.ports[name]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(metric + " "):
                    return float(line.split()[1])
        return None

    def stop(self):
        for name in ("a", "b", "redis"):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()
        if not self.args.keep_logs:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---- the generator ----

def probe_load(args, load_args, timeout, on_sync):
    argv = [args.legba_probe, "load", "--sync", "--json", "--timeout",
            str(timeout), "--app-id", APP_ID, "--app-key", APP_KEY,
            "--app-secret", APP_SECRET] + load_args
    return probeload.run(argv, timeout, on_sync, preexec_fn=raise_nofile)


# ---- fan-out ----

def run_fanout(args, workdir, size):
    cluster = Cluster(args, workdir, f"fanout-{size}")
    cluster.start()
    try:
        time.sleep(args.settle)
        marks = {"base": sample(cluster.procs)}

        def on_sync(line):
            if line.startswith("subscribed"):
                time.sleep(args.settle)
                marks["subscribed"] = sample(cluster.procs)
            elif line == "warm":
                marks["warm"] = sample(cluster.procs)
            elif line == "done":
                marks["done"] = sample(cluster.procs)

        targets = ",".join(f"127.0.0.1:{cluster.ports[n]}" for n in "ab")
        load = probe_load(args, [
            "--targets", targets, "--api-url",
            f"http://127.0.0.1:{cluster.ports['a']}", "--connections",
            str(size), "--events", str(args.events), "--warmup",
            str(args.warmup), "--event-timeout", "30"],
            90 + size // 40, on_sync)
        relay = {n: {m: cluster.metric(n, m) for m in (
            "legba_relay_append_seconds_sum",
            "legba_relay_append_seconds_count",
            "legba_relay_published_total", "legba_relay_received_total",
            "legba_relay_duplicates_total", "legba_relay_lost_total")}
            for n in "ab"}
    finally:
        cluster.stop()
    return {"size": size, "load": load, "relay": relay, **marks}


def summarize_fanout(run, events):
    load = run["load"]
    out = {"size": run["size"], "delivered": load.get("delivered"),
           "total": load.get("total"),
           "split": [s["connections"] for s in load.get("split", [])],
           "latency_ms": load.get("latency_ms"),
           "errors": load.get("errors")}
    if "warm" in run and "done" in run:
        cpu = {n: run["done"][n]["cpu_s"] - run["warm"][n]["cpu_s"]
               for n in run["done"]}
        timed = run["size"] * events
        out["cpu_s"] = cpu
        out["server_cpu_us_per_delivery"] = (
            (cpu["a"] + cpu["b"]) * 1e6 / timed if timed else None)
        # Idle included (Redis's own timers, heartbeats): the CPU Redis
        # adds per message is measured by run_cost.
        out["redis_cpu_us_per_event_idle_included"] = (
            cpu["redis"] * 1e6 / events)
    if "subscribed" in run:
        half = run["size"] / 2
        out["rss_per_connection"] = {
            n: (run["subscribed"][n]["rss"] - run["base"][n]["rss"]) / half
            for n in "ab"}
    a = run["relay"]["a"]
    if a["legba_relay_append_seconds_count"]:
        out["append_ms"] = (a["legba_relay_append_seconds_sum"] * 1e3
                            / a["legba_relay_append_seconds_count"])
    out["relay"] = run["relay"]
    return out


# ---- the latency of the Redis hop ----

def run_hop(args, workdir):
    """One socket on A, then one on B, alternating; events through A."""
    cluster = Cluster(args, workdir, "hop")
    cluster.start()
    series = {"local": [], "remote": []}
    try:
        for r in range(args.hop_rounds):
            order = ["local", "remote"] if r % 2 == 0 else ["remote", "local"]
            for arm in order:
                port = cluster.ports["a" if arm == "local" else "b"]
                load = probe_load(args, [
                    "--targets", f"127.0.0.1:{port}", "--api-url",
                    f"http://127.0.0.1:{cluster.ports['a']}",
                    "--connections", "1", "--events", str(args.hop_events),
                    "--warmup", "5"], 120, lambda line: None)
                if load.get("delivered") != args.hop_events:
                    raise BenchError(f"hop run lost events: {load}")
                series[arm].append(load["latency_ms"]["p50"])
    finally:
        cluster.stop()
    diff = statistics.median(series["remote"]) - statistics.median(
        series["local"])
    row = stats.compare(series["remote"], series["local"])
    return {"series_p50_ms": series, "events_per_run": args.hop_events,
            "added_ms": diff, "ci95_ms": row["ci"],
            "verdict": row["verdict"]}


# ---- the CPU Redis adds per message ----

def run_cost(args, workdir):
    """One socket, K events through A's HTTP API: one instance without
    Redis against two with it, alternating. CPU of every process over the
    timed events, minus what each uses idle over as long right after."""
    series = {"single": [], "cluster": []}
    parts = {"publisher": [], "other": [], "redis": []}
    for r in range(args.cost_rounds):
        order = ["single", "cluster"] if r % 2 == 0 else ["cluster", "single"]
        for arm in order:
            cluster = Cluster(args, workdir, f"cost-{arm}",
                              single=arm == "single")
            cluster.start()
            try:
                marks = {}

                def on_sync(line):
                    if line == "warm":
                        marks["warm"] = sample(cluster.procs)
                        marks["t0"] = time.monotonic()
                    elif line == "done":
                        marks["done"] = sample(cluster.procs)
                        # As long idle: what each process uses anyway.
                        time.sleep(time.monotonic() - marks["t0"])
                        marks["idle"] = sample(cluster.procs)

                load = probe_load(args, [
                    "--targets", f"127.0.0.1:{cluster.ports['a']}",
                    "--connections", "1", "--events", str(args.cost_events),
                    "--warmup", "20"], 120, on_sync)
            finally:
                cluster.stop()
            if load.get("delivered") != args.cost_events:
                raise BenchError(f"cost run lost events: {load}")
            used = {n: (marks["done"][n]["cpu_s"] - marks["warm"][n]["cpu_s"])
                    - (marks["idle"][n]["cpu_s"] - marks["done"][n]["cpu_s"])
                    for n in marks["done"]}
            per = {n: v * 1e6 / args.cost_events for n, v in used.items()}
            series[arm].append(sum(per.values()))
            if arm == "cluster":
                parts["publisher"].append(per["a"])
                parts["other"].append(per["b"])
                parts["redis"].append(per["redis"])
    added = statistics.median(series["cluster"]) - statistics.median(
        series["single"])
    row = stats.compare(series["cluster"], series["single"])
    return {"events_per_run": args.cost_events,
            "series_us_per_message": series,
            "cluster_parts_us_per_message": parts,
            "added_us": added, "ci95_us": row["ci"],
            "verdict": row["verdict"]}


# ---- conditions and report ----

def ci_text(ci):
    if ci is None:
        return f"no interval with fewer than {stats.MIN_RUNS} runs an arm"
    return f"95% CI {fmt(ci[0])} .. {fmt(ci[1])}"


def conditions(args, start_load):
    redis_version = subprocess.run([args.redis_server, "--version"],
                                   capture_output=True, text=True).stdout
    cpu = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": cpu, "cpus": os.cpu_count(),
            "kernel": platform.release(), "redis": redis_version.strip(),
            "legba_version": args.legba_version,
            "buildtype": args.buildtype,
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
            "loadavg_start": start_load, "loadavg_end": loadavg(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "note": "shared machine: the generator, both instances and "
                    "redis-server share its cores; other work may run"}


def report(result):
    lines = ["| sockets | delivered/total | split | p50 ms | p95 ms | "
             "p99 ms | server CPU us/delivery | RSS/conn A, B (KiB) |",
             "|---|---|---|---|---|---|---|---|"]
    for s in result["fanout"]:
        lat = s.get("latency_ms") or {}
        rss = s.get("rss_per_connection") or {}
        lines.append("| {} | {}/{} | {} | {} | {} | {} | {} | {} |".format(
            s["size"], s.get("delivered"), s.get("total"),
            "/".join(str(x) for x in s.get("split", [])),
            fmt(lat.get("p50")), fmt(lat.get("p95")), fmt(lat.get("p99")),
            fmt(s.get("server_cpu_us_per_delivery")),
            ", ".join(fmt(rss[n] / 1024) if n in rss else "-"
                      for n in "ab")))
        if s.get("errors"):
            lines.append(f"|   errors: {'; '.join(s['errors'][:3])} |")
    hop = result.get("hop")
    if hop:
        lines.append("")
        lines.append("Redis hop: {} ms at p50 ({}, {}), over "
                     "{} runs of {} events per arm".format(
                         signed(hop["added_ms"]), ci_text(hop["ci95_ms"]),
                         hop["verdict"],
                         len(hop["series_p50_ms"]["local"]),
                         hop["events_per_run"]))
    cost = result.get("cost")
    if cost:
        parts = cost["cluster_parts_us_per_message"]
        lines.append("Redis CPU cost: {} us per message, all processes "
                     "({}, {}); in the cluster: publisher {} us, "
                     "other instance {} us, redis-server {} us "
                     "(medians, {} runs of {} events)".format(
                         signed(cost["added_us"]), ci_text(cost["ci95_us"]),
                         cost["verdict"],
                         fmt(statistics.median(parts["publisher"])),
                         fmt(statistics.median(parts["other"])),
                         fmt(statistics.median(parts["redis"])),
                         len(parts["redis"]), cost["events_per_run"]))
    return "\n".join(lines)


def signed(v):
    return ("+" if v >= 0 else "") + fmt(v)


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--legba-server", required=True)
    ap.add_argument("--legba-probe", required=True)
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--buildtype", required=True)
    ap.add_argument("--legba-version", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000")
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--hop-rounds", type=int, default=6)
    ap.add_argument("--hop-events", type=int, default=200)
    ap.add_argument("--cost-rounds", type=int, default=6)
    ap.add_argument("--cost-events", type=int, default=1000)
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    if args.buildtype != "release":
        sys.exit("bench: measures release builds only")
    if args.redis_server is None:
        sys.exit("bench: redis-server is not installed (scripts/setup.sh)")
    raise_nofile()

    start_load = loadavg()
    workdir = tempfile.mkdtemp(prefix="legba-bench-cluster-")
    result = {"suite": "cluster", "command": args.command,
              "events": args.events, "warmup": args.warmup,
              "fanout": [], "raw": []}
    try:
        for size in [int(x) for x in args.sizes.split(",")]:
            print(f"bench: fan-out to {size} sockets over two instances",
                  file=sys.stderr, flush=True)
            try:
                run = run_fanout(args, workdir, size)
            except BenchError as e:
                run = {"size": size, "load": {"errors": [str(e)]},
                       "relay": {"a": {}, "b": {}}}
            result["raw"].append(run)
            result["fanout"].append(summarize_fanout(run, args.events)
                                    if "warm" in run else
                                    {"size": size,
                                     "errors": run["load"].get("errors")})
        print("bench: the Redis hop, one socket, alternating A B B A",
              file=sys.stderr, flush=True)
        result["hop"] = run_hop(args, workdir)
        print("bench: CPU per message, one instance against two with Redis",
              file=sys.stderr, flush=True)
        result["cost"] = run_cost(args, workdir)
    finally:
        result["conditions"] = conditions(args, start_load)
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(os.path.dirname(args.output), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(result, f, indent=1)
    print(report(result))
    print(f"\nraw series and conditions: {args.output}")


if __name__ == "__main__":
    main()

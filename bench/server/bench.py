#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Signalling-server benchmark driver (suite 8 of docs/benchmarks.md).

Runs legba-server and soketi side by side in one run, alternating their
order (A B B A, swapped every round), each on a fresh process per
scenario, all driven by the same generator (legba-probe), and writes the
raw series and the conditions as JSON. bench/analyze.py turns that into
bench/RESULTS.md. Standard library only; run it through bench/server/run.sh,
which builds the release binaries first.

Scenarios, per peer and round:
  fanout-N  N idle sockets subscribed to one public channel: server RSS
            before and after (memory per idle connection); then E events
            through the HTTP API after W warm-up events: server CPU
            (utime+stime, /proc/PID/stat) over the timed events per socket
            per event, and publish-to-receipt latency.
  rtt       500 sequential pusher:ping round trips and client-event relays
            A->B->A (legba-probe rtt), then P socket pairs bouncing R
            client events each (legba-probe load --relay): server CPU per
            relayed client event.
and once per round, the generator against its own minimal server
(legba-probe load --self-test): the generator's ceiling.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import probeload  # noqa: E402
from probeload import BenchError  # noqa: E402
from version import source_version  # noqa: E402

APP_ID = "bench"
APP_KEY = "bench-key"
APP_SECRET = "bench-secret"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- /proc sampling ----

def proc_cpu_s(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_sched_s(pid):
    """Time on CPU of the live threads from schedstat, in seconds (ns
    resolution; threads that exited are not counted)."""
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


def sample(pid):
    return {"cpu_s": proc_cpu_s(pid), "sched_s": proc_sched_s(pid),
            "rss": proc_rss(pid), "t": time.monotonic()}


def busy_processes(exclude, seconds=1.0):
    """Processes that used CPU over a short window, busiest first."""
    def snapshot():
        seen = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in exclude:
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    raw = f.read()
                comm = raw[raw.index("(") + 1:raw.rindex(")")]
                fields = raw.rsplit(")", 1)[1].split()
                seen[int(entry)] = (comm, int(fields[11]) + int(fields[12]))
            except (OSError, ValueError):
                pass
        return seen

    before = snapshot()
    time.sleep(seconds)
    after = snapshot()
    busy = []
    for pid, (comm, ticks) in after.items():
        used = (ticks - before.get(pid, (comm, ticks))[1]) / CLK_TCK
        if used / seconds >= 0.05:
            busy.append({"pid": pid, "comm": comm,
                         "cpu_share": round(used / seconds, 2)})
    return sorted(busy, key=lambda p: -p["cpu_share"])[:8]


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


# ---- peers ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def wait_port(port, proc, deadline):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise BenchError(f"server did not listen on {port} in time")


class Peer:
    """One server under test; start() gives a fresh process."""

    name = ""

    def __init__(self, workdir):
        self.workdir = workdir
        self.proc = None
        self.port = None
        self.log = None

    def start(self):
        raise NotImplementedError

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.proc = None

    def spawn(self, argv, tag, cwd=None):
        self.log = open(os.path.join(self.workdir, f"{self.name}-{tag}.log"),
                        "w")
        self.proc = subprocess.Popen(argv, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=cwd,
                                     preexec_fn=raise_nofile)


class LegbaPeer(Peer):
    name = "legba"

    def __init__(self, workdir, binary):
        super().__init__(workdir)
        self.binary = binary
        self.config = os.path.join(workdir, "legba.conf")
        # No client-event rate limit and no connection cap, as for soketi.
        with open(self.config, "w") as f:
            f.write("[limits]\nclient-events-per-second=0\n"
                    "max-connections=0\n\n"
                    f"[app bench]\nid={APP_ID}\nkey={APP_KEY}\n"
                    f"secret={APP_SECRET}\n")

    def start(self, tag):
        self.spawn([self.binary, "--config", self.config, "--bind",
                    "127.0.0.1", "--port", "0"], tag)
        deadline = time.monotonic() + 20
        path = self.log.name
        while time.monotonic() < deadline:
            with open(path) as f:
                for line in f:
                    if line.startswith("legba-server listening on "):
                        self.port = int(line.strip().rsplit(":", 1)[1])
                        wait_port(self.port, self.proc, deadline)
                        return
            if self.proc.poll() is not None:
                raise BenchError(f"legba-server exited: see {path}")
            time.sleep(0.05)
        raise BenchError("legba-server did not print its listening line")


class SoketiPeer(Peer):
    name = "soketi"

    def __init__(self, workdir, soketi_dir, node):
        super().__init__(workdir)
        self.dir = soketi_dir
        self.node = node

    def start(self, tag):
        self.port = free_port()
        metrics_port, cluster_port = free_port(), free_port()
        # Everything on loopback: soketi's node discovery would otherwise
        # broadcast to 255.255.255.255 and bind 0.0.0.0.
        config = {
            "host": "127.0.0.1",
            "port": self.port,
            "appManager.array.apps": [{
                "id": APP_ID, "key": APP_KEY, "secret": APP_SECRET,
                "maxConnections": -1, "enableClientMessages": True,
                "enabled": True, "maxBackendEventsPerSecond": -1,
                "maxClientEventsPerSecond": -1,
                "maxReadRequestsPerSecond": -1, "webhooks": [],
            }],
            "metrics.enabled": False,
            "metrics.host": "127.0.0.1",
            "metrics.port": metrics_port,
            "cluster.address": "127.0.0.1",
            "cluster.hostname": "127.0.0.1",
            "cluster.port": cluster_port,
            "cluster.unicast": f"127.0.0.1:{cluster_port}",
        }
        path = os.path.join(self.workdir, "soketi.json")
        with open(path, "w") as f:
            json.dump(config, f)
        server = os.path.join(self.dir, "node_modules", "@soketi", "soketi",
                              "bin", "server.js")
        self.spawn([self.node, server, "start", f"--config={path}"], tag,
                   cwd=self.workdir)
        wait_port(self.port, self.proc, time.monotonic() + 30)


# ---- the generator ----

class Probe:
    def __init__(self, binary, window):
        self.binary = binary
        self.window = window

    def common(self):
        return ["--app-id", APP_ID, "--app-key", APP_KEY,
                "--app-secret", APP_SECRET]

    def check(self, port):
        """The peer speaks Pusher protocol 7 as the generator expects."""
        r = subprocess.run([self.binary, "probe", "--url",
                            f"ws://127.0.0.1:{port}", "--timeout", "20"]
                           + self.common(), capture_output=True, text=True,
                           timeout=40)
        if r.returncode != 0:
            raise BenchError("legba-probe probe failed:\n" + r.stdout
                             + r.stderr)

    def rtt(self, port, count, timeout):
        r = subprocess.run([self.binary, "rtt", "--url",
                            f"ws://127.0.0.1:{port}", "--count", str(count),
                            "--json", "--timeout", str(timeout)]
                           + self.common(), capture_output=True, text=True,
                           timeout=timeout + 20)
        if r.returncode != 0:
            return {"error": r.stderr.strip()}
        return json.loads(r.stdout)

    def load(self, args, timeout, on_sync):
        """legba-probe load --sync: on_sync(line) at each sync point."""
        argv = [self.binary, "load", "--sync", "--json", "--timeout",
                str(timeout), "--connect-window", str(self.window)] + args
        return probeload.run(argv, timeout, on_sync)


# ---- scenarios ----

def run_fanout(peer, probe, size, events, warmup, tag, settle):
    peer.start(tag)
    try:
        time.sleep(settle)
        base = sample(peer.proc.pid)
        marks = {}

        def on_sync(line):
            if line.startswith("subscribed"):
                time.sleep(settle)
                marks["subscribed"] = sample(peer.proc.pid)
            elif line == "warm":
                marks["warm"] = sample(peer.proc.pid)
            elif line == "done":
                marks["done"] = sample(peer.proc.pid)

        timeout = 60 + size // 50
        result = probe.load(["--targets", f"127.0.0.1:{peer.port}",
                             "--connections", str(size), "--events",
                             str(events), "--warmup", str(warmup)]
                            + probe.common(), timeout, on_sync)
    finally:
        peer.stop()
    run = {"base": base, "load": result}
    run.update(marks)
    return run


def run_rtt(peer, probe, count, pairs, rounds, tag):
    peer.start(tag)
    try:
        rtt = probe.rtt(peer.port, count, 120)
        marks = {}

        def on_sync(line):
            if line.startswith("subscribed"):
                marks["subscribed"] = sample(peer.proc.pid)
            elif line == "done":
                marks["done"] = sample(peer.proc.pid)

        relay = probe.load(["--targets", f"127.0.0.1:{peer.port}",
                            "--connections", str(2 * pairs), "--relay",
                            str(rounds)] + probe.common(), 120, on_sync)
    finally:
        peer.stop()
    run = {"rtt": rtt, "relay": relay}
    run.update(marks)
    return run


def self_test_marks():
    """A sync callback sampling the self-test server, which legba-probe
    names first, at each later sync point (by its first word), and the
    samples it took."""
    marks = {}

    def on_sync(line):
        if line.startswith("self-test-server "):
            marks["pid"] = int(line.split()[1])
        elif "pid" in marks:
            marks[line.split()[0]] = sample(marks["pid"])
    return on_sync, marks


def run_self_test(probe, size, events, warmup):
    """The generator against its built-in server, which is sampled like a
    real one: its CPU per socket per broadcast is the floor of what
    writing one frame per socket costs on this machine."""
    on_sync, marks = self_test_marks()
    load = probe.load(["--self-test", "--connections", str(size),
                       "--events", str(events), "--warmup", str(warmup)],
                      60 + size // 100, on_sync)
    run = {"load": load, "events": events}
    run.update((k, v) for k, v in marks.items() if k in ("warm", "done"))
    return run


def run_self_test_relay(probe, pairs, rounds):
    """The relay scenario against the built-in server: its CPU per relayed
    client event is the floor of reading one frame and writing it on."""
    on_sync, marks = self_test_marks()
    relay = probe.load(["--self-test", "--connections", str(2 * pairs),
                        "--relay", str(rounds)], 120, on_sync)
    run = {"relay": relay}
    run.update((k, v) for k, v in marks.items()
               if k in ("subscribed", "done"))
    return run


# ---- conditions ----

def read_first(path, prefix, sep=":"):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(sep, 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def command_output(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None


def conditions(args, node):
    soketi_pkg = os.path.join(args.soketi, "node_modules", "@soketi",
                              "soketi", "package.json")
    uws_pkg = os.path.join(args.soketi, "node_modules", "uWebSockets.js",
                           "package.json")
    with open(soketi_pkg) as f:
        soketi_version = json.load(f)["version"]
    with open(uws_pkg) as f:
        uws = json.load(f)
    return {
        "cpu_model": read_first("/proc/cpuinfo", "model name"),
        "cpus": os.cpu_count(),
        "memory": read_first("/proc/meminfo", "MemTotal"),
        "kernel": platform.release(),
        "os": read_first("/etc/os-release", "PRETTY_NAME", "="),
        "nofile_hard": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "legba_version": " ".join(filter(None, [
            args.legba_version,
            source_version(args.source)])) or "unknown",
        "legba_buildtype": args.buildtype,
        "libsoup": command_output(["pkg-config", "--modversion",
                                   "libsoup-3.0"]),
        "glib": command_output(["pkg-config", "--modversion",
                                "glib-2.0"]),
        "soketi": soketi_version,
        "uwebsockets": f"{uws['name']}@{uws['version']}",
        "node": command_output([node, "--version"]),
        "generator": f"legba-probe (connect window {args.connect_window})",
    }


# ---- main ----

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--legba-server", required=True)
    p.add_argument("--legba-probe", required=True)
    p.add_argument("--buildtype", required=True)
    p.add_argument("--soketi", required=True,
                   help="bench/peers/soketi, with node_modules")
    p.add_argument("--source", required=True, help="the source tree")
    p.add_argument("--legba-version", default="",
                   help="the meson project version of the build")
    p.add_argument("--output", required=True, help="results JSON")
    p.add_argument("--logs", required=True,
                   help="directory for server logs and configs")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: small sizes, one round")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--sizes", default=None,
                   help="comma-separated socket counts")
    p.add_argument("--connect-window", type=int, default=32)
    p.add_argument("--command", default=" ".join(sys.argv))
    return p.parse_args()


def plan(args):
    quick = args.quick
    sizes = [int(s) for s in (args.sizes or
                              ("200,1000" if quick
                               else "1000,5000,10000")).split(",")]
    return {
        "sizes": sizes,
        "rounds": args.rounds or (1 if quick else 3),
        # At least ~100,000 socket-broadcasts per run, so that CPU time in
        # clock ticks (10 ms) is a small part of what is measured.
        "events": {str(n): max(10, -(-100000 // n)) if not quick else 5
                   for n in sizes},
        "warmup": 2,
        "rtt_count": 100 if quick else 500,
        "relay_pairs": 20 if quick else 100,
        "relay_rounds": 50 if quick else 200,
        "settle_s": 1.0,
        "connect_window": args.connect_window,
    }


def order(round_index):
    """A B B A, with A and B swapped every other round."""
    a, b = ("legba", "soketi") if round_index % 2 == 0 else ("soketi",
                                                             "legba")
    return [a, b, b, a]


def run_rounds(results, peers, probe, p, started):
    """Every round of every scenario, appending to results as it goes."""
    failed = set()
    for r in range(p["rounds"]):
        for size in p["sizes"]:
            events = p["events"][str(size)]
            st = run_self_test(probe, size, events, p["warmup"])
            st.update({"round": r, "size": size})
            results["self_test"].append(st)
            for slot, name in enumerate(order(r)):
                key = (name, size)
                if key in failed:
                    results["skipped"].append({"round": r, "slot": slot,
                                               "peer": name, "size": size})
                    continue
                try:
                    run = run_fanout(peers[name], probe, size, events,
                                     p["warmup"], f"r{r}-{size}-{slot}",
                                     p["settle_s"])
                except BenchError as e:
                    run = {"error": str(e)}
                run.update({"round": r, "slot": slot, "peer": name,
                            "scenario": "fanout", "size": size,
                            "events": events, "warmup": p["warmup"]})
                results["runs"].append(run)
                load = run.get("load")
                if load is None:
                    print(f"bench: round {r} {name:6} fanout {size:5}: "
                          f"{run['error']}", flush=True)
                    failed.add(key)
                    continue
                print(f"bench: round {r} {name:6} fanout {size:5}: "
                      f"{load['subscribed']} subscribed, "
                      f"{load['delivered']}/{load['total']} delivered, "
                      f"p50 {load['latency_ms']['p50']} "
                      f"p95 {load['latency_ms']['p95']} ms", flush=True)
                # A peer that cannot serve N sockets in time is not tried
                # at that size again: the run stays bounded.
                if load["subscribed"] < size or \
                        load["delivered"] < load["total"]:
                    failed.add(key)
        for slot, name in enumerate(order(r)):
            try:
                run = run_rtt(peers[name], probe, p["rtt_count"],
                              p["relay_pairs"], p["relay_rounds"],
                              f"r{r}-rtt-{slot}")
            except BenchError as e:
                run = {"error": str(e), "rtt": {}}
            run.update({"round": r, "slot": slot, "peer": name,
                        "scenario": "rtt"})
            results["runs"].append(run)
            rtt = run["rtt"]
            print(f"bench: round {r} {name:6} rtt: ping p50 "
                  f"{rtt.get('ping_ms', {}).get('p50')} relay p50 "
                  f"{rtt.get('relay_ms', {}).get('p50')} ms", flush=True)
        st = run_self_test_relay(probe, p["relay_pairs"], p["relay_rounds"])
        st["round"] = r
        results["self_test_relay"].append(st)
        print(f"bench: round {r} done after "
              f"{time.monotonic() - started:.0f} s", flush=True)



def on_sigterm(signum, frame):
    raise BenchError("stopped by SIGTERM (the suite's time bound)")


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    args = parse_args()
    if args.buildtype != "release":
        sys.exit(f"bench.py: refusing to measure a {args.buildtype} build "
                 "(docs/benchmarks.md: release builds only)")
    node = shutil.which("node")
    if node is None:
        sys.exit("bench.py: node is missing")
    p = plan(args)
    # Server logs and configs, kept for a look after the run.
    workdir = args.logs
    os.makedirs(workdir, exist_ok=True)
    peers = {"legba": LegbaPeer(workdir, args.legba_server),
             "soketi": SoketiPeer(workdir, args.soketi, node)}
    probe = Probe(args.legba_probe, p["connect_window"])
    results = {
        "suite": "server",
        "quick": args.quick,
        "command": args.command,
        "plan": p,
        "started": datetime.datetime.now().astimezone().isoformat(),
        "conditions": conditions(args, node),
        "runs": [],
        "self_test": [],
        "self_test_relay": [],
        "skipped": [],
    }
    own = {os.getpid()}
    results["conditions"]["loadavg_start"] = loadavg()
    results["conditions"]["busy_start"] = busy_processes(own)

    for name, peer in peers.items():
        peer.start("check")
        try:
            probe.check(peer.port)
        finally:
            peer.stop()
        print(f"bench: {name} passes legba-probe probe", flush=True)

    started = time.monotonic()
    try:
        run_rounds(results, peers, probe, p, started)
    except (BenchError, OSError, ValueError, KeyError) as e:
        # Whatever was measured so far is kept, and the report says the
        # run stopped early.
        results["aborted"] = f"{type(e).__name__}: {e}"
        print(f"bench: stopped early: {results['aborted']}", flush=True)

    results["conditions"]["loadavg_end"] = loadavg()
    results["conditions"]["busy_end"] = busy_processes(own)
    results["finished"] = datetime.datetime.now().astimezone().isoformat()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print(f"bench: wrote {args.output} (server logs in {workdir})")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench.py: {e}")

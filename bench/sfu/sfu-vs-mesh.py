#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Mesh rooms against SFU rooms (through Janus), side by side in one run:
one publisher's upload and CPU as the room grows, glass-to-glass latency,
join time, and one publisher to many viewers through one Janus.

    bench/sfu/sfu-vs-mesh.py [--build DIR] [--sizes 2,4,8,16]
        [--viewers 10] [--viewer-host shared] [--viewer-display undecoded]
        [--janus-rtp-ports 1000]
        [--repeats 2] [--settle S] [--window S] [--json FILE]

Starts a Janus of its own (tests/common/start-janus.sh, without an API
secret) and two legba-server processes: one plain (mesh rooms), one with
--janus-url, --janus-ws-url, --janus-admin-key and --topology sfu. Each
room is legba-call processes on this host: one publisher (--width 320
--height 180 --fps 15, H.264, test video and audio) and receive-only
participants (--video none --audio none, which still decode what they
receive), all with --measure-latency. Viewer rooms (--viewers) are one
publisher and N viewers that count what arrives, decode nothing and
publish nothing to Janus, started --viewer-batch at a time, each batch
once the one before has joined: with --viewer-host shared (the default)
all N in one process, `legba-peer viewers` (bench/peers/legba-peer.c),
each a LegbaRoom of its own with its own signalling connection and Janus
subscription; with --viewer-host process one legba-call each, --video
none --audio none --display --viewer-display (undecoded by default). The publisher joins first;
once it is in the call the others start (together, in rooms of sizes);
--settle seconds (and --settle-per-participant more for each
participant) after the last started, the publisher's CPU (/proc/PID/stat,
user+sys) and upload are sampled over --window seconds, and Janus's and
each receiver's CPU (or the viewers' host's) likewise; then every
process is stopped and reports its --json (the host, each viewer's
figures).

Upload is what the publisher hands to the kernel on its UDP sockets
(bench/sfu/sendcount.c, preloaded: RTP, RTCP, DTLS, STUN payloads,
without UDP/IP headers), so it counts every copy the process sends.

Sizes and topologies take turns (mesh, sfu, then sfu, mesh, ...), each
case --repeats times. Writes bench/results/sfu-STAMP.json by default, or
bench/results/sfu-viewers-STAMP.json when --sizes is empty (viewer rooms
only).
Builds nothing but the preload library (cc, into a temporary folder);
BUILD must be a release build with the integration tools."""
import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import suites  # noqa: E402

KEY, SECRET = "bench-key", "bench-secret"


def build_type(build):
    out = subprocess.run(["meson", "introspect", "--buildoptions", build],
                         capture_output=True, text=True).stdout
    for opt in json.loads(out or "[]"):
        if opt["name"] == "buildtype":
            return opt["value"]
    return None


def start_janus(workdir, rtp_ports):
    env = dict(os.environ, JANUS_API_SECRET="",
               JANUS_RTP_PORTS=str(rtp_ports))
    out = subprocess.run(
        [os.path.join(ROOT, "tests", "common", "start-janus.sh"),
         os.path.join(workdir, "janus")], env=env, capture_output=True,
        text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines()
                if "=" in line)


def janus_version():
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "janus"],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def cpu_s(pid):
    """User+sys seconds of a process, or None once it is gone."""
    try:
        return suites.proc_cpu_s(pid)
    except (OSError, ValueError, IndexError):
        return None


def read_count(path):
    try:
        with open(path, "rb") as f:
            return int.from_bytes(f.read(8) or b"\0", sys.byteorder)
    except OSError:
        return 0


class Call:
    """A legba-call process; its JSON report comes at stop()."""

    def __init__(self, build, url, room, identity, publish, workdir,
                 max_participants, preload=None, display="none"):
        opts = (["--width", "320", "--height", "180", "--fps", "15"]
                if publish else ["--video", "none", "--audio", "none"])
        if display != "undecoded":
            opts.append("--measure-latency")
        self.cmd = [os.path.join(build, "tools", "legba-call"),
                    "--server", url, "--room", room, "--identity", identity,
                    "--key", KEY, "--secret", SECRET, "--json",
                    "--display", display, "--max-participants",
                    str(max_participants)] + opts
        env = dict(os.environ, GST_DEBUG="*:1")
        self.count_file = None
        if preload:
            self.count_file = os.path.join(workdir, f"{identity}.count")
            if os.path.exists(self.count_file):
                os.unlink(self.count_file)
            env.update(LD_PRELOAD=preload, SENDCOUNT_FILE=self.count_file)
        self.err_path = os.path.join(workdir, f"{room}-{identity}.err")
        self.err = open(self.err_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, env=env,
                                     stdout=subprocess.PIPE,
                                     stderr=self.err, text=True)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def joined(self):
        return any(l.startswith("joined room")
                   for l in self.stderr().splitlines())

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self):
        self.terminate()
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.err.close()
        tail = self.stderr().strip().splitlines()[-5:]
        lines = [l for l in (out or "").splitlines() if l.startswith("{")]
        res = {"exit": self.proc.returncode}
        warnings = sorted({l for l in self.stderr().splitlines()
                           if "warning:" in l or "CRITICAL" in l})
        if warnings:
            res["warnings"] = warnings[:5]
        if lines:
            res["report"] = json.loads(lines[-1])
        if self.proc.returncode != 0 or not lines:
            res["stderr_tail"] = tail
        return res


class ViewerHost:
    """Viewers 1..count of a room in one process (legba-peer viewers):
    each a LegbaRoom of its own, receive-only, counting what arrives
    without decoding. Its report comes at stop(), one entry per viewer
    shaped as legba-call's."""

    def __init__(self, build, url, room, count, batch, max_participants,
                 workdir, first=1):
        self.cmd = [os.path.join(build, "bench", "legba-peer"), "viewers",
                    "--server-url", url, "--room", room, "--count",
                    str(count), "--first", str(first), "--batch",
                    str(batch), "--identity", "r",
                    "--max-participants", str(max_participants)]
        env = dict(os.environ, GST_DEBUG="*:1")
        self.err_path = os.path.join(workdir, f"{room}-viewers{first}.err")
        self.err = open(self.err_path, "w")
        self.count = count
        self.batches = []
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, env=env,
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self.read_output, daemon=True).start()

    def read_output(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read_line(self, seconds):
        """The next line of its output, or None after seconds or at its
        end."""
        try:
            return self.lines.get(timeout=max(seconds, 0))
        except queue.Empty:
            return None

    def wait_started(self, seconds):
        """Waits for every batch to have started (its "started" line)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            line = self.read_line(deadline - time.monotonic())
            if line is None:
                return False
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event.get("event") == "batch":
                self.batches.append(event)
            elif event.get("event") == "started":
                return True
        return False

    def report(self):
        """Each viewer's figures now (legba-peer's report), or None."""
        if self.proc.poll() is not None:
            return None
        try:
            self.proc.stdin.write("report\n")
            self.proc.stdin.flush()
            while True:
                line = self.read_line(30)
                if line is None:
                    return None
                if line.startswith("{") and '"mode": "viewers"' in line:
                    return json.loads(line)
        except (BrokenPipeError, ValueError):
            return None

    def stop(self):
        """Each viewer's report, as Call.stop() gives legba-call's, and
        each viewer's start in s from the first's."""
        report = self.report()
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        with open(self.err_path) as f:
            self.stderr_tail = f.read().strip().splitlines()[-20:]
        if report is None:
            tail = self.stderr_tail[-5:]
            return [{"exit": self.proc.returncode, "stderr_tail": tail}
                    for _ in range(self.count)], [0] * self.count
        reports, offsets = [], []
        for v in report["viewers"]:
            ok = v["state"] == "connected"
            rep = {"joined_ms": v["joined_ms"] if v["joined_ms"] >= 0
                   else None,
                   "first_video_ms": v["first_video_ms"]
                   if v["first_video_ms"] >= 0 else None,
                   "participants": [{"identity": "pub",
                                     "video_frames": v["video_buffers"],
                                     "audio_buffers": v["audio_buffers"]}]}
            r = {"exit": 0 if ok else 1, "report": rep}
            if not ok:
                r["stderr_tail"] = [f"{v['state']}: {v['error']}"]
            reports.append(r)
            offsets.append(v["started_ms"] / 1000)
        return reports, offsets


def wait_for(pred, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def run_room(args, topology, url, n, label, workdir, preload, janus_pid):
    room = f"{topology}-{n}-{label}".replace("#", "r")
    pub = Call(args.build, url, room, "pub", True, workdir, n, preload)
    rec = {"topology": topology, "participants": n, "label": label,
           "load_start": suites.loadavg()}
    others = []
    hosts = []
    try:
        if not wait_for(lambda: pub.joined() or pub.proc.poll() is not None,
                        30) or pub.proc.poll() is not None:
            rec["error"] = "the publisher did not join"
        else:
            measure(args, rec, pub, others, hosts, url, room, n, workdir,
                    janus_pid)
    finally:
        for c in others:
            c.terminate()
        first = others[0].started if others else 0
        offsets = [c.started - first for c in others]
        reports = [c.stop() for c in others]
        if hosts:
            reports, offsets, rec["viewer_hosts"] = [], [], []
            first = hosts[0].started
        for h in hosts:
            rs, os_ = h.stop()
            reports += rs
            # each host's viewers' starts from the first host's start
            offsets += [o + h.started - first for o in os_]
            rec["viewer_hosts"].append({"exit": h.proc.returncode,
                                        "batches": h.batches,
                                        "stderr_tail": h.stderr_tail})
        pub_report = pub.stop()
    rec["load_end"] = suites.loadavg()
    rec["publisher"] = pub_report
    summarize_receivers(rec, reports, offsets, rec.get("settle_s", 0))
    return rec


def measure(args, rec, pub, others, hosts, url, room, n, workdir,
            janus_pid):
    """Starts the receivers, lets them settle, samples over the window.
    Viewers start --viewer-batch at a time, each batch once the one before
    has joined (or after 60 s): a hundred processes starting at once on
    two cores time out joining. With --viewer-host shared, the viewers
    are one legba-peer process (hosts), which starts them so."""
    viewers = rec["label"].startswith("viewers")
    display = args.viewer_display if viewers else "none"
    batch = args.viewer_batch if viewers else n
    shared = viewers and args.viewer_host == "shared"
    started = time.monotonic()
    if shared:
        # viewers 1..n-1 split into --viewer-hosts processes, each
        # starting its share batch / hosts at a time
        k = min(args.viewer_hosts, n - 1)
        first = 1
        for h in range(k):
            count = (n - 1) // k + (1 if h < (n - 1) % k else 0)
            hosts.append(ViewerHost(args.build, url, room, count,
                                    max(1, batch // k), n, workdir, first))
            first += count
        if not all([h.wait_started(60 * (n // max(1, batch // k) + 1))
                    for h in hosts]):
            rec["error"] = "a viewers' host did not start them all"
    for first in range(1, n if not shared else 1, batch):
        calls = [Call(args.build, url, room, f"r{i}", False, workdir, n,
                      display=display)
                 for i in range(first, min(first + batch, n))]
        others.extend(calls)
        if first + batch < n:
            wait_for(lambda: all(c.joined() or c.proc.poll() is not None
                                 for c in calls), 60)
    rec["start_s"] = time.monotonic() - started
    rec["settle_s"] = rec["start_s"] + args.settle + \
        args.settle_per_participant * n
    time.sleep(rec["settle_s"] - rec["start_s"])
    # the host's counts first: it may be slow to answer, and the CPU
    # window must not include the wait
    asked = time.monotonic()
    r0 = [h.report() for h in hosts]
    tr0 = time.monotonic()
    c0, b0, j0 = cpu_s(pub.proc.pid), read_count(pub.count_file), \
        cpu_s(janus_pid)
    v0 = [cpu_s(c.proc.pid) for c in others]
    h0 = [cpu_s(h.proc.pid) for h in hosts]
    load0 = suites.loadavg()
    t0 = time.monotonic()
    time.sleep(args.window)
    c1, b1, j1 = cpu_s(pub.proc.pid), read_count(pub.count_file), \
        cpu_s(janus_pid)
    v1 = [cpu_s(c.proc.pid) for c in others]
    h1 = [cpu_s(h.proc.pid) for h in hosts]
    dt = time.monotonic() - t0
    r1 = [h.report() for h in hosts]
    if hosts:
        rec["report_wait_s"] = [tr0 - asked, time.monotonic() - t0 - dt]
    if hosts and all(r0) and all(r1):
        # what each viewer received between the two reports, by kind,
        # per second
        dr = time.monotonic() - tr0
        rates = [((b["video_buffers"] - a["video_buffers"]) / dr,
                  (b["audio_buffers"] - a["audio_buffers"]) / dr)
                 for x, y in zip(r0, r1)
                 for a, b in zip(x["viewers"], y["viewers"])]
        rec["window_video_buffers_per_s"] = [v for v, _ in rates]
        rec["window_audio_buffers_per_s"] = [a for _, a in rates]
        rec["receiving_in_window"] = sum(1 for v, a in rates
                                         if v > 0 and a > 0)
    rec["load_window"] = [load0, suites.loadavg()]
    if hosts and None not in h0 + h1:
        rec["viewer_host_cpu_pct"] = sum(b - a for a, b in zip(h0, h1)) \
            / dt * 100
        rec["viewer_hosts_cpu_pct"] = [(b - a) / dt * 100
                                       for a, b in zip(h0, h1)]
    each = sorted((b - a) / dt * 100 for a, b in zip(v0, v1)
                  if a is not None and b is not None)
    if each:
        rec["receiver_cpu_pct_median"] = each[len(each) // 2]
        rec["receivers_cpu_pct_total"] = sum(each)
    if c0 is not None and c1 is not None:
        rec["publisher_cpu_pct"] = (c1 - c0) / dt * 100
    rec["publisher_upload_kbps"] = (b1 - b0) * 8 / dt / 1000
    if rec["topology"] == "sfu" and j0 is not None and j1 is not None:
        rec["janus_cpu_pct"] = (j1 - j0) / dt * 100
    rec["window_s"] = dt


def summarize_receivers(rec, reports, offsets, settle):
    """Who received the publisher, when, and at what latency."""
    joins, firsts, p50, p95, failures = [], [], [], [], []
    receiving = 0
    for i, r in enumerate(reports, 1):
        rep = r.get("report")
        if rep is None or r["exit"] != 0:
            failures.append({"identity": f"r{i}", **r})
        if rep is None:
            continue
        got = [p for p in rep["participants"] if p["identity"] == "pub"]
        first = rep.get("first_video_ms")
        if got and got[0]["video_frames"] > 0 and first is not None \
                and first + offsets[i - 1] * 1000 <= settle * 1000:
            receiving += 1
        if first is not None:
            firsts.append(first)
        if rep.get("joined_ms") is not None:
            joins.append(rep["joined_ms"])
        if got and got[0].get("latency_frames", 0) > 0:
            p50.append(got[0]["latency_p50"])
            p95.append(got[0]["latency_p95"])
    rec.update(receivers=len(reports), receiving_before_window=receiving,
               joined_ms=joins, first_video_ms=firsts,
               latency_p50_ms=p50, latency_p95_ms=p95)
    if failures:
        rec["receiver_failures"] = failures
    print(f"  {rec['topology']} n={rec['participants']} {rec['label']}: "
          f"pub cpu {rec.get('publisher_cpu_pct', -1):.0f}% upload "
          f"{rec.get('publisher_upload_kbps', -1):.0f} kbit/s, "
          f"{receiving}/{len(reports)} receiving"
          + (f" ({rec['receiving_in_window']} in the window)"
             if "receiving_in_window" in rec else "") + ", janus cpu "
          f"{rec.get('janus_cpu_pct', 0):.0f}%, viewer host cpu "
          f"{rec.get('viewer_host_cpu_pct', -1):.0f}%, "
          f"load {rec['load_end'][0]}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--sizes", default="2,4,8,16")
    ap.add_argument("--janus-rtp-ports", type=int, default=1000,
                    help="ports in Janus's RTP range, one per peer "
                    "connection: an SFU room of N that all publish holds "
                    "N * N, one publisher and N viewers N + 1 (default "
                    "1000)")
    ap.add_argument("--viewers", default="10",
                    help="SFU rooms of one publisher and N viewers "
                    "(empty: none)")
    ap.add_argument("--viewer-batch", type=int, default=10,
                    help="viewers started at a time, each batch once the "
                    "one before joined (default 10)")
    ap.add_argument("--viewer-display", default="undecoded",
                    choices=["undecoded", "none"],
                    help="the viewers' --display: undecoded (count what "
                    "arrives, decode nothing; the default) or none "
                    "(decode)")
    ap.add_argument("--viewer-host", default="shared",
                    choices=["shared", "process"],
                    help="where the viewers run: shared (one legba-peer "
                    "viewers process, each viewer a LegbaRoom of its own; "
                    "the default) or process (one legba-call each)")
    ap.add_argument("--viewer-hosts", type=int, default=1,
                    help="with --viewer-host shared: the processes the "
                    "viewers are split into, each starting "
                    "viewer-batch / viewer-hosts at a time (default 1)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--settle", type=float, default=8.0)
    ap.add_argument("--settle-per-participant", type=float, default=0.3,
                    help="more settling per participant (default 0.3 s)")
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.viewer_host == "shared" and args.viewer_display != "undecoded":
        ap.error("--viewer-display none needs --viewer-host process")
    if build_type(args.build) != "release":
        ap.error(f"{args.build} is not a release build")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    viewers = [int(s) for s in args.viewers.split(",") if s]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    suite = "sfu" if sizes else "sfu-viewers"
    path = args.json or os.path.join(BENCH, "results",
                                     f"{suite}-{stamp}.json")
    started = time.time()
    result = {"suite": suite, "stamp": stamp,
              "command": " ".join(["bench/sfu/sfu-vs-mesh.py"]
                                  + sys.argv[1:]),
              "conditions": suites.conditions(args.build),
              "janus": janus_version(), "load_start": suites.loadavg(),
              "busy_start": suites.busy_processes(),
              "settings": {"sizes": sizes, "viewers": viewers,
                           "repeats": args.repeats, "settle_s": args.settle,
                           "settle_per_participant_s":
                               args.settle_per_participant,
                           "window_s": args.window,
                           "janus_rtp_ports": args.janus_rtp_ports,
                           "viewer_batch": args.viewer_batch,
                           "viewer_host": args.viewer_host,
                           "viewer_hosts": args.viewer_hosts,
                           "publisher": "320x180 15 fps H.264 + Opus",
                           "receivers": "--video none --audio none, "
                           "decoding", "viewer_opts":
                               "legba-peer viewers: no track, buffers "
                               "counted undecoded"
                               if args.viewer_host == "shared" else
                               "legba-call --video none --audio "
                               f"none --display {args.viewer_display}",
                           "upload": "UDP payload bytes the "
                           "publisher sends (LD_PRELOAD sendcount.c)"},
              "rooms": []}
    with tempfile.TemporaryDirectory(prefix="legba-sfu-bench-") as workdir:
        preload = os.path.join(workdir, "sendcount.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", preload,
                        os.path.join(HERE, "sendcount.c"), "-ldl"],
                       check=True)
        janus = start_janus(workdir, args.janus_rtp_ports)
        jpid = int(janus["JANUS_PID"])
        servers = {}
        try:
            # a room of 1 + N viewers: more members than the presence
            # channel's default cap of 100
            members = max([100] + [v + 1 for v in viewers])
            for topo, extra in (("mesh", []), ("sfu", [
                    "--janus-url", janus["JANUS_HTTP_URL"],
                    "--janus-ws-url", janus["JANUS_WS_URL"],
                    "--janus-admin-key", janus["JANUS_ADMIN_KEY"],
                    "--topology", "sfu",
                    f"--max-presence-members={members}"])):
                d = os.path.join(workdir, topo)
                os.makedirs(d)
                servers[topo] = suites.LegbaServerProcess(args.build, d,
                                                          extra)
            turn = 0
            for rep in range(args.repeats):
                for n in sizes:
                    order = ["mesh", "sfu"] if turn % 2 == 0 else \
                        ["sfu", "mesh"]
                    turn += 1
                    for topo in order:
                        result["rooms"].append(run_room(
                            args, topo, servers[topo].url, n, f"#{rep}",
                            workdir, preload, jpid))
            for rep in range(args.repeats):
                for v in viewers:
                    result["rooms"].append(run_room(
                        args, "sfu", servers["sfu"].url, v + 1,
                        f"viewers#{rep}", workdir, preload, jpid))
        finally:
            result["server_log_tail"] = {}
            for topo, s in servers.items():
                s.log.seek(0)
                result["server_log_tail"][topo] = \
                    s.log.read().splitlines()[-20:]
                s.stop()
            subprocess.run([os.path.join(ROOT, "tests", "common",
                                         "start-janus.sh"), "--stop",
                            os.path.join(workdir, "janus")])
            result["load_end"] = suites.loadavg()
            result["seconds"] = time.time() - started
            result["busy_end"] = suites.busy_processes()
            with open(os.path.join(workdir, "janus", "janus.log")) as f:
                log = f.read().splitlines()
            result["janus_log_errors"] = [
                l for l in log if "[ERR]" in l or "[WARN]" in l][-40:]
            with open(path, "w") as f:
                json.dump(result, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

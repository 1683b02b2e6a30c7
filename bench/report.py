#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Generates bench/RESULTS.md and its charts from the newest
bench/results/SUITE-*.json of each suite (bench/suites.py), with links to
the video-send (bench/encoders/RESULTS.md) and signalling-server
(bench/server/RESULTS.md) reports. Deterministic: the bootstrap has a
fixed seed (bench/stats.py), so the same files give the same report.

  /usr/bin/python3 bench/report.py [--results DIR] [--output FILE.md]
"""

import argparse
import glob
import statistics
import json
import os
import subprocess

import stats

HERE = os.path.dirname(os.path.abspath(__file__))

# metric: (label, unit, lower is better)
METRICS = {
    "cold_ms": ("Setup, first pair in a fresh process", "ms", True),
    "warm_ms": ("Setup, warm (same process, first discarded)", "ms", True),
    "process_to_open_ms": ("Setup, process start (main) to the first open",
                           "ms", True),
    "warm_joined_ms": ("Setup, warm: both rooms joined", "ms", True),
    "warm_described_ms": ("Setup, warm: descriptions applied", "ms", True),
    "warm_connected_ms": ("Setup, warm: connected (ICE and DTLS)", "ms",
                          True),
    "bulk_mb_per_s": ("Bulk throughput, 1 KiB messages", "MB/s", False),
    "bulk_cpu_s_per_mb": ("Bulk CPU per MB (both sides)", "CPU-s/MB", True),
    "rtt_p50_ms": ("Round trip 1 KiB at 100/s, p50", "ms", True),
    "rtt_p95_ms": ("Round trip 1 KiB at 100/s, p95", "ms", True),
    "rtt_p99_ms": ("Round trip 1 KiB at 100/s, p99", "ms", True),
    "cpu_us_per_msg_64": ("CPU per 64 B message, send + receive", "µs",
                          True),
    "cpu_us_per_msg_4096": ("CPU per 4 KiB message, send + receive", "µs",
                            True),
    "latency_p50_ms": ("Glass-to-glass 720p30 H.264, p50", "ms", True),
    "latency_p95_ms": ("Glass-to-glass 720p30 H.264, p95", "ms", True),
    "latency_p99_ms": ("Glass-to-glass 720p30 H.264, p99", "ms", True),
    "synced_p50_ms": ("Glass-to-glass to a clock-synced sink, jitter "
                      "buffer 20 ms (legba-100ms: the room's default), p50",
                      "ms", True),
    "synced_p95_ms": ("Glass-to-glass to a clock-synced sink, jitter "
                      "buffer 20 ms (legba-100ms: the room's default), p95",
                      "ms", True),
    "synced_p99_ms": ("Glass-to-glass to a clock-synced sink, jitter "
                      "buffer 20 ms (legba-100ms: the room's default), p99",
                      "ms", True),
    "call_cpu_ms_per_frame": ("Call CPU per frame received (both ends, "
                              "one process; pion: and its own process)",
                              "ms", True),
    "bitrate_kbps": ("Bitrate reached (cap 1500; aiortc: its own rate "
                     "control)", "kbit/s", None),
    "latency_samples": ("Frames with a readable stamp (after the first 10)",
                        "frames", False),
    "stamps_unreadable_pct": ("Frames out whose stamp failed its check",
                              "%", True),
    "frames_lost_pct": ("Frames lost (counter gaps) over frames out", "%",
                        True),
    "pairs_connected": ("Pairs connected in one process", "pairs", False),
    "pairs_setup_ms_per_pair": ("Setup time per pair, the pairs one after "
                                "the other (the time of all over their "
                                "number)", "ms", True),
    "rss_kib_per_pair": ("RSS per pair", "KiB", True),
    "fds_per_pair": ("File descriptors per pair", "fds", True),
    "threads_per_pair": ("Threads per pair", "threads", True),
    "stripped_bytes": ("Stripped size", "bytes", True),
    "heap_kib_per_pair": ("Heap in use per pair (mallinfo2)", "KiB", True),
    "heap_kib_per_pair_after_first": (
        "Heap per pair after the first (what one more pair adds)", "KiB",
        True),
    "first_frame_cold_ms": ("Connect to first decoded frame, 640x360, "
                            "first call in a fresh process", "ms", True),
    "first_frame_warm_ms": ("Connect to first decoded frame, 640x360, "
                            "later calls (same process)", "ms", True),
    "mesh_cpu_pct_participant": ("4-way mesh 640x360: CPU per participant "
                                 "(one process each)", "% of a core", True),
    "mesh_cpu_pct_all": ("4-way mesh 640x360: CPU of the 4 participants "
                         "together", "% of a core", True),
    "mesh_fps_stream": ("4-way mesh: frames decoded per second, each of "
                        "the 12 streams (source 30)", "fps", False),
    "mesh_latency_p50_ms": ("4-way mesh: glass-to-glass p50 of each of "
                            "the 12 streams", "ms", True),
    "mesh_fps_slowest": ("4-way mesh: the slowest stream of the run",
                         "fps", False),
    "mesh_frames_lost_pct": ("4-way mesh: frames lost in the window, all "
                             "12 streams", "%", True),
    "mesh_rss_mib_participant": ("4-way mesh: RSS per participant", "MiB",
                                 True),
    "mesh_server_cpu_pct": ("4-way mesh: legba-server CPU over the window "
                            "(Legba only)",
                            "% of a core", True),
    "mesh_all_decoding_s": ("4-way mesh: processes started to all 12 "
                            "streams decoding", "s", True),
    "mesh_rtp_dropped_pct": ("4-way mesh: RTP packets dropped in the "
                             "window, per participant (the loss applied)",
                             "%", None),
    "mesh_key_frames_participant": ("4-way mesh: key frames each "
                                    "participant's encoder made in the "
                                    "window", "frames", None),
}
for d, dname in (("send", "send"), ("recv", "receive")):
    for size, sname in (("short", "short (46 B)"), ("4k", "4 KiB")):
        METRICS[f"cpu_ns_{d}_{size}"] = (
            f"CPU per message, {dname}, {sname}, per batch", "ns", True)
        METRICS[f"ir_{d}_{size}"] = (
            f"Instructions per message, {dname}, {sname} (callgrind)", "Ir",
            True)
for codec in ("h264", "vp8"):
    for size in ("360p", "720p", "1080p"):
        METRICS[f"decode_ms_per_frame_{codec}_{size}"] = (
            f"Decode {codec.upper()} {size}, CPU per frame", "ms", True)
for n in (1, 10, 50):
    METRICS[f"opus_cpu_pct_per_stream_{n}"] = (
        f"Opus encode, {n} stream(s): CPU per stream", "% of a core", True)

SUITES = [
    ("setup", "1. Connection setup", "aiortc"),
    ("datachannel", "2. Data channels", "aiortc"),
    ("data", "2b. Data channels: the Legba data path", "json-glib"),
    ("video-receive", "4. Video receive", "aiortc"),
    ("video-call", "5. Video call", "rtp-floor"),
    ("first-frame", "5b. Video call: connect to first decoded frame",
     "webrtcbin"),
    ("mesh", "5c. Video mesh: CPU per participant, 4 participants",
     "webrtcbin"),
    ("mesh-loss", "5d. Video mesh under packet loss: 4 participants, each "
     "dropping some of the RTP packets it sends (the rate: How, below)",
     "webrtcbin"),
    ("audio", "6. Audio", "aiortc"),
    ("scale", "7. Scale", "aiortc"),
    ("footprint", "9. Footprint", None),
]

PEER_ORDER = ["legba", "legba-inproc", "legba-sync", "legba-burst",
              "json-glib", "json-glib-hop", "floor", "webrtcbin", "webrtcbin-tuned",
              "webrtcbin-like", "webrtcbin-1dc",
              "gstreamer",
              "rtp-floor", "aiortc", "pion"]

CAVEATS = {
    "setup": "webrtcbin-like is the floor of the warm target: webrtcbin "
    "alone, tuned as the rooms tune it, describing the session a pair of "
    "rooms describes. Its receive-only transceivers cost the describing "
    "phase most of its time (webrtcbin-tuned, one data channel and no "
    "transceiver, describes in a fraction of it). The phases show where "
    "Legba adds to that floor: joining through the server (the two rooms, "
    "the server and the first room's new peer connection share one main "
    "thread here), the descriptions' two trips through the signaller, and "
    "the rest within the noise of webrtcbin's own ICE, DTLS and SCTP. "
    "legba-inproc takes the server away.",
    "video-receive": "The GStreamer figure includes appsrc and h264parse "
    "(for H.264) fed from Python; aiortc's is its decoder called directly. "
    "Both are process user+sys over the decode, every thread.",
    "video-call": "Plain webrtcbin's call is about 29 ms behind the "
    "room's: webrtcbin 1.22 syncs what it sends to the clock and waits out "
    "the latency upstream reports (x264enc: one frame), which its driver, "
    "linking the encoder before the pipeline plays, gives it from the "
    "start; a room reports no latency for a live track (docs/rooms.md, "
    "GStreamer 1.22 behaviours; legba-recalc is the call in which the "
    "sender's pipeline recomputes its latency). "
    "Runs before Legba f029188 lost most of Legba's frames: "
    "the room handed on rtph264depay's byte-stream, which cut x264enc's "
    "multi-slice key frames into pieces (docs/rooms.md, Receiving). "
    "aiortc's figure is its own call, not the same encoder: libx264 at "
    "aiortc's settings (its default preset, not ultrafast) and, on the "
    "way in, aiortc 1.4's jitter buffer, which hands a frame to the "
    "decoder only when the first packet of the next frame arrives (about "
    "one frame interval, 33 ms at 30 fps); its CPU figure includes "
    "Python's conversions of every frame to and from PyAV.",
    "data": "Legba's rows are legba_room_send_json() and data-received "
    "through the room's own code; the transport is left out of the CPU "
    "rows alike for every configuration. legba against json-glib is the "
    "comparison the targets use; floor shows what the bytes alone cost "
    "and carries no percentage. A receive by legba includes the hand-over "
    "from webrtcbin's thread to the room's main context (one main-loop "
    "dispatch per message when they come one at a time); json-glib-hop is "
    "json-glib with that same hand-over, legba-burst the room's cost when "
    "messages come faster than its context runs, legba-sync the room's cost "
    "when the application handles messages on the thread they arrive on "
    "(sync-data-received) and nothing is handed over. Timed rows are noisier "
    "than the instruction counts on a busy machine; the instruction "
    "counts do not see cache misses or system calls (the main-loop "
    "dispatch polls); they are deterministic, one run a row, so they carry "
    "no interval. One row by hand, from a release build: valgrind "
    "--tool=callgrind --collect-atstart=no --toggle-collect=measured_batch "
    "build-release/bench/data-cpu --dir recv --size short --batches 1 "
    "--batch 1000 --only legba (the Ir total over 1,000).",
    "scale": "webrtcbin is the like-for-like floor of the targets: the "
    "same transceivers and data channel as a pair of Legba's rooms; "
    "webrtcbin-1dc, one data channel and no transceiver, is the plain pair "
    "this section reported before, kept for comparison. legba-inproc is "
    "Legba's rooms meeting through an in-process signaller: no WebSocket a "
    "pair, as plain webrtcbin's pairs hand their descriptions across in "
    "process (legba's rooms each hold one to a legba-server process). The "
    "limits a peer "
    "stops at are this machine's: 20,000 open files per process, "
    "pid_max 32,768 thread ids for the whole machine (shared with other "
    "work), vm.max_map_count 65,530 mappings per process.",
    "first-frame": "Legba's figure includes its signalling server and "
    "the room's protocol (joining, the offer and answer over a WebSocket) "
    "and the key frame its receiving room asks for; plain webrtcbin's "
    "hands the descriptions across in process and its encoder starts "
    "with the call, so its first frame is a key frame without asking. "
    "Both ends in one process, one clock.",
    "mesh": "Each participant's CPU is its whole process: capture "
    "(videotestsrc), one x264enc, three decoders, its peer connections "
    "and signalling. The four processes share the same two cores with "
    "each other and with the rest of the machine, so a starved mesh shows "
    "as streams under 30 fps, not as more CPU; read the CPU figure with "
    "the frame rates beside it. Plain webrtcbin is the floor Legba's "
    "rooms add to: the same media work and session, but its signalling is "
    "the driver's (JSON lines through pipes, nothing in the process but "
    "their reading and writing), so Legba's figure includes its "
    "signalling client (a WebSocket to the legba-server, the room "
    "protocol) and what its rooms add per peer (a probe gating each send "
    "queue, and on each received stream a key-frame gate, capsfilters, "
    "a tee and a frame counter), and the plain one does not. The "
    "server's own CPU is Legba's alone (plain webrtcbin and aiortc have "
    "none). aiortc is not the same work: it encodes once per connection "
    "(three H264Encoders a participant, at x264's default preset, not "
    "ultrafast), decodes in Python's process with its own jitter buffer, "
    "and converts each decoded frame for legbastampcheck; its row is "
    "what an application built on aiortc pays for the same mesh, and "
    "where its streams fall under 30 fps the machine could not carry it "
    "(its lost frames include those its relay skipped for an encoder "
    "that was behind).",
    "mesh-loss": "The loss is random and independent per packet, the "
    "same rate for both peers, applied in each sender's process: the "
    "same number of frames is not lost in both peers' runs. Both "
    "recover a lost packet the same way (NACK and RTX, webrtcbin's own); "
    "they differ in what reaches the encoder when a frame cannot be "
    "completed in time: plain webrtcbin turns every PLI into a key-frame "
    "request, a Legba room at most one per 100 ms per track (500 ms before "
    "2026-12-02; docs/rooms.md). "
    "Read frames lost and the slowest stream with the key frames made "
    "beside them: more key frames cost bits and encoder time, fewer leave "
    "a receiver waiting longer for one.",
    "datachannel": "Three runs a side: throughput varies from run to run "
    "more than the other rows do, so its intervals are wide. Legba's own "
    "rows, beside plain webrtcbin in the same run, are in section 2b.",
}

NOT_MEASURED = {
    "setup": [],
    "datachannel": [
        "Legba: in section 2b (bench/run.sh data), beside plain webrtcbin "
        "in the same run.",
        "Every peer, raw+JSON CPU per message: the JSON work differs by "
        "language runtime (json-glib, Python's json, Go's encoding/json) "
        "and would measure those, not the WebRTC stacks; the rows are raw "
        "bytes.",
        "Send and receive CPU separately: both ends run in one process, so "
        "the figure is their sum.",
    ],
    "video-receive": [
        "Pion: it has no decoders (the application brings its own).",
    ],
    "video-call": [
        "Pion with codecs of its own: it has none; its row is Pion "
        "carrying the RTP of the floor's encoder to the floor's decoder.",
        "Bytes on the wire: the bitrate rows count the encoder's output "
        "(RTP, SRTP and retransmissions come on top of it).",
    ],
    "audio": [
        "Pion: no Opus encoder of its own.",
    ],
    "scale": [
        "Heap separately from RSS: no heap profiler run in this suite "
        "(section 2b has mallinfo2's heap per pair, Legba and plain "
        "webrtcbin).",
    ],
    "data": [
        "Two processes talking to each other: the two rooms (and the two "
        "webrtcbins) are in one process, so the round trip is read on one "
        "clock; the signalling goes through a legba-server process.",
        "aiortc and Pion: their data-channel figures (raw bytes) are in "
        "section 2; their JSON work would measure Python's and Go's JSON, "
        "not a WebRTC stack.",
        "The heap of the legba-server process (per connection): the "
        "signalling server's own figures are in section 8.",
        "Massif: the heap is mallinfo2's count in use, not a profile by "
        "allocation site.",
    ],
    "footprint": [],
    "first-frame": [
        "aiortc and Pion: aiortc's call is its own (aiortc-call.py) and "
        "Pion has no decoder; only Legba and plain webrtcbin are timed.",
        "Browsers as the other participant: not in this suite.",
    ],
    "mesh": [
        "Pion mesh: Pion has no encoder or decoder of its own.",
        "Encoders other than x264enc ultrafast: the send figures per "
        "encoder are in section 3.",
        "Meshes larger than 4: not run.",
    ],
    "mesh-loss": [
        "aiortc: its media path is Python's; a netsim cannot be put in "
        "it, and a loss applied elsewhere would not be the same loss.",
        "Loss in the network itself (RTCP and data channels too, bursts, "
        "delay): this machine's kernel has no netem qdisc.",
        "Other loss rates: one rate per run of the suite (MESH_LOSS in "
        "bench/suites.py).",
    ],
}


def newest(results_dir, suite):
    # SUITE-STAMP.json: the stamp starts with a digit, so that mesh does
    # not take mesh-loss's files
    found = sorted(glob.glob(os.path.join(results_dir,
                                          f"{suite}-[0-9]*.json")))
    found = [f for f in found if "quick" not in os.path.basename(f)]
    return found[-1] if found else None


def fmt(v):
    if v is None:
        return "–"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def peers_of(series):
    found = {p for per in series.values() for p in per}
    return sorted(found, key=lambda p: (PEER_ORDER.index(p)
                                        if p in PEER_ORDER else 99, p))


def verdict_text(row, peer, base):
    if row["verdict"] is None:
        return "–"
    if row["verdict"] == "inconclusive":
        return ("inconclusive (fewer than 3 runs a side)"
                if row.get("few_runs") else "inconclusive")
    word = row["verdict"].split()[0]
    return f"{peer} {word} than {base} (established)"


def unreliable_peers(series):
    """Peers whose glass-to-glass series stands on a minority of frames:
    when more than 10% of the frames out had an unreadable stamp, the
    readable ones are not a fair sample (they cluster after key frames),
    so their latency is shown but not compared."""
    out = {}
    for peer, values in series.get("stamps_unreadable_pct", {}).items():
        m = stats.median(values)
        if m is not None and m > 10:
            out[peer] = f"{m:.0f}% of its frames had an unreadable stamp"
    return out


def count(values, runs):
    """The n column: samples, and the runs they came in when several
    samples share a run."""
    k = len(set(runs)) if runs is not None else len(values)
    if k == len(values):
        return f"{len(values)}"
    return f"{len(values)} in {k} run{'' if k == 1 else 's'}"


def table(series, baseline, second=None, run_ids=None):
    """Rows per metric and peer: median, n, ratio and CI against the
    baseline (and Legba against every other peer). run_ids: the run of
    each sample, for metrics with several samples a run (the intervals
    then resample runs: stats.runs_of)."""
    unreliable = unreliable_peers(series)
    run_ids = run_ids or {}
    lines = ["| Figure | Peer | Median | n | vs " + (baseline or "–") +
             ": ratio | 95% CI of the difference | Verdict | State |",
             "|---|---|---:|---:|---:|---|---|---|"]
    extra = []
    for metric, per in series.items():
        if metric.endswith("_all_ms"):
            continue
        label, unit, _ = METRICS.get(metric, (metric, "", True))
        base = per.get(baseline, []) if baseline else []
        runs = run_ids.get(metric, {})
        for peer in peers_of({metric: per}):
            values = per[peer]
            row = stats.compare(values, base, runs=runs.get(peer),
                                baseline_runs=runs.get(baseline)) \
                if peer != baseline and base \
                else {"ratio": None, "ci": None, "verdict": None}
            ci = (f"[{fmt(row['ci'][0])}, {fmt(row['ci'][1])}]"
                  if row["ci"] else "–")
            ratio = fmt(row["ratio"]) if row["ratio"] is not None else (
                "1 (baseline)" if peer == baseline else "–")
            verdict = verdict_text(row, peer, baseline)
            state = stats.state(values)
            if metric.startswith("latency_p") and peer in unreliable:
                verdict = "not comparable"
                state = f"measured; not comparable: {unreliable[peer]}"
            lines.append(
                f"| {label} ({unit}) | {peer} | {fmt(stats.median(values))}"
                f" | {count(values, runs.get(peer))} | {ratio} | {ci} | "
                f"{verdict} | {state} |")
        if second and "legba" in per:
            for other in peers_of({metric: per}):
                if other == "legba":
                    continue
                row = stats.compare(per["legba"], per[other],
                                    runs=runs.get("legba"),
                                    baseline_runs=runs.get(other))
                ci = (f"[{fmt(row['ci'][0])}, {fmt(row['ci'][1])}]"
                      if row["ci"] else "–")
                verdict = verdict_text(row, "legba", other)
                if metric.startswith("latency_p") and "legba" in unreliable:
                    verdict = f"not comparable: {unreliable['legba']}"
                extra.append(f"| {label} ({unit}) | {other} | "
                             f"{fmt(row['median'])} | "
                             f"{fmt(row['baseline_median'])} | "
                             f"{fmt(row['ratio'])} | {ci} | {verdict} |")
    if extra:
        lines += ["", "Legba against each peer (plain webrtcbin is the floor "
                  "it adds to):", "",
                  "| Figure | Peer | Legba | Peer's | Legba / peer | 95% CI "
                  "of the difference | Verdict |",
                  "|---|---|---:|---:|---:|---|---|"]
        lines += extra
    return lines


def gnuplot(script):
    """Runs a chart script; a chart gnuplot cannot draw is left out (and
    said), never the report."""
    try:
        proc = subprocess.run(["gnuplot"], input=script, text=True,
                              capture_output=True)
    except FileNotFoundError:
        print("report.py: chart left out: gnuplot is not installed "
              "(bench/setup.sh installs it)")
        return False
    if proc.returncode != 0:
        print("report.py: chart left out: " + proc.stderr.strip())
    return proc.returncode == 0


def ratio_chart(suite, series, baseline, path):
    """Bars: each peer's median over the baseline's, per figure."""
    rows = []
    for metric, per in series.items():
        if metric.endswith("_all_ms") or baseline not in per:
            continue
        b = stats.median(per[baseline])
        if not b:
            continue
        label = METRICS.get(metric, (metric,))[0]
        rows.append((label, {p: stats.median(v) / b for p, v in per.items()
                             if p != baseline}))
    peers = [p for p in peers_of(series) if p != baseline and
             any(p in ratios for _, ratios in rows)]
    rows = [(label, ratios) for label, ratios in rows
            if any(v > 0 for v in ratios.values())]
    if not rows or not peers:
        return False
    data = path + ".dat"
    with open(data, "w") as f:
        f.write("figure " + " ".join(peers) + "\n")
        for label, ratios in rows:
            f.write('"' + label.replace('"', "'") + '" ' + " ".join(
                f"{ratios[p]:.4f}" if ratios.get(p, 0) > 0 else "NaN"
                for p in peers) + "\n")
    plots = ", ".join(
        f"'{data}' using {i + 2}:xtic(1) title '{p}'"
        for i, p in enumerate(peers))
    ok = gnuplot(f"""set terminal pngcairo size 1100,{300 + 40 * len(rows)} font ',9'
set output '{path}'
set title '{suite}: median relative to {baseline} (1 = same; lower is \
better except throughput and pairs)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left autotitle columnhead
set xtics rotate by -25 left
set logscale y
set ylabel 'ratio to {baseline} (log scale)'
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2
set bmargin 10
plot {plots}
""")
    os.unlink(data)
    return ok


def distribution_chart(title, per, path):
    """Empirical CDF of every sample of each peer."""
    peers = peers_of({"x": per})
    datas, plots = [], []
    for p in peers:
        values = sorted(per[p])
        if not values:
            continue
        data = f"{path}.{p}.dat"
        with open(data, "w") as f:
            for i, v in enumerate(values):
                f.write(f"{v:.4f} {(i + 1) / len(values):.5f}\n")
        datas.append(data)
        plots.append(f"'{data}' using 1:2 with steps title '{p}'")
    if not plots:
        return False
    ok = gnuplot(f"""set terminal pngcairo size 900,500 font ',9'
set output '{path}'
set title '{title}'
set logscale x
set xlabel 'ms (log scale)'
set ylabel 'fraction of samples'
set key bottom right
set grid
plot {", ".join(plots)}
""")
    for d in datas:
        os.unlink(d)
    return ok


def server_hook_lines(results_dir):
    """8b: a client event answered by a C handler (bench/server/hook.mjs)
    beside the plain relay."""
    lines = []
    found = newest(results_dir, "server-hook")
    if found is not None:
        with open(found) as f:
            res = json.load(f)
        c = res["conditions"]
        lines += ["## 8b. Signalling server: a client event answered by "
                  "an application's handler", "",
                  f"From `{os.path.basename(found)}`; command: "
                  f"`{c['command']}` (release build; docs/benchmarks.md, "
                  "\"Server hooks\").", "",
                  "| round trip | runs | p50 ms (median of runs) | "
                  "p95 ms (median of runs) | p50 of each run (ms) | Target "
                  "| State |",
                  "|---|---|---|---|---|---|---|"]
        for name, runs in res["runs"].items():
            p50s = [r["p50"] for r in runs]
            target = "–"
            if name == "legba-hook":
                target = ("p50 ≤ 0.1 ms: " +
                          ("met" if max(p50s) <= 0.1 else "not met") +
                          " (every run)")
            lines.append(
                f"| {name} | {len(runs)} | {fmt(stats.median(p50s))} | "
                f"{fmt(stats.median([r['p95'] for r in runs]))} | "
                f"{', '.join(fmt(x) for x in p50s)} | {target} | "
                f"measured, n = {len(runs)} |")
        lines += ["", "How: Node clients on the `ws` package, Pusher "
                  "protocol 7, one event in flight, "
                  f"{res['warmup']} warm-up events then {res['count']} "
                  "timed ones per run, each run on a fresh server process, "
                  "the peers' order swapped every round. legba-hook: A "
                  "sends client-ask on a private channel, a C handler of "
                  "LegbaServer::client-event (bench/server/hook-server.c) "
                  "answers A alone; timed from A's send to A's receipt. "
                  "legba-relay and soketi-relay: A sends a client event, "
                  "the server relays it to B in the same process; timed "
                  "from A's send to B's receipt. Each is one server pass "
                  "and two loopback hops, on one clock. The Lightspeed "
                  "report's PHP handler: 0.28 ms p50 (its figure, not "
                  "measured here). No verdict between the rows: answering "
                  "and relaying are different work.", "",
                  "Conditions:",
                  f"- CPU: {c['cpu_model']} × {c['cpus']}; kernel "
                  f"{c['kernel']}; Node {c['node']}, ws {c['ws']}, soketi "
                  f"{c['soketi']}; Legba {c['legba']}",
                  f"- Load average at start {c['loadavg_start']}, at end "
                  f"{c['loadavg_end']}; the machine was {c['machine']}",
                  ""]
    return lines


def api_flood_unpinned(results_dir, newest_found):
    """The newest server-api-flood run before newest_found whose processes
    were left to the scheduler (runs before the placement was recorded)."""
    found = sorted(glob.glob(os.path.join(results_dir,
                                          "server-api-flood-[0-9]*.json")))
    for path in reversed(found):
        if path >= newest_found:
            continue
        with open(path) as f:
            res = json.load(f)
        if res["conditions"].get("placement", "unpinned").startswith(
                "unpinned"):
            return path, res
    return None, None


def api_flood_lines(results_dir):
    """8c: one app's HTTP API flood against another app's publishing
    (bench/server/api-flood.mjs), B's p50 held against 2x its quiet one."""
    lines = []
    found = newest(results_dir, "server-api-flood")
    if found is None:
        return lines
    with open(found) as f:
        res = json.load(f)
    c = res["conditions"]
    quiet = stats.median([r["p50"] for r in res["runs"]["quiet"]])
    lines += ["## 8c. Signalling server: one app's HTTP API flood and "
              "another app's publishing", "",
              f"From `{os.path.basename(found)}`; command: "
              f"`{c['command']}` (release build).", "",
              "| phase | runs | B publish p50 ms (median of runs) | "
              "B publish p95 ms (median of runs) | B's p50 of each run (ms) "
              "| B's answers | A's answers a second, 200 / 429 (median of "
              "runs) | Target: B's p50 ≤ 2× quiet | State |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, runs in res["runs"].items():
        answers = {}
        for r in runs:
            for k, v in r["statuses"].items():
                answers[k] = answers.get(k, 0) + v
        floods = [r["flood"] for r in runs if r["flood"]]
        a = "–"
        if floods:
            a = " / ".join(
                fmt(stats.median([f["counts"].get(code, 0) / f["seconds"]
                                  for f in floods]))
                for code in ("200", "429"))
        p50s = [r["p50"] for r in runs]
        target = "–"
        if name != "quiet":
            within = sum(1 for x in p50s if x <= 2 * quiet)
            target = (("met" if stats.median(p50s) <= 2 * quiet else
                       "not met") + f" by the median; {within} of "
                      f"{len(p50s)} runs within")
        lines.append(
            f"| {name} | {len(runs)} | {fmt(stats.median(p50s))} | "
            f"{fmt(stats.median([r['p95'] for r in runs]))} | "
            f"{', '.join(fmt(x) for x in p50s)} | "
            f"{', '.join(f'{k}: {v}' for k, v in sorted(answers.items()))}"
            f" | {a} | {target} | measured, n = {len(runs)} |")
    lines += ["", "How: legba-server with apps a and b; b publishes "
              f"{res['count']} events one at a time (signed POST "
              "/apps/b/events, a kept-alive connection, 100 untimed "
              "first), each timed from its request to its answer; a "
              "floods the API from another Node process over 64 "
              "kept-alive connections, started 1 s before. quiet: no "
              "flood; flood: a's api-requests-per-second at 100; "
              "flood-unlimited: at 0 (no limit). Each phase on a fresh "
              "server, the phases' order swapped every round.", ""]
    old_path, old = api_flood_unpinned(results_dir, found)
    if old is not None:
        medians = ", ".join(
            f"{name} {fmt(stats.median([r['p50'] for r in runs]))}"
            for name, runs in old["runs"].items())
        lines += [f"The run before with the processes left to the "
                  f"scheduler (`{os.path.basename(old_path)}`, Legba "
                  f"{old['conditions']['legba']}): B's p50 {medians} ms "
                  "(medians of runs).", ""]
    lines += ["Conditions:",
              f"- CPU: {c['cpu_model']} × {c['cpus']}; kernel "
              f"{c['kernel']}; Node {c['node']}; Legba {c['legba']}",
              f"- Placement: {c.get('placement', 'unpinned')}",
              f"- Load average at start {c['loadavg_start']}, at end "
              f"{c['loadavg_end']}; the machine was {c['machine']}",
              ""]
    return lines


def fanout_chart(results_dir, path):
    found = newest(results_dir, "server")
    if found is None:
        return None
    with open(found) as f:
        server = json.load(f)
    points = {}
    for run in server["runs"]:
        load = run.get("load") or {}
        lat = load.get("latency_ms") or {}
        if run.get("scenario") == "fanout" and lat.get("p50") is not None:
            points.setdefault(run["peer"], {}).setdefault(
                run["size"], []).append((lat["p50"], lat["p95"]))
    if not points:
        return None
    datas, plots = [], []
    for peer, by_size in sorted(points.items()):
        data = f"{path}.{peer}.dat"
        with open(data, "w") as f:
            for size in sorted(by_size):
                f.write(f"{size} {stats.median([p[0] for p in by_size[size]])}"
                        f" {stats.median([p[1] for p in by_size[size]])}\n")
        datas.append(data)
        plots.append(f"'{data}' using 1:2 with linespoints title "
                     f"'{peer} p50'")
        plots.append(f"'{data}' using 1:3 with linespoints dt 2 title "
                     f"'{peer} p95'")
    gnuplot(f"""set terminal pngcairo size 900,500 font ',9'
set output '{path}'
set title 'Fan-out of one HTTP API event: publish-to-receipt (medians of runs)'
set xlabel 'sockets'
set ylabel 'ms'
set key top left
set grid
plot {", ".join(plots)}
""")
    for d in datas:
        os.unlink(d)
    return os.path.basename(found)


def encoder_summary(results_dir):
    """The encoder sweep's rows over 1.10 x the cap, from its newest
    results file (bench/encoders/analyze.py computes them)."""
    import importlib.util
    found = sorted(glob.glob(os.path.join(results_dir, "encoders-*.json")))
    found = [f for f in found if "quick" not in os.path.basename(f)]
    if not found:
        return None, [], ""
    spec = importlib.util.spec_from_file_location(
        "encoders_analyze", os.path.join(HERE, "encoders", "analyze.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(found[-1]) as f:
        data = json.load(f)
    out, _ = mod.series(data)
    over = []
    order = ["360p", "720p", "1080p", "2160p"]
    for (size, cap, config), s in sorted(
            out.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1],
                                         kv[0][2])):
        if s["rate"] and stats.median(s["rate"]) > 1.10:
            over.append(f"{config} at {size}, {cap / 1e6:g} Mbit/s: "
                        f"{stats.median(s['rate']):.2f} x the cap, frames "
                        f"out / in {stats.median(s['fps']):.2f}")
    x264 = [v for (size, cap, config), s in out.items()
            if size == "720p" and config == "legba:x264enc"
            for v in s["cpu_ms"]]
    legba_over = [o for o in over if o.startswith("legba:")]
    text = ("Targets: software H.264 at 720p ≤ 6 ms per frame: "
            + (f"legba:x264enc {stats.median(x264):.2f} ms (median over every "
               f"cap), {'met' if stats.median(x264) <= 6 else 'not met'}"
               if x264 else "not measured")
            + "; every Legba configuration within 1.10 × the cap: "
            + ("met" if not legba_over else
               f"not met in {len(legba_over)} cells (listed above)"))
    fps = []
    for config in ("legba:x264enc", "legba:openh264enc", "legba:vp8enc"):
        cell = out.get(("720p", 1000000, config))
        if cell and cell["fps"]:
            f = stats.median(cell["fps"])
            fps.append(f"{config} {f:.2f} ({'met' if f >= 0.9 else 'not met'})")
    text += ("; frames out / in ≥ 0.90 at 720p and 1 Mbit/s: "
             + (", ".join(fps) if fps else "not measured") + ".")
    return os.path.basename(found[-1]), over, text


def memory_baseline(suite, series):
    """What the data suite's memory rows compare Legba with: runs that
    measured webrtcbin-1dc beside it had webrtcbin with Legba's session."""
    if suite != "data" or "heap_kib_per_pair" not in series:
        return ""
    if "webrtcbin-1dc" in series["heap_kib_per_pair"]:
        return (" The memory rows compare like for like: webrtcbin there "
                "carries the session a pair of Legba's rooms negotiates "
                "(its data channel, the receive-only transceivers); "
                "webrtcbin-1dc is the pair of the other rows, with no "
                "transceiver.")
    return (" The memory rows of this run compare Legba with the one-channel "
            "webrtcbin pair of the other rows, which lacks the second "
            "channel and the receive-only transceivers of Legba's session: "
            "not like for like.")


# Legba's targets (issue of the suites): (suite, metric, target text,
# check(legba median, series) -> True / False / None when not decidable)
def _vs(series, metric, peer, factor, who="legba"):
    """Whether who's series is within factor x the peer's: decided, as any
    comparison (docs/benchmarks.md, "Comparisons and verdicts"), by the
    bootstrap interval of the difference of medians, here to factor x the
    peer's series: met when it is below 0, not met when above, and
    "inconclusive" when it spans 0, whatever the point estimate says.
    Series of fewer runs than an interval needs (counts of instructions,
    one deterministic run each) are decided by their medians."""
    per = series.get(metric, {})
    if who not in per or peer not in per:
        return None
    row = stats.compare(per[who], [factor * v for v in per[peer]])
    if row.get("few_runs"):
        return stats.median(per[who]) <= factor * stats.median(per[peer])
    if row["verdict"].startswith("lower"):
        return True
    if row["verdict"].startswith("higher"):
        return False
    return "inconclusive"


def _ratio(suite, metric, text, peer, factor, who="legba"):
    """A target row: the median of Legba's series who within factor x the
    peer's."""
    return (suite, metric, text,
            lambda m, s: _vs(s, metric, peer, factor, who), who)


def _not_higher(suite, metric, text, peer, who="legba"):
    """A target row: who's series not established higher than the peer's
    (the bootstrap interval of the difference of medians reaches 0 or
    below)."""
    def check(m, s):
        per = s.get(metric, {})
        if who not in per or peer not in per:
            return None
        return not stats.compare(per[who], per[peer])["verdict"].startswith(
            "higher")
    return (suite, metric, text, check, who)


TARGETS = [
    *[_ratio("data", f"{kind}_{way}_{size}",
             f"{word} {size}, {how}: ≤ 1.05 × json-glib", "json-glib", 1.05)
      for way, word in (("send", "send"), ("recv", "receive"))
      for size in ("short", "4k")
      for kind, how in (("cpu_ns", "timed"), ("ir", "instructions"))],
    *[_ratio("data", f"{kind}_recv_short",
             f"receive short, {how}, handled on the thread it arrives on "
             "(legba-sync): ≤ 1.05 × json-glib", "json-glib", 1.05,
             "legba-sync")
      for kind, how in (("cpu_ns", "timed"), ("ir", "instructions"))],
    *[_not_higher("data", f"rtt_{p}_ms",
                  f"round trip 1 KiB at 100/s, {p}{how}: not established "
                  "higher than plain webrtcbin", "webrtcbin", who)
      for who, how in (("legba", ""),
                       ("legba-sync", ", taken and echoed on the thread "
                        "it arrives on (legba-sync)"))
      for p in ("p50", "p95", "p99")],
    _ratio("data", "heap_kib_per_pair_after_first",
           "heap per pair ≤ 1.02 × plain webrtcbin", "webrtcbin", 1.02),
    ("setup", "warm_ms", "warm setup ≤ 15 ms",
     lambda m, s: m <= 15),
    ("setup", "cold_ms", "first call in a fresh process ≤ 60 ms",
     lambda m, s: m <= 60),
    ("scale", "pairs_connected", "≥ 1,500 pairs in one process, the rooms "
     "signalling through a legba-server", lambda m, s: True if m >= 1500
     else None),
    ("scale", "pairs_connected", "≥ 1,500 pairs in one process, the rooms "
     "meeting through an in-process signaller (legba-inproc)",
     lambda m, s: True if m >= 1500 else None, "legba-inproc"),
    _ratio("scale", "rss_kib_per_pair", "RSS per pair ≤ 1.1 × plain webrtcbin",
           "webrtcbin", 1.1),
    _ratio("scale", "threads_per_pair",
           "threads per pair ≤ 1.1 × plain webrtcbin", "webrtcbin", 1.1),
    _ratio("scale", "fds_per_pair", "fds per pair ≤ 1.1 × plain webrtcbin",
           "webrtcbin", 1.1),
    _ratio("scale", "fds_per_pair", "fds per pair ≤ 1.1 × plain webrtcbin, "
           "the rooms meeting through an in-process signaller "
           "(legba-inproc)", "webrtcbin", 1.1, "legba-inproc"),
    _ratio("video-call", "latency_p50_ms",
           "glass-to-glass p50 ≤ 1.2 × plain webrtcbin through a room",
           "webrtcbin", 1.2),
    ("video-call", "synced_p50_ms", "glass-to-glass p50 ≤ 25 ms to a "
     "clock-synced sink (the room's latency at 20 ms)", lambda m, s: m <= 25),
]


def targets_lines(results_dir):
    lines = ["## Legba against its targets", "",
             "| Suite | Target | Legba (median) | Met |", "|---|---|---:|---|"]
    for suite, metric, text, check, *who in TARGETS:
        who = who[0] if who else "legba"
        path = newest(results_dir, suite)
        series = {}
        if path:
            with open(path) as f:
                series = json.load(f)["series"]
        values = series.get(metric, {}).get(who, [])
        if not values:
            lines.append(f"| {suite} | {text} | – | not measured |")
            continue
        m = stats.median(values)
        verdict = check(m, series)
        word = {True: "met", False: "not met",
                None: "not decided by this run",
                "inconclusive": "not decided: the interval of the "
                "difference spans the target"}[verdict]
        if metric.startswith("latency_p") and \
                "legba" in unreliable_peers(series):
            word = ("not decided: " + unreliable_peers(series)["legba"])
        if suite == "scale" and metric == "pairs_connected" and m < 1500:
            word = "not reached (7. Scale says where and why it stopped)"
        lines.append(f"| {suite} | {text} | {fmt(m)} | {word} |")
    return lines + [""]


# Suites that load the machine themselves (the mesh: four participants,
# each encoding and decoding; audio: up to 50 Opus encoders at once;
# scale: a thousand connected pairs, whose timers keep thousands of
# threads waking): their load during the run is their own, so they are
# judged by the load when they started.
SELF_LOADING = ("mesh", "mesh-loss", "audio", "scale")


def provisional_load(res):
    """The load average that makes the run provisional (above 2 on the 2
    cores: at start, or at start or end for a suite that does not load
    the machine itself), else None."""
    if res.get("suite") in SELF_LOADING:
        load = res["load_start"][0]
    else:
        load = max(res["load_start"][0], res["load_end"][0])
    return load if load > 2 else None


def conditions_lines(res):
    c = res["conditions"]
    pk = ", ".join(f"{k} {v}" for k, v in c["packages"].items() if v)
    load = provisional_load(res)
    when = ("at its start (the suite loads the machine itself)"
            if res.get("suite") in SELF_LOADING else "during the run")
    provisional = [
        f"- **Provisional**: load average {load:g} on "
        f"{c['cpu_count']} cores {when}, above 2"] if load else []
    return provisional + [
        f"- Command: `{res['command']}`; {res['date'][:19]}Z; "
        f"{res['seconds']:.0f} s",
        f"- Machine: {c['cpu_model']} × {c['cpu_count']}, kernel "
        f"{c['kernel']}; Legba {c['legba']} (release build)",
        f"- Load average at start {res['load_start']}, at end "
        f"{res['load_end']}; busiest processes at start: "
        f"{'; '.join(res['busy_start'][:5])}",
        f"- Versions: {pk}",
    ]


def provisional_banner(results_dir):
    busy = []
    for suite, title, _ in SUITES:
        path = newest(results_dir, suite)
        if path:
            with open(path) as f:
                if provisional_load(json.load(f)):
                    busy.append(title)
    if not busy:
        return ("Every section below was taken on a quiet machine: load "
                "average at most 2 on the 2 cores, given with every suite "
                "(for the mesh, audio and scale suites, which load the "
                "machine themselves, at their start).")
    return ("**Provisional:** " + "; ".join(busy) + ". These were taken "
            "while other work ran beside them (their load averages are "
            "given with them). Alternating order spreads that load over "
            "all peers alike, but absolute figures are higher and noisier "
            "than on an idle machine; take ratios, not absolute values, and "
            "re-run on a quiet machine before quoting them.")


def _f(v, fmt="{:,.0f}"):
    return "–" if v is None else fmt.format(v)


def _median(values):
    values = [v for v in values if v is not None]
    return stats.median(values) if values else None


def netlab_step_chart(runs, path):
    """The capacity step over time, every sender on one chart: what the
    receiver took in (with the capacity) and the bottleneck's queue."""
    datas, rate_plots, queue_plots = [], [], []
    for i, r in enumerate(runs):
        who = r.get("sender", "legba") + (
            f" {r['bitrate_kbps']}" if r.get("bitrate_kbps") else "")
        data = f"{path}.{i}.dat"
        with open(data, "w") as f:
            for x in r["series"]:
                f.write(f"{x['t'] - r['warmup_s']:.2f} {x['received_kbps']:.1f}"
                        f" {x['queue_ms']:.1f} {x['rate_kbps'] or 0}\n")
        datas.append(data)
        rate_plots.append(f"'{data}' using 1:2 with lines lw 2 "
                          f"title '{who}'")
        queue_plots.append(f"'{data}' using 1:3 with lines lw 2 "
                           f"title '{who}'")
    if not datas:
        return False
    rate_plots.append(f"'{datas[0]}' using 1:4 with steps dt 2 lc 'black' "
                      "title 'capacity'")
    ok = gnuplot(f"""set terminal pngcairo size 900,700 font ',9'
set output '{path}'
set multiplot layout 2,1 title 'Capacity step: 2 Mbit/s, 500 kbit/s, 2 Mbit/s'
set grid
set key outside right
set xlabel 's from the window start'
set ylabel 'received kbit/s'
set xrange [0:*]
plot {", ".join(rate_plots)}
set ylabel 'bottleneck queue, ms'
plot {", ".join(queue_plots)}
unset multiplot
""")
    for d in datas:
        os.unlink(d)
    return ok


def netlab_lines(results_dir, rel, charts):
    """The network lab's section (bench/netlab/netlab.py): one row per
    scenario and sender bitrate, and the capacity step phase by phase."""
    path = newest(results_dir, "netlab")
    lines = ["## 10. Network lab: Legba calls on impaired links", ""]
    if path is None:
        return lines + ["Not measured: no results file yet "
                        "(`bench/run.sh netlab`, as root).", ""]
    with open(path) as f:
        res = json.load(f)
    receiver = {"chromium": "the room page in headless Chromium",
                "legba": "a Legba receiver (`legbaroom ! avdec_h264`)"}.get(
                    res.get("receiver"), res.get("receiver"))
    lines += [f"Raw series, every second of every run: "
              f"[`{os.path.basename(path)}`]({rel(path)}). Senders in "
              "turn on the same link: Legba (`legba-call --video CLIP "
              "--bitrate N`) and the room page in headless Chromium (its "
              f"fake camera playing the same picture); the receiver: "
              f"{receiver}. One run each, medians over the window of the "
              "per-second samples; freeze time by Chromium's definition; "
              "RTX: RTP packets of a payload type other than the media's, "
              "counted on the wire by the delay line; first frame: from "
              "the sender's start, and from its join where the run has it "
              "(docs/benchmarks.md, \"Network lab\")."]
    lines += [f"Left out: {n}." for n in res.get("notes", [])]
    lines += ["", "| scenario | sender | window | first frame | received "
              "kbit/s | fps | freezes (time) | queue p50 / p95 ms | "
              "bottleneck drops | RTX pkt/s | NACKs / PLIs sent by the "
              "receiver |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["scenarios"]:
        who = r.get("sender", "legba")
        if r.get("bitrate_kbps"):
            who += f" --bitrate {r['bitrate_kbps']}"
        if "error" in r:
            lines.append(f"| {r['scenario']} | {who} | failed: "
                         f"{r['error']} | | | | | | | | |")
            continue
        first = ("no frame" if r["first_frame_s"] is None
                 else f"{r['first_frame_s']:.1f} s")
        if r.get("first_frame_after_join_s") is not None:
            first += f" ({r['first_frame_after_join_s']:.1f} s after join)"
        if r.get("sender_failed"):
            first += f" (the sender exited {r['sender_failed']['exit']})"
        lines.append(
            f"| {r['scenario']} | {who} | {r['window_s']:.0f} s"
            f" | {first} | {_f(r['received_kbps_median'])} | "
            f"{_f(r['fps_median'])} | {r['freeze_count']} "
            f"({r['freeze_s']:.1f} s) | {_f(r['queue_ms_p50'])} / "
            f"{_f(r['queue_ms_p95'])} | {_f(r['qdisc_drops'])} | "
            f"{_f(r['rtx_pps_median'])} | "
            f"{_f(r.get('nacks_sent'))} / {_f(r.get('plis_sent'))} |")
    lines.append("")
    shares = [r for r in res["scenarios"]
              if "error" not in r and r.get("tcp_kbps_median") is not None]
    if shares:
        lines += ["The competing TCP flow, medians of the window's seconds: "
                  + "; ".join(
                      f"{r.get('sender', 'legba')}"
                      + (f" --bitrate {r['bitrate_kbps']}"
                         if r.get("bitrate_kbps") else "")
                      + f": the call {_f(r['call_kbps_median'])} kbit/s, "
                      f"TCP {_f(r['tcp_kbps_median'])} kbit/s"
                      for r in shares) + ".", ""]
    steps = [r for r in res["scenarios"]
             if "error" not in r and r.get("steps")]
    chart = os.path.join(charts, "netlab-step.png")
    if netlab_step_chart(steps, chart):
        lines += [f"![The capacity step over time]({rel(chart)})", ""]
    for r in steps:
        w, start = r["window_s"], r["warmup_s"]
        edges = [0] + [f for f, _ in r["steps"]] + [1]
        rates = [r["series"][0]["rate_kbps"] if r["series"] else None] + \
            [k for _, k in r["steps"]]
        who = r.get("sender", "legba")
        if r.get("bitrate_kbps"):
            who += f" --bitrate {r['bitrate_kbps']}"
        lines += [f"The capacity step, {who}, phase by phase (medians of "
                  "its seconds):", "",
                  "| phase | capacity kbit/s | sent kbit/s | received "
                  "kbit/s | fps | queue p95 ms |", "|---|---|---|---|---|---|"]
        for i in range(len(edges) - 1):
            a, b = start + edges[i] * w, start + edges[i + 1] * w
            sec = [s for s in r["series"] if a < s["t"] <= b + 0.5]
            q = sorted(s["queue_ms"] for s in sec)
            lines.append(
                f"| {a - start:.0f}–{b - start:.0f} s | {rates[i]} | "
                f"{_f(_median([s['sent_kbps'] for s in sec]))} | "
                f"{_f(_median([s['received_kbps'] for s in sec]))} | "
                f"{_f(_median([s['frames'] for s in sec]))} | "
                f"{_f(q[int(0.95 * (len(q) - 1))] if q else None)} |")
        lines.append("")
    lines += ["Not measured: glass-to-glass latency across the lab; a "
              "Legba sender's NACK and PLI counts where the receiver is "
              "Legba (they travel inside SRTCP; the JSON has the room "
              "page's own counts where it takes part).", "",
              f"Conditions: load average {res.get('load_start')} at the "
              f"start, {res.get('load_end')} at the end; kernel "
              f"{res.get('kernel')}; Legba {res.get('legba')}.", ""]
    return lines


def _sender_delta(r, key):
    """How much a counter of a Chromium sender's getStats grew over the
    window (its last sample at or before each edge)."""
    start, end = r["warmup_s"], r["warmup_s"] + r["window_s"]

    def at(t):
        v = 0
        for c in r.get("sender_stats", []):
            if c["t"] > t:
                break
            v = c.get(key, v)
        return v
    return at(end) - at(start) if r.get("sender_stats") else None


def netlab_receiver_lines(results_dir, rel):
    """Chromium sending to a Legba receiver (netlab.py --senders chromium
    --receiver legba, written as netlab-receiver-STAMP.json): what the
    receiver sends back, seen from the sender's getStats, one row per
    scenario and run, every such file in the order of their stamps
    (before and after a change to the receiver are told apart by the
    Legba version each file names)."""
    paths = sorted(glob.glob(os.path.join(results_dir,
                                          "netlab-receiver-[0-9]*.json")))
    if not paths:
        return []
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append((path, json.load(f)))
    lines = ["### Chromium -> Legba", "",
             "The room page in headless Chromium sending (its fake camera "
             "playing the lab's clip) to a Legba receiver (`legbaroom ! "
             "avdec_h264`), on the same links: what Legba sends back "
             "(transport-wide feedback, NACKs, PLIs) is what Chromium's "
             "congestion controller and encoder act on. Chromium's figures "
             "from its getStats a second at a time: **sent** is what left "
             "its interface (medians of the window's seconds), **target** "
             "its encoder's `targetBitrate`, **available** the candidate "
             "pair's `availableOutgoingBitrate` (its estimate of the link), "
             "**NACKs / PLIs / FIRs** what it received from Legba over the "
             "window, **key frames** what it encoded then; fps and freezes "
             "are Legba's decoded frames (Chromium's freeze definition); "
             "**jitter buffer** the highest latency Legba's jitter buffers "
             "grew to (`max-latency`, docs/rooms.md \"The jitter buffer on "
             "real networks\"; – where the run did not record it). "
             "Runs, each a file with its Legba version and command: "
             + "; ".join(f"[`{os.path.basename(p)}`]({rel(p)}) (Legba "
                         f"{r.get('legba')}, `{r.get('command')}`, load "
                         f"{r.get('load_start')})" for p, r in runs) + ".",
             "", "| scenario | Legba | run | sent kbit/s | target kbit/s | "
             "available kbit/s | NACKs / PLIs / FIRs | key frames | fps | "
             "freezes (time) | queue p95 ms | jitter buffer ms | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = []
    for _, res in runs:
        for r in res["scenarios"]:
            if r["scenario"] not in order:
                order.append(r["scenario"])
    for scenario in order:
        for i, (_, res) in enumerate(runs):
            for r in res["scenarios"]:
                if r["scenario"] != scenario:
                    continue
                legba = res.get("legba")
                if res.get("receiver_latency_ms", 100) != 100:
                    legba += f", latency {res['receiver_latency_ms']} ms"
                if res.get("receiver_max_latency_ms") is not None:
                    legba += f", max-latency {res['receiver_max_latency_ms']}"
                    legba += " ms" if res["receiver_max_latency_ms"] > \
                        res.get("receiver_latency_ms", 100) else " (fixed)"
                who = f"| {scenario} | {legba} | {i + 1} |"
                if "error" in r:
                    lines.append(f"{who} failed: {r['error']} | | | | | | "
                                 "| | | |")
                    continue
                lines.append(
                    f"{who} {_f(r['sent_kbps_median'])} | "
                    f"{_f(r.get('target_kbps_median'))} | "
                    f"{_f(r.get('available_kbps_median'))} | "
                    f"{_f(_sender_delta(r, 'nackCount'))} / "
                    f"{_f(_sender_delta(r, 'pliCount'))} / "
                    f"{_f(_sender_delta(r, 'firCount'))} | "
                    f"{_f(_sender_delta(r, 'keyFramesEncoded'))} | "
                    f"{_f(r['fps_median'])} | "
                    f"{r['freeze_count']} ({r['freeze_s']:.1f} s) | "
                    f"{_f(r['queue_ms_p95'])} | "
                    f"{_f(r.get('jitter_latency_ms_max'))} | "
                    f"{r['load'][0]:.2f} |")
    return lines + [""]


def netlab_tcp_lines(results_dir, rel):
    """Repeated runs of one scenario beside a TCP flow (netlab.py
    --scenarios 1mbit-tcp --senders legba:2000,chromium, written as
    netlab-tcp-STAMP.json): one row per run and sender, every such file in
    the order of their stamps, and the medians of the rows read (a
    1-minute load under 10 at the row's end) by Legba version and
    sender (Chromium's sender over every file)."""
    paths = sorted(glob.glob(os.path.join(results_dir,
                                          "netlab-tcp-[0-9]*.json")))
    if not paths:
        return []
    rows = []
    for path in paths:
        with open(path) as f:
            res = json.load(f)
        for r in res["scenarios"]:
            rows.append((path, res, r))
    lines = ["### Beside a TCP flow, run after run", "",
             "The 1 Mbit/s link with a 200 ms queue and one bulk TCP flow "
             "(the lab's Linux runs BBR) beside the call, Legba "
             "(`legba-call --bitrate 2000`) and the room page in headless "
             "Chromium sending in turn, the order alternating from run to "
             "run: **the call** is what the receiver's interface took in "
             "less the TCP flow's payload, **TCP** the flow's payload "
             "(medians of the window's seconds); **load** the 1-minute "
             "load average at the row's end: a row over 10 is not read. "
             "Each file names its Legba version and command.", "",
             "| file | Legba | sender | load | the call kbit/s | TCP "
             "kbit/s | fps | freezes (time) |", "|---|---|---|---|---|---|"
             "---|---|"]
    read = {}
    for path, res, r in rows:
        who = r.get("sender", "legba")
        if "error" in r:
            lines.append(f"| [`{os.path.basename(path)}`]({rel(path)}) | "
                         f"{res.get('legba')} | {who} | | failed: "
                         f"{r['error']} | | | |")
            continue
        load = r.get("load", [None])[0]
        lines.append(
            f"| [`{os.path.basename(path)}`]({rel(path)}) | "
            f"{res.get('legba')} | {who} | {_f(load, '{:.1f}')} | "
            f"{_f(r.get('call_kbps_median'))} | "
            f"{_f(r.get('tcp_kbps_median'))} | {_f(r['fps_median'])} | "
            f"{r['freeze_count']} ({r['freeze_s']:.1f} s) |")
        if load is not None and load <= 10 and \
                r.get("call_kbps_median") is not None:
            # Chromium's sender is the same whatever Legba the file ran
            key = (res.get("legba") if who != "chromium" else "", who)
            read.setdefault(key, []).append(
                (r["call_kbps_median"], r["tcp_kbps_median"]))
    lines.append("")
    if read:
        lines += ["The rows read, by Legba version and sender: "
                  + "; ".join(
                      (f"{who} with Legba {legba}" if legba else
                       f"{who} (every file)") + ": the call "
                      f"{_f(_median([c for c, _ in v]))} kbit/s (median "
                      f"of {len(v)}, {_f(min(c for c, _ in v))}–"
                      f"{_f(max(c for c, _ in v))}), TCP "
                      f"{_f(_median([t for _, t in v]))}"
                      for (legba, who), v in sorted(read.items()))
                  + ".", ""]
    return lines


def netlab_fec_lines(results_dir, rel):
    """Video FEC against none (netlab.py --senders legba:N,legba-fecP:N,
    chromium on lossy links, written as netlab-fec-STAMP.json; docs/
    congestion-control.md, "Loss"): every such file, one row per
    scenario and sender."""
    paths = sorted(glob.glob(os.path.join(results_dir,
                                          "netlab-fec-[0-9]*.json")))
    if not paths:
        return []
    lines = ["### Video FEC (RED and ULPFEC) on lossy links", "",
             "Legba without FEC (`legba`), with RED and ULPFEC at P% "
             "(`legba-fecP`, `legba-call --video-fec P`) and the room page "
             "in headless Chromium sending in turn to the room page in "
             "headless Chromium, which asks for RED and ULPFEC where the "
             "sender offers them. **sent** and **received**: the "
             "interfaces on either side of the bottleneck; **video pkt/s**: "
             "the video's RTP packets on the wire (in RED with FEC: media "
             "and FEC packets); **RTX**: retransmissions on the wire; "
             "**est**: Legba's estimate; medians of the window's seconds, "
             "freezes by Chromium's definition, NACKs and PLIs the "
             "receiver sent over the window.", ""]
    for path in paths:
        with open(path) as f:
            res = json.load(f)
        lines += [f"[`{os.path.basename(path)}`]({rel(path)}): Legba "
                  f"{res.get('legba')}, `{res.get('command')}`, load "
                  f"average {res.get('load_start')} at the start, "
                  f"{res.get('load_end')} at the end.", "",
                  "| scenario | sender | sent kbit/s | received kbit/s | "
                  "video pkt/s | RTX pkt/s | est kbit/s | fps | freezes "
                  "(time) | NACKs / PLIs | load |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in res["scenarios"]:
            who = f"| {r['scenario']} | {r.get('sender')} |"
            if "error" in r:
                lines.append(f"{who} failed: {r['error']} | | | | | | | "
                             "| |")
                continue
            start, end = r["warmup_s"], r["warmup_s"] + r["window_s"]
            win = [x for x in r["series"] if start < x["t"] <= end + 0.5]
            lines.append(
                f"{who} {_f(r['sent_kbps_median'])} | "
                f"{_f(r['received_kbps_median'])} | "
                f"{_f(_median([x.get('rtp_pps') for x in win]))} | "
                f"{_f(r['rtx_pps_median'])} | "
                f"{_f(r.get('est_kbps_median'))} | "
                f"{_f(r['fps_median'])} | {r['freeze_count']} "
                f"({r['freeze_s']:.1f} s) | {_f(r.get('nacks_sent'))} / "
                f"{_f(r.get('plis_sent'))} | {r['load'][0]:.2f} |")
        lines.append("")
    return lines


def netlab_mesh3_lines(results_dir, rel):
    """A 3-party call with one receiver behind a slow link (bench/netlab/
    mesh3.py, netlab-mesh3-STAMP.json): the newest run."""
    path = newest(results_dir, "netlab-mesh3")
    if path is None:
        return []
    with open(path) as f:
        res = json.load(f)
    lines = ["### Three participants, one behind a slow link", "",
             f"[`{os.path.basename(path)}`]({rel(path)}): a Legba sender "
             "(`legba-call --bitrate 2000`) and two Legba receivers, "
             f"**slow** behind a {res['rate_kbit']} kbit/s bottleneck, "
             "**fast** on a path that crosses none; one encoder for both "
             "(docs/congestion-control.md, \"In a mesh: the weakest "
             "peer\"). Medians of each receiver's seconds over the "
             f"{res['window_s']} s window, and of the sender's estimate and "
             "video target for it. Legba "
             f"{res.get('legba', 'not recorded')}, `{res.get('command')}`, "
             f"load average {res.get('load_start', '–')} at the start, "
             f"{res.get('load_end')} at the end.", "",
             "| congestion control | receiver | received kbit/s | fps | "
             "sender's estimate kbit/s | its video target kbit/s | load |",
             "|---|---|---|---|---|---|---|"]
    for run in res["runs"]:
        for who in ("slow", "fast"):
            r = run[who]
            load = run.get("load")
            lines.append(
                f"| {'on' if run['congestion_control'] else 'off'} | {who} "
                f"| {_f(r['kbps_median'])} | {_f(r['fps_median'])} | "
                f"{_f(r.get('sender_estimate_kbps_median'))} | "
                f"{_f(r.get('sender_video_target_kbps_median'))} | "
                f"{'–' if load is None else f'{load[0]:.2f}'} |")
    return lines + [""]


def _spread(values, fmt="{:,.0f}"):
    """The median of the repeats, and each repeat's value."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    each = ", ".join(fmt.format(v) for v in values)
    return f"{fmt.format(stats.median(values))} ({each})"


def _sfu_rooms(res, topology, n, viewers=False):
    return [r for r in res["rooms"] if r["topology"] == topology
            and r["participants"] == n
            and r["label"].startswith("viewers") == viewers]


def _pooled(rooms, key):
    values = [v for r in rooms for v in r.get(key, [])]
    return _f(_median(values), "{:,.1f}") + (
        f" ({len(values)})" if values else "")


def sfu_auto_lines(results_dir, rel):
    """The move of an auto room from mesh to SFU (bench/sfu/auto-switch.py):
    each run file, the room as built (sfu-auto-STAMP.json) and the room
    before legba-room-switch.c (sfu-auto-before-STAMP.json)."""
    files = sorted(glob.glob(os.path.join(results_dir,
                                          "sfu-auto-before-[0-9]*.json")))
    files += sorted(glob.glob(os.path.join(results_dir,
                                           "sfu-auto-[0-9]*.json")))
    if not files:
        return []
    lines = ["### 11b. `auto` rooms: the media gap when a room moves from "
             "mesh to SFU", "",
             "test-room-sfu-auto's `/room/sfu-auto/switch`, run by "
             "`bench/sfu/auto-switch.py` (release build): a legba-server "
             "with `sfu-topology` `auto:2` and a Janus of the test's own; "
             "alice and bob, in a mesh, send each other 160x120 15 fps "
             "H.264 (x264enc, key frames on request only: one frame every "
             "66.7 ms) and Opus, and a reliable message every 20 ms; carol "
             "joins and the server moves the room to Janus. Gap: the "
             "longest time between two decoded video frames of the other, "
             "from just before carol joins until the three receive each "
             "other through Janus. Missed: reliable messages of the other "
             "that never arrived. \"before\": lib/legba/room as it was "
             "before legba-room-switch.c (mesh connections closed at the "
             "event, messages let go as soon as the publisher connects), "
             "with the same server and test.", "",
             "| file | room | 1-min load | gap alice<-bob ms, each run | "
             "gap bob<-alice ms, each run | median / max ms | missed, "
             "each run |", "|---|---|---|---|---|---|---|"]
    for path in files:
        with open(path) as f:
            res = json.load(f)
        runs = [r for r in res["runs"] if r.get("gaps_ms")]
        if not runs:
            continue
        ab = [r["gaps_ms"]["alice<-bob"] for r in runs]
        ba = [r["gaps_ms"]["bob<-alice"] for r in runs]
        both = sorted(ab + ba)
        missed = []
        for r in res["runs"]:
            said = [x for x in r.get("test_says", []) if "missed" in x]
            if said:
                words = said[0].split()
                missed.append(f"{words[words.index('bob') + 2].rstrip(';')}"
                              f"+{words[words.index('alice', 3) + 2]}"
                              .rstrip(';'))
            else:
                missed.append("0" if r.get("passed") else "?")
        loads = [r["load_start"][0] for r in res["runs"]]
        name = os.path.basename(path)
        lines.append(
            f"| [`{name}`]({rel(path)}) | "
            f"{'before' if 'before' in name else 'as built'}, Legba "
            f"{res['conditions']['legba']} | {min(loads):g} to "
            f"{max(loads):g} | {', '.join(fmt(x) for x in ab)} | "
            f"{', '.join(fmt(x) for x in ba)} | "
            f"{fmt(statistics.median(both))} / {fmt(max(both))} | "
            f"{', '.join(missed)} |")
    lines += ["", "Conditions: machine as above (shared with other work; "
              "the load is the 1-minute load average at each run's start); "
              "command `bench/sfu/auto-switch.py --runs N [--json FILE]`; "
              "the \"before\" file: `git checkout ec4b403 -- lib/legba/room` "
              "(the room before the switch module, on the server of this "
              "branch), the release build rebuilt, then restored.", ""]
    return lines


def _in_window(rooms):
    """Viewers that received video and audio in each room's window."""
    return ", ".join(f"{r['receiving_in_window']}/{r['receivers']}"
                     if "receiving_in_window" in r else "–" for r in rooms)


def _window_rates(rooms):
    """Each room's median and lowest video buffers/s over its viewers."""
    out = []
    for r in rooms:
        rates = sorted(r.get("window_video_buffers_per_s", []))
        if rates:
            out.append(f"{rates[len(rates) // 2]:.1f} ({rates[0]:.1f})")
    return ", ".join(out) or "–"


def _load_range(rooms):
    """The 1-minute load at the windows' starts and ends."""
    loads = [w[0] for r in rooms for w in r.get("load_window", [])]
    return f"{min(loads):g} to {max(loads):g}" if loads else "–"


def _sfu_viewer_lines(res, name, link):
    """One publisher to many viewers: from res, a results file of its own
    (name, link) or the rooms' file (None)."""
    st = res["settings"]
    opts = st.get("viewer_opts")
    if st.get("viewer_host") == "shared":
        how = ("all viewers in one process, `legba-peer viewers`, each a "
               "LegbaRoom of its own with its own signalling connection "
               "and Janus subscription: they count what arrives, decode "
               "nothing and publish nothing")
    else:
        how = (f"`legba-call {opts}`, one process each"
               + (": they count what arrives, decode nothing and publish "
                  "nothing" if "undecoded" in opts else "")
               if opts else "the viewers decode: legba-call had no "
               "receive-only mode without decoding")
    lines = ["", "One publisher to many viewers through one Janus ("
             f"{how}):", ""]
    if name is not None:
        lines += [f"Raw figures: [`{name}`]({link}); Janus with "
                  f"{st.get('janus_rtp_ports', 100)} RTP ports, each viewer "
                  f"room {st['repeats']} times, settling "
                  f"{st['settle_s']:g} s + "
                  f"{st.get('settle_per_participant_s', 0):g} s per "
                  f"participant, a {st['window_s']:g} s window.", ""]
    each = any("receiver_cpu_pct_median" in r for r in res["rooms"])
    host = any("viewer_host_cpu_pct" in r for r in res["rooms"])
    lines += ["| viewers | receiving before the window | Janus CPU % | "
              "Janus CPU % per forwarded stream | publisher CPU % | "
              "upload kbit/s | join p50 ms |"
              + (" a viewer's CPU % (median) | all viewers' CPU % |"
                 if each else "")
              + (" receiving in the window | video buffers/s a viewer, "
                 "median (lowest) | the viewers' process CPU % | per "
                 "viewer % | 1-min load in the window |" if host else ""),
              "|---|---|---|---|---|---|---|" + ("---|---|" if each else "")
              + ("---|---|---|---|---|" if host else "")]
    for v in st["viewers"]:
        rooms = _sfu_rooms(res, "sfu", v + 1, viewers=True)
        per = [r["janus_cpu_pct"] / v for r in rooms
               if r.get("janus_cpu_pct") is not None]
        got = ", ".join(f"{r['receiving_before_window']}/"
                        f"{r['receivers']}" if "error" not in r
                        else f"failed: {r['error']}" for r in rooms)
        lines.append(
            f"| {v} | {got} | "
            f"{_spread([r.get('janus_cpu_pct') for r in rooms])} | "
            f"{_spread(per, '{:.2f}')} | "
            f"{_spread([r.get('publisher_cpu_pct') for r in rooms])} | "
            f"{_spread([r.get('publisher_upload_kbps') for r in rooms])}"
            f" | {_pooled(rooms, 'first_video_ms')} |"
            + (f" {_spread([r.get('receiver_cpu_pct_median') for r in rooms], '{:.1f}')}"
               f" | {_spread([r.get('receivers_cpu_pct_total') for r in rooms])} |"
               if each else "")
            + (f" {_in_window(rooms)} | {_window_rates(rooms)} |"
               f" {_spread([r.get('viewer_host_cpu_pct') for r in rooms])}"
               f" | {_spread([r['viewer_host_cpu_pct'] / v for r in rooms if r.get('viewer_host_cpu_pct') is not None], '{:.2f}')}"
               f" | {_load_range(rooms)} |"
               if host else ""))
    if name is not None:
        lines += _sfu_failed_lines(res)
        c = res["conditions"]
        loads = [r["load_start"][0] for r in res["rooms"]] + \
            [r["load_end"][0] for r in res["rooms"] if "load_end" in r]
        lines += ["", f"- Command: `{res['command']}`; {res['stamp']}; "
                  f"Legba {c['legba']} (release build); load average at "
                  f"start {res['load_start']}, at end {res['load_end']}; "
                  f"1-minute load at the rooms' starts and ends: "
                  f"{min(loads):g} to {max(loads):g}"]
    return lines


def _sfu_failed_lines(res):
    failed = [r for r in res["rooms"] if "error" in r
              or r.get("receiver_failures")
              or r.get("receiving_before_window") != r.get("receivers")]
    if not failed:
        return []
    lines = ["", "Rooms where a receiver got nothing in time, or a "
             "process failed:"]
    for r in failed:
        why = r.get("error") or "; ".join(
            f"{x['identity']} exit {x['exit']}: "
            f"{(x.get('stderr_tail') or ['?'])[-1]}"
            for x in r.get("receiver_failures", [])[:3])
        warned = "; ".join(r["publisher"].get("warnings", [])[:2])
        lines.append(f"- {r['topology']} {r['participants']} "
                     f"{r['label']}: {r.get('receiving_before_window')}"
                     f"/{r.get('receivers')} receiving"
                     + (f"; {why}" if why else "")
                     + (f"; the publisher: {warned}" if warned else ""))
    return lines


def sfu_lines(results_dir, rel):
    """Mesh rooms against SFU rooms through Janus (bench/sfu/sfu-vs-mesh.py):
    one publisher's upload and CPU by room size, glass-to-glass, join time,
    and one publisher to many viewers."""
    path = newest(results_dir, "sfu")
    lines = ["## 11. SFU rooms through Janus against the mesh", ""]
    if path is None:
        return lines + ["Not measured: no results file yet "
                        "(`bench/sfu/sfu-vs-mesh.py`).", ""]
    with open(path) as f:
        res = json.load(f)
    st = res["settings"]
    sizes = st["sizes"]
    lines += [f"Raw figures, every room: [`{os.path.basename(path)}`]"
              f"({rel(path)}). One publisher ({st['publisher']}) and "
              f"receive-only `legba-call` participants ({st['receivers']}), "
              "all on this host over loopback, in a mesh room (plain "
              "legba-server) and in an SFU room (legba-server with "
              "`--topology sfu` coordinating a Janus "
              f"{res.get('janus') or ''} started by "
              f"tests/common/start-janus.sh, {st.get('janus_rtp_ports', 100)}"
              " RTP ports); the two take turns at each "
              f"size, {st['repeats']} rooms each. Publisher CPU: its "
              "process's user+sys (/proc) over the window, % of one core; "
              f"upload: {st['upload']}; both over a {st['window_s']:.0f} s "
              "window that starts once every participant has had "
              f"{st['settle_s']:.0f} s + "
              f"{st.get('settle_per_participant_s', 0):g} s per participant "
              "to join. Each cell: the median of the rooms, then each "
              "room's value.", "",
              "| participants | upload mesh kbit/s | upload SFU kbit/s | "
              "publisher CPU mesh % | publisher CPU SFU % | Janus CPU % | "
              "receiving the publisher before the window, mesh / SFU |",
              "|---|---|---|---|---|---|---|"]
    for n in sizes:
        mesh, sfu = _sfu_rooms(res, "mesh", n), _sfu_rooms(res, "sfu", n)

        def col(rooms, key):
            return _spread([r.get(key) for r in rooms])

        def got(rooms):
            return ", ".join(f"{r['receiving_before_window']}/"
                             f"{r['receivers']}" if "error" not in r
                             else f"failed: {r['error']}" for r in rooms)
        lines.append(
            f"| {n} | {col(mesh, 'publisher_upload_kbps')} | "
            f"{col(sfu, 'publisher_upload_kbps')} | "
            f"{col(mesh, 'publisher_cpu_pct')} | "
            f"{col(sfu, 'publisher_cpu_pct')} | "
            f"{col(sfu, 'janus_cpu_pct')} | {got(mesh)} / {got(sfu)} |")
    lines += ["", "Glass-to-glass (legbastamp / legbastampcheck, "
              "`--measure-latency`) and join time (a receiver's process "
              "start to its first decoded frame from the publisher, the "
              "publisher already sending; `first_video_ms` of legba-call "
              "--json, polled every 10 ms): medians over every receiver of "
              "the rooms of that size (how many in brackets), in ms.", "",
              "| participants | p50 mesh | p50 SFU | p95 mesh | p95 SFU | "
              "join mesh | join SFU |", "|---|---|---|---|---|---|---|"]
    for n in sizes:
        mesh, sfu = _sfu_rooms(res, "mesh", n), _sfu_rooms(res, "sfu", n)
        lines.append(
            f"| {n} | {_pooled(mesh, 'latency_p50_ms')} | "
            f"{_pooled(sfu, 'latency_p50_ms')} | "
            f"{_pooled(mesh, 'latency_p95_ms')} | "
            f"{_pooled(sfu, 'latency_p95_ms')} | "
            f"{_pooled(mesh, 'first_video_ms')} | "
            f"{_pooled(sfu, 'first_video_ms')} |")
    vpath = newest(results_dir, "sfu-viewers")
    if vpath is not None:
        with open(vpath) as f:
            vres = json.load(f)
        lines += _sfu_viewer_lines(vres, os.path.basename(vpath), rel(vpath))
    elif st.get("viewers"):
        lines += _sfu_viewer_lines(res, None, None)
    lines += _sfu_failed_lines(res)
    c = res["conditions"]
    loads = [r["load_start"][0] for r in res["rooms"]] + \
        [r["load_end"][0] for r in res["rooms"] if "load_end" in r]
    lines += ["", "Conditions:",
              f"- Command: `{res.get('command', 'bench/sfu/sfu-vs-mesh.py')}`"
              f"; {res['stamp']}",
              f"- Machine: {c['cpu_model']} × {c['cpu_count']}, kernel "
              f"{c['kernel']}; Legba {c['legba']} (release build); shared "
              "with other work",
              f"- Load average at start {res['load_start']}, at end "
              f"{res['load_end']}; 1-minute load at the rooms' starts and "
              f"ends: {min(loads):g} to {max(loads):g}; busiest processes at "
              f"start: {'; '.join(res['busy_start'][:5])}", ""]
    return lines


def sfu_rejoin_lines(results_dir, rel):
    """The media gap of an SFU room whose Janus dies or hangs mid-call
    (bench/sfu/rejoin-gap.py), a part of section 11."""
    path = newest(results_dir, "sfu-rejoin")
    lines = ["### A Janus that dies mid-call, or a participant's connection "
             "to it: the media gap", ""]
    if path is None:
        return lines + ["Not measured: no results file yet "
                        "(`bench/sfu/rejoin-gap.py`).", ""]
    with open(path) as f:
        res = json.load(f)
    runs = res["runs"]
    lines += [f"Raw figures: [`{os.path.basename(path)}`]({rel(path)}). "
              "test-room-sfu's `/room/sfu/janus-dies` and "
              "`/room/sfu/janus-hangs` from a release build, taking turns: "
              f"a legba-server coordinating two Janus "
              f"{res.get('janus') or ''} processes, two LegbaRoom "
              "participants (160x120 15 fps H.264, key frames on request, "
              "and Opus) in one SFU room; once they decode each other, the "
              "Janus holding the room is killed (SIGKILL: dies) or stopped "
              "(SIGSTOP: hangs). The gap: from then to the first video "
              "frame a participant decodes again from the other, through "
              "the room the server made again on the other Janus (the "
              "server's keepalive to each Janus every second, 5 s of "
              "deadline more for a hung one, the room made again, the "
              "participants joining it, a key frame). The case cut "
              "(`/room/sfu/connection-cut`, where present): one Janus, "
              "reached through a TCP relay in the test that cuts alice's "
              "connection; the gap runs from the cut to the first frame "
              "decoded again, alice's session opened again on the same "
              "Janus and the VideoRoom joined again, nothing moved.", "",
              "| case | runs passed | gaps | min ms | median ms | max ms |",
              "|---|---|---|---|---|---|"]
    for case in sorted({r.get("case", "dies") for r in runs}):
        mine = [r for r in runs if r.get("case", "dies") == case]
        ok = [r for r in mine if r["exit"] == 0]
        gaps = sorted(g for r in ok for g in r["gaps_ms"].values())
        lines.append(f"| {case} | {len(ok)}/{len(mine)} | {len(gaps)} | "
                     f"{_f(min(gaps) if gaps else None, '{:,.0f}')} | "
                     f"{_f(_median(gaps), '{:,.0f}')} | "
                     f"{_f(max(gaps) if gaps else None, '{:,.0f}')} |")
    lines.append("")
    for case in sorted({r.get("case", "dies") for r in runs}):
        gaps = sorted(g for r in runs if r.get("case", "dies") == case
                      and r["exit"] == 0 for g in r["gaps_ms"].values())
        lines += [f"Every gap of {case}, in ms: "
                  + ", ".join(f"{g:,}" for g in gaps), ""]
    c = res["conditions"]
    loads = [r["load_start"][0] for r in runs] + \
        [r["load_end"][0] for r in runs]
    lines += ["Conditions:",
              f"- Command: `{res['command']}`; {res['stamp']}",
              f"- Machine: {c['cpu_model']} × {c['cpu_count']}, kernel "
              f"{c['kernel']}; Legba {c['legba']} (release build); shared "
              "with other work",
              f"- Load average at start {res['load_start']}, at end "
              f"{res['load_end']}; 1-minute load at the runs' starts and "
              f"ends: {min(loads):g} to {max(loads):g}; busiest processes at "
              f"start: {'; '.join(res['busy_start'][:5])}", ""]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"))
    args = ap.parse_args()
    outdir = os.path.dirname(os.path.abspath(args.output))
    charts = os.path.join(args.results, "charts")
    os.makedirs(charts, exist_ok=True)

    def rel(p):
        return os.path.relpath(p, outdir)

    lines = [
        "# Benchmark results",
        "",
        "Generated by `bench/report.py` from the newest "
        "`bench/results/SUITE-*.json` of each suite; do not edit by hand. "
        "How to run and what the figures mean: "
        f"[docs/benchmarks.md]({rel(os.path.join(HERE, '..', 'docs', 'benchmarks.md'))}); "
        "the rules: [docs/benchmarks.md, \"The rules\"]"
        f"({rel(os.path.join(HERE, '..', 'docs', 'benchmarks.md'))}"
        "#the-rules).",
        "",
        provisional_banner(args.results),
        "",
        "Medians of the runs; ratios against a named baseline (aiortc, as "
        "the reference benchmarks use; plain webrtcbin for Legba's "
        "overhead); the interval is the 95% bootstrap interval of the "
        "difference of medians (10,000 resamples, seed "
        f"{stats.SEED}); a difference is *established* only when it "
        "excludes 0, otherwise *inconclusive* (always with fewer than "
        "three runs a side). States: measured (raw series "
        "in the JSON), estimated (none here), not measured (with the "
        "reason; never a number).",
        "",
        "Other suites, with their own reports: "
        f"[3. Video send, encoder sweep]({rel(os.path.join(HERE, 'encoders', 'RESULTS.md'))}) "
        "(`bench/encoders/run.sh`), "
        f"[8. Signalling server against soketi]({rel(os.path.join(HERE, 'server', 'RESULTS.md'))}) "
        "(`bench/server/run.sh`), and the two-instance fan-out "
        "(`bench/cluster/run.sh`, docs/scale-out.md).",
        "",
    ]
    lines += targets_lines(args.results)
    source, over, target_text = encoder_summary(args.results)
    if source:
        lines += ["## 3. Video send: where an encoder exceeds 1.10 x the cap",
                  "", f"From `{source}` (tables, CPU per frame and the "
                  "comparison with aiortc's encoders in "
                  f"[bench/encoders/RESULTS.md]({rel(os.path.join(HERE, 'encoders', 'RESULTS.md'))})). "
                  "Median of the runs; aiortc clamps its own targets, so "
                  "its rows at caps above its range read low.", ""]
        lines += [f"- {o}" for o in over] or ["- none"]
        lines += ["", target_text]
        lines.append("")
    for suite, title, baseline in SUITES:
        path = newest(args.results, suite)
        lines += [f"## {title}", ""]
        if path is None:
            lines += ["Not measured: no results file yet "
                      f"(`bench/run.sh {suite}`).", ""]
            continue
        with open(path) as f:
            res = json.load(f)
        series = res["series"]
        lines.append(f"Raw series and every run: [`{os.path.basename(path)}`]"
                     f"({rel(path)}).")
        lines.append("")
        chart = os.path.join(charts, f"{suite}-ratio.png")
        if baseline and ratio_chart(title, series, baseline, chart):
            lines += [f"![{title}: relative to {baseline}]({rel(chart)})", ""]
        lines += table(series, baseline,
                       second=suite in ("setup", "scale", "datachannel",
                                        "video-call", "data", "mesh",
                                        "mesh-loss"),
                       run_ids=res.get("run_ids"))
        lines.append("")
        for metric in ("rtt_all_ms", "latency_all_ms",
                       "first_frame_warm_ms"):
            if metric in series:
                chart = os.path.join(charts, f"{suite}-distribution.png")
                name = {"rtt_all_ms": "Round trip, every sample",
                        "latency_all_ms": "Glass-to-glass latency, every "
                        "frame",
                        "first_frame_warm_ms": "Connect to first decoded "
                        "frame, every warm call"}[metric]
                if distribution_chart(name, series[metric], chart):
                    lines += [f"![{name}]({rel(chart)})", ""]
        lines += ["How: " + " ".join(res["notes"]), ""]
        if suite in CAVEATS:
            lines += ["Reading it: " + CAVEATS[suite]
                      + memory_baseline(suite, series), ""]
        failed = [r for r in res["runs"] if "error" in r]
        if failed:
            lines.append(f"Failed runs ({len(failed)} of {len(res['runs'])}"
                         ", left out of the figures):")
            for r in failed[:10]:
                lines.append(f"- {r['peer']} {r['label']}: {r['error']}")
            lines.append("")
        if NOT_MEASURED.get(suite):
            lines.append("Not measured:")
            lines += [f"- {n}" for n in NOT_MEASURED[suite]]
            lines.append("")
        lines += ["Conditions:"] + conditions_lines(res) + [""]
    lines += netlab_lines(args.results, rel, charts)
    lines += netlab_tcp_lines(args.results, rel)
    lines += netlab_receiver_lines(args.results, rel)
    lines += netlab_mesh3_lines(args.results, rel)
    lines += netlab_fec_lines(args.results, rel)
    lines += sfu_lines(args.results, rel)
    lines += sfu_rejoin_lines(args.results, rel)
    lines += sfu_auto_lines(args.results, rel)
    chart = os.path.join(charts, "fanout.png")
    source = fanout_chart(args.results, chart)
    if source:
        lines += ["## 8. Signalling server: fan-out curve", "",
                  f"The curve from `{source}`; the tables of the last full "
                  "run of bench/server/run.sh in "
                  f"[bench/server/RESULTS.md]({rel(os.path.join(HERE, 'server', 'RESULTS.md'))}).",
                  "", f"![Fan-out]({rel(chart)})", ""]
    lines += server_hook_lines(args.results)
    lines += api_flood_lines(args.results)
    with open(args.output, "w") as f:
        f.write("\n".join(lines))
    print(f"report.py: wrote {args.output}")


if __name__ == "__main__":
    main()

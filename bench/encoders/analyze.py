#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Analysis of a video-send benchmark run (bench/encoders/bench.py).

Per size and configuration: the encoder's CPU per source frame net of the
source (each run minus the median floor of its peer at that size), the
output bitrate over the cap, and the output frame rate over the source's;
medians over the rounds. Comparisons Legba/aiortc on the same codec get the
ratio of medians and a 95% bootstrap confidence interval of the difference
of medians (10,000 resamples, fixed seed): "established" only when it
excludes zero (docs/benchmarks.md, "Comparisons and verdicts"). Writes
Markdown.

  /usr/bin/python3 bench/encoders/analyze.py RESULTS.json [--output FILE]
"""

import argparse
import json
import random
import statistics
import sys

SEED = 20240607
RESAMPLES = 10000
PAIRS = [("legba:x264enc", "aiortc:h264"), ("legba:openh264enc",
                                              "aiortc:h264"),
         ("legba:vp8enc", "aiortc:vp8")]


def encoder_of(run):
    # runs of the first recorded series carry the worker's current-encoder
    # under "encoder", None for the floor
    return run["encoder"] or "none"


def series(data):
    """{(size, cap, config): {"cpu_ms": [...], "rate": [...], "fps": [...]}}"""
    floors = {}
    for run in data["runs"]:
        run["encoder"] = encoder_of(run)
    # runs carried from an earlier file are netted against that file's
    # floors, the others against this run's
    for run in data["runs"]:
        if run["encoder"] == "none" and "error" not in run:
            floors.setdefault((run["size"], run["peer"],
                               run.get("carried_from")), []).append(
                run["cpu_s"] / run["units"])
    floor = {k: statistics.median(v) for k, v in floors.items()}
    out = {}
    for run in data["runs"]:
        if run["encoder"] == "none":
            continue
        key = (run["size"], run["cap"], f"{run['peer']}:{run['encoder']}")
        s = out.setdefault(key, {"cpu_ms": [], "rate": [], "fps": [],
                                 "errors": [], "dropping": [], "sent": [],
                                 "carried": run.get("carried_from")})
        if "error" in run:
            s["errors"].append(run["error"])
            continue
        base = floor.get((run["size"], run["peer"],
                          run.get("carried_from")), 0.0)
        s["cpu_ms"].append((run["cpu_s"] / run["units"] - base) * 1000)
        s["rate"].append(run["bytes"] * 8 / run["duration_s"] / run["cap"])
        s["fps"].append(run["frames_out"] / run["frames_in"])
        if run.get("frame_dropping"):
            s["dropping"].append(run["frame_dropping"])
        if run.get("output_size"):
            s["sent"].append(f"{run['output_size']['width']}x"
                             f"{run['output_size']['height']}")
    return out, floor


def bootstrap_ci(a, b, rng):
    diffs = []
    for _ in range(RESAMPLES):
        ra = [rng.choice(a) for _ in a]
        rb = [rng.choice(b) for _ in b]
        diffs.append(statistics.median(ra) - statistics.median(rb))
    diffs.sort()
    return diffs[int(0.025 * RESAMPLES)], diffs[int(0.975 * RESAMPLES) - 1]


def fmt(values, spec):
    return format(statistics.median(values), spec) if values else "-"


def report(data, path):
    out, floor = series(data)
    sizes = [s for s in ["360p", "720p", "1080p", "2160p"]
             if any(k[0] == s for k in out)]
    caps = sorted({k[1] for k in out})
    configs = sorted({k[2] for k in out})
    cap_text = ", ".join(f"{c / 1e6:g}" for c in caps)
    cond = data["conditions"]
    lines = [
        "# Video send: CPU per frame, bitrate and frame rate under a cap",
        "",
        f"All figures **measured** by `{data['command']}` on "
        f"{data['date'][:10]} ({data['buildtype']} build); raw series in "
        f"`bench/results/{path}`.",
        "",
        f"- Content: {data['content']}; {data['frames']} frames (the first "
        f"{data['warmup']} excluded from CPU), caps {cap_text} Mbit/s "
        "(not every cap at 2160p where the sweep says so), 30 fps source.",
        "- CPU: process user+sys per source frame, net of the source (the "
        "median of the same process without the encoder, per peer and "
        "size); median of "
        f"{data['rounds']} fresh-process rounds in alternating order.",
        "- Bitrate: all output bytes over the stream's duration (key frame "
        "included) / cap. Frames: output frames / source frames.",
        f"- Machine: {cond['cpu_model']} x {cond['cpu_count']}, kernel "
        f"{cond['kernel']}; load {data['load_start']} at start, "
        f"{data['load_end']} at end; a shared machine (other users' "
        "builds and tests ran alongside).",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in
                                   cond["packages"].items() if v),
        *([f"- Carried over, not measured by this run: the rows marked "
           f"¹, from `bench/results/{data['carried_from']}` (its own "
           "conditions, CPU net of its own floors)."]
          if data.get("carried_from")
          else []),
        "- Size sent: the size legbavideoenc sends to the encoder (its "
        "`stats`), smaller than the source when the cap is below the "
        "encoder's measured floor (docs/encoders.md); – where not "
        "recorded.",
        "- aiortc clamps its targets (VP8 250 kbit/s-1.5 Mbit/s, H.264 "
        "500 kbit/s-3 Mbit/s); its H.264 is libx264 at its default preset.",
        "",
        "| size | cap Mbit/s | configuration | CPU ms/frame | "
        "bitrate / cap | frames out / in | size sent | runs |",
        "|---|---:|---|---:|---:|---:|---|---:|",
    ]
    over = []
    for size in sizes:
        for cap in caps:
            for config in configs:
                s = out.get((size, cap, config))
                if not s:
                    continue
                errors = (f" ({len(s['errors'])} failed)" if s["errors"]
                          else "")
                rate = fmt(s["rate"], ".2f")
                if s["rate"] and statistics.median(s["rate"]) > 1.10:
                    rate = f"**{rate}**"
                    over.append(f"{config} at {size}, {cap / 1e6:g} Mbit/s: "
                                f"{statistics.median(s['rate']):.2f} x cap")
                sent = "/".join(sorted(set(s["sent"]))) or "–"
                mark = "¹" if s["carried"] else ""
                lines.append(
                    f"| {size} | {cap / 1e6:g} | {config}{mark} | "
                    f"{fmt(s['cpu_ms'], '.2f')} | {rate} | "
                    f"{fmt(s['fps'], '.2f')} | {sent} | "
                    f"{len(s['cpu_ms'])}{errors} |")
    lines += ["", "### Over 1.10 x the cap (median of the runs)", ""]
    lines += [f"- {o}" for o in over] or ["- none"]
    switched = [(size, cap, config, s["dropping"][0])
                for size in sizes for cap in caps for config in configs
                for s in [out.get((size, cap, config))] if s and s["dropping"]]
    if switched:
        lines += ["", "### Frame dropping switched by the cap", "",
                  "Encoders whose frame dropping legbavideoenc turns on only "
                  "when the cap is below what the size and frame rate need "
                  "(`stats`: `frame-dropping`, `min-bitrate`):", ""]
        lines += [f"- {config} at {size}, {cap / 1e6:g} Mbit/s: "
                  f"{'on' if d['frame_dropping'] else 'off'} (needs "
                  f"{d['min_bitrate'] / 1e6:.2f} Mbit/s)"
                  for size, cap, config, d in switched]
    lines += ["", "Floors subtracted (ms per frame): " + ", ".join(
        f"{size} {peer}{'¹' if carried else ''} {v * 1000:.2f}"
        for (size, peer, carried), v in
        sorted(floor.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                             kv[0][2] or ""))), ""]
    rng = random.Random(SEED)
    lines += ["## Legba against aiortc, CPU per frame", "",
              "| size | cap Mbit/s | Legba | aiortc | ratio of medians | "
              "95% CI of the difference (ms) | verdict |",
              "|---|---:|---|---|---:|---|---|"]
    for size, cap in [(s, c) for s in sizes for c in caps]:
        for a, b in PAIRS:
            sa, sb = out.get((size, cap, a)), out.get((size, cap, b))
            if not sa or not sb or not sa["cpu_ms"] or not sb["cpu_ms"]:
                continue
            lo, hi = bootstrap_ci(sa["cpu_ms"], sb["cpu_ms"], rng)
            ratio = (statistics.median(sa["cpu_ms"]) /
                     statistics.median(sb["cpu_ms"]))
            verdict = "established" if lo > 0 or hi < 0 else "inconclusive"
            # bench/stats.py: no verdict from fewer than three runs a side
            if min(len(sa["cpu_ms"]), len(sb["cpu_ms"])) < 3:
                verdict = "inconclusive (fewer than 3 runs a side)"
            lines.append(f"| {size} | {cap / 1e6:g} | {a} | {b} | "
                         f"{ratio:.2f} | "
                         f"[{lo:.2f}, {hi:.2f}] | {verdict} |")
    lines += ["", "Legba's CPU is net of its floor, aiortc's of its own "
              "(which includes turning each frame into a PyAV frame). CPU "
              "is per source frame: a configuration that holds the cap by "
              "dropping frames (frames out / in below 1) encodes fewer "
              "frames than one that overshoots the cap instead, so those "
              "rows are not like for like; read them with the bitrate and "
              "frame columns. A few rounds per cell make the intervals "
              "coarse.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("--output")
    args = parser.parse_args()
    with open(args.results) as f:
        data = json.load(f)
    text = report(data, args.results.split("bench/results/")[-1])
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Analysis of a signalling-server benchmark run (bench/server/bench.py).

Reads one results JSON, computes per-metric medians for Legba and soketi,
the ratio Legba/soketi and a 95% bootstrap confidence interval of the
difference of medians (10,000 resamples, fixed seed: the analysis replays
identically), and writes a Markdown report (bench/RESULTS.md) and an SVG
chart of every run's value relative to soketi's median. A difference is
"established" only when its interval excludes zero (docs/benchmarks.md,
"Comparisons and verdicts").

  /usr/bin/python3 bench/analyze.py [RESULTS.json] [--output bench/server/RESULTS.md]

Without a file it takes the newest bench/results/server-STAMP.json.
Standard library only.
"""

import argparse
import glob
import json
import math
import os
import random
import statistics

SEED = 20240607
RESAMPLES = 10000
PEERS = ("legba", "soketi")
HERE = os.path.dirname(os.path.abspath(__file__))


# ---- metrics from runs ----

def fanout_values(run):
    """Per-run figures of a fan-out run, or {} when it has none."""
    load = run.get("load")
    if not load or "subscribed" not in run or load["subscribed"] == 0:
        return {}
    n = load["subscribed"]
    values = {
        "rss_mib": run["subscribed"]["rss"] / 2**20,
        "mem_kib_per_conn": (run["subscribed"]["rss"] - run["base"]["rss"])
        / n / 1024,
    }
    if "warm" in run and "done" in run and load["delivered"] > 0:
        work = n * run["events"]
        values["cpu_us_per_socket_event"] = (
            (run["done"]["cpu_s"] - run["warm"]["cpu_s"]) * 1e6 / work)
        values["sched_us_per_socket_event"] = (
            (run["done"]["sched_s"] - run["warm"]["sched_s"]) * 1e6 / work)
        values["fanout_p50_ms"] = load["latency_ms"]["p50"]
        values["fanout_p95_ms"] = load["latency_ms"]["p95"]
    return values


def rtt_values(run):
    values = {}
    rtt = run.get("rtt") or {}
    if "ping_ms" in rtt:
        values["ping_p50_ms"] = rtt["ping_ms"]["p50"]
        values["ping_p95_ms"] = rtt["ping_ms"]["p95"]
        values["relay_p50_ms"] = rtt["relay_ms"]["p50"]
        values["relay_p95_ms"] = rtt["relay_ms"]["p95"]
    relay = run.get("relay")
    if relay and "done" in run and relay["relay"]["relayed"] > 0:
        relayed = relay["relay"]["relayed"]
        values["cpu_us_per_relay"] = (
            (run["done"]["cpu_s"] - run["subscribed"]["cpu_s"]) * 1e6
            / relayed)
        values["sched_us_per_relay"] = (
            (run["done"]["sched_s"] - run["subscribed"]["sched_s"]) * 1e6
            / relayed)
    return values


def collect(results):
    """{(metric, size or None): {peer: [values in run order]}}."""
    series = {}
    for run in results["runs"]:
        if run["scenario"] == "fanout":
            values, size = fanout_values(run), run["size"]
        else:
            values, size = rtt_values(run), None
        for metric, value in values.items():
            series.setdefault((metric, size), {p: [] for p in PEERS})
            series[(metric, size)][run["peer"]].append(value)
    return series


# ---- statistics ----

def bootstrap_ci(a, b, rng):
    """95% interval of median(a) - median(b) by resampling each series."""
    diffs = sorted(statistics.median(rng.choices(a, k=len(a)))
                   - statistics.median(rng.choices(b, k=len(b)))
                   for _ in range(RESAMPLES))
    return diffs[int(0.025 * RESAMPLES)], diffs[int(0.975 * RESAMPLES) - 1]


def compare(legba, soketi, rng):
    row = {"n": (len(legba), len(soketi))}
    if legba:
        row["legba"] = statistics.median(legba)
    if soketi:
        row["soketi"] = statistics.median(soketi)
    if legba and soketi:
        row["ratio"] = row["legba"] / row["soketi"] if row["soketi"] else None
        lo, hi = bootstrap_ci(legba, soketi, rng)
        row["ci"] = (lo, hi)
        if min(len(legba), len(soketi)) < 3:
            # bench/stats.py: no verdict from fewer than three runs a side
            row["verdict"] = "inconclusive (fewer than 3 runs a side)"
        elif lo > 0:
            row["verdict"] = "Legba higher (established)"
        elif hi < 0:
            row["verdict"] = "Legba lower (established)"
        else:
            row["verdict"] = "inconclusive"
    return row


# ---- report ----

def fmt(v, digits=3):
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.2f}"


METRICS = [
    # key, label, unit, target ratio (Legba/soketi at most), target text
    ("cpu_us_per_socket_event", "Server CPU per socket per broadcast",
     "µs", 0.5, "≤ ½ soketi"),
    ("cpu_us_per_relay", "Server CPU per relayed client event", "µs", 0.5,
     "≤ ½ soketi"),
    ("mem_kib_per_conn", "Memory (RSS) per idle connection", "KiB", 0.5,
     "≤ ½ soketi"),
    ("rss_mib", "Server RSS with N idle sockets", "MiB", None, ""),
    ("ping_p50_ms", "Round trip pusher:ping→pong, p50", "ms", 1.0,
     "≤ soketi"),
    ("ping_p95_ms", "Round trip pusher:ping→pong, p95", "ms", 1.0,
     "≤ soketi"),
    ("relay_p50_ms", "Round trip client event A→B→A, p50", "ms", 1.0,
     "≤ soketi"),
    ("relay_p95_ms", "Round trip client event A→B→A, p95", "ms", 1.0,
     "≤ soketi"),
    ("fanout_p50_ms", "Fan-out publish-to-receipt, p50", "ms", None, ""),
    ("fanout_p95_ms", "Fan-out publish-to-receipt, p95", "ms", None, ""),
    ("sched_us_per_socket_event",
     "Cross-check: CPU per socket per broadcast from schedstat", "µs",
     None, ""),
    ("sched_us_per_relay",
     "Cross-check: CPU per relayed client event from schedstat", "µs",
     None, ""),
]


def target_status(row, target):
    if target is None or "ratio" not in row or row["ratio"] is None:
        return ""
    met = row["ratio"] <= target
    if target == 1.0:
        if row.get("verdict", "").startswith("Legba higher"):
            return "not met (worse, established)"
        return "met" if met else "not met (within noise)"
    return "met" if met else "not met"


def summary_table(series, sizes, rng):
    lines = ["| Figure | N sockets | Legba | soketi | Legba/soketi "
             "| 95% CI of Legba − soketi | Verdict | Target | State |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = {}
    for key, label, unit, target, target_text in METRICS:
        for size in [None] + sizes:
            if (key, size) not in series:
                continue
            s = series[(key, size)]
            row = compare(s["legba"], s["soketi"], rng)
            rows[(key, size)] = row
            ci = row.get("ci")
            status = target_status(row, target)
            state = "measured" if row["n"][0] and row["n"][1] else \
                "measured (one side has no data)"
            lines.append(
                f"| {label} ({unit}) | {size or '–'} | {fmt(row.get('legba'))}"
                f" | {fmt(row.get('soketi'))} | {fmt(row.get('ratio'))} | "
                + (f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "–")
                + f" | {row.get('verdict', '–')} | "
                + (f"{target_text}: {status}" if status else "–")
                + f" | {state}, n = {row['n'][0]} / {row['n'][1]} |")
    return lines, rows


def fanout_table(results, sizes):
    lines = ["| N sockets | Peer | Runs | Subscribed (all runs) "
             "| Delivered/total (all runs) | p50 ms (median) "
             "| p95 ms (median) | Generator µs/frame (median) | Target |",
             "|---|---|---|---|---|---|---|---|---|"]
    for size in sizes:
        for peer in PEERS:
            runs = [r for r in results["runs"] if r["scenario"] == "fanout"
                    and r["size"] == size and r["peer"] == peer]
            loads = [r["load"] for r in runs if r.get("load")]
            skipped = [s for s in results.get("skipped", [])
                       if s["size"] == size and s["peer"] == peer]
            sub = sum(x["subscribed"] for x in loads)
            conns = sum(x["connections"] for x in loads)
            dl = sum(x["delivered"] for x in loads)
            tot = sum(x["total"] for x in loads)
            timed = [x for x in loads if x["delivered"] > 0]
            p50 = statistics.median([x["latency_ms"]["p50"] for x in timed]) \
                if timed else None
            p95 = statistics.median([x["latency_ms"]["p95"] for x in timed]) \
                if timed else None
            gen = statistics.median([x["work_us_per_frame"] for x in timed]) \
                if timed else None
            target = ""
            if size == 10000 and peer == "legba" and loads:
                ok = dl == tot and tot > 0 and p95 is not None and p95 <= 80
                target = "10,000/10,000, p95 ≤ 80 ms: " + \
                    ("met" if ok else "not met")
            note = f" ({len(skipped)} skipped after a failed setup)" \
                if skipped else ""
            errors = [r["error"] for r in runs if "error" in r] + \
                [x["errors"][0] for x in loads
                 if x["delivered"] < x["total"] and x.get("errors")]
            if errors:
                note += f" ({len(errors)} failed: {errors[0][:80]})"
            lines.append(f"| {size} | {peer} | {len(runs)}{note} | "
                         f"{sub}/{conns} | {dl}/{tot} | {fmt(p50)} | "
                         f"{fmt(p95)} | {fmt(gen)} | {target or '–'} |")
    return lines


def ceiling_table(results, sizes):
    lines = ["| N sockets | Runs | Delivered/total | p50 ms | p95 ms "
             "| Receipts/s over publish-to-last-receipt "
             "| Generator µs/frame | Frames/s one generator process absorbs "
             "| Self-test server CPU per socket per broadcast (µs) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for size in sizes:
        runs = [s for s in results["self_test"] if s["size"] == size]
        loads = [s["load"] for s in runs]
        if not loads:
            continue
        floors = [v for v in (self_test_cpu_us(s) for s in runs)
                  if v is not None]

        def med(f):
            return statistics.median(f(x) for x in loads)
        lines.append(
            f"| {size} | {len(loads)} | "
            f"{sum(x['delivered'] for x in loads)}/"
            f"{sum(x['total'] for x in loads)} | "
            f"{fmt(med(lambda x: x['latency_ms']['p50']))} | "
            f"{fmt(med(lambda x: x['latency_ms']['p95']))} | "
            f"{med(lambda x: x['fanout_frames_per_s']):.0f} | "
            f"{fmt(med(lambda x: x['work_us_per_frame']))} | "
            f"{1e6 / med(lambda x: x['work_us_per_frame']):.0f} | "
            f"{fmt(statistics.median(floors)) if floors else 'not sampled'} |")
    return lines


def relay_floor_lines(results):
    """The self-test server's CPU per relayed client event, sampled like
    the peers' (rtt_values); nothing for results that did not run it."""
    floors = [rtt_values(run).get("cpu_us_per_relay")
              for run in results.get("self_test_relay", [])]
    floors = [v for v in floors if v is not None]
    if not floors:
        return []
    return ["", "The same built-in server in the relay scenario (the same "
            "pairs and round trips as the peers', sampled the same way): "
            f"{fmt(statistics.median(floors))} µs of CPU per relayed client "
            f"event (median of {len(floors)} run(s): "
            f"{', '.join(fmt(v) for v in floors)}), the floor under the "
            "peers' figure: reading one frame and writing it on."]


def self_test_cpu_us(run):
    """The self-test server's CPU per socket per broadcast over the timed
    events (older results did not sample it: None)."""
    load = run["load"]
    if "warm" not in run or "done" not in run or load["delivered"] == 0:
        return None
    return ((run["done"]["cpu_s"] - run["warm"]["cpu_s"]) * 1e6
            / (load["subscribed"] * run["events"]))


def series_lines(series):
    lines = []
    for (key, size), s in sorted(series.items(),
                                 key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        label = key + (f" @ {size}" if size else "")
        for peer in PEERS:
            values = ", ".join(fmt(v) for v in s[peer]) or "no data"
            lines.append(f"- `{label}` {peer}: {values}")
    return lines


def conditions_lines(c):
    busy = lambda lst: ", ".join(  # noqa: E731
        f"{p['comm']} ({p['cpu_share']:.0%})" for p in lst) or "none"
    return [
        f"- CPU: {c['cpu_model']} × {c['cpus']}; memory {c['memory']}; "
        f"kernel {c['kernel']}; {c['os']}",
        f"- Legba {c['legba_version']} ({c['legba_buildtype']} build), "
        f"libsoup {c['libsoup']}, GLib {c['glib']}",
        f"- soketi {c['soketi']} on Node.js {c['node']}, "
        f"uWebSockets.js = {c['uwebsockets']}",
        f"- Generator: {c['generator']}; file-descriptor hard limit "
        f"{c['nofile_hard']}",
        f"- Load average at start {c['loadavg_start']}, at end "
        f"{c['loadavg_end']}",
        f"- Other busy processes at start: {busy(c['busy_start'])}; at end: "
        f"{busy(c['busy_end'])}. The machine is shared: other work ran "
        "beside the benchmark and hits both peers alike (alternating order).",
    ]


# ---- chart ----

def chart(series, path):
    """Every run's value over soketi's median, log scale, one row per
    figure: the medians hide bimodal series, the dots do not."""
    rows = [(k, s) for k, s in sorted(series.items(),
                                      key=lambda kv: (kv[0][0],
                                                      kv[0][1] or 0))
            if s["soketi"] and not k[0].startswith("sched")]
    width, left, row_h, top = 900, 330, 22, 40
    height = top + row_h * len(rows) + 40
    lo, hi = 0.05, 20.0

    def x(ratio):
        ratio = min(max(ratio, lo), hi)
        return left + (math.log10(ratio) - math.log10(lo)) / \
            (math.log10(hi) - math.log10(lo)) * (width - left - 20)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14">Each run relative to '
           f'soketi\'s median (log scale; left of 1 = lower than soketi)'
           f'</text>']
    for tick in (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 10, 20):
        out.append(f'<line x1="{x(tick):.1f}" y1="{top - 5}" '
                   f'x2="{x(tick):.1f}" y2="{height - 30}" stroke='
                   f'"{"#444" if tick == 1 else "#ddd"}"/>')
        out.append(f'<text x="{x(tick):.1f}" y="{height - 15}" '
                   f'text-anchor="middle">{tick:g}</text>')
    for i, ((key, size), s) in enumerate(rows):
        y = top + row_h * i + row_h / 2
        base = statistics.median(s["soketi"])
        label = key + (f" @ {size}" if size else "")
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{label}</text>')
        for peer, colour, dy in (("soketi", "#999", 4), ("legba", "#1565c0",
                                                         -4)):
            for v in s[peer]:
                if base:
                    out.append(f'<circle cx="{x(v / base):.1f}" '
                               f'cy="{y + dy:.1f}" r="3.5" fill="{colour}" '
                               f'fill-opacity="0.7"/>')
    out.append(f'<text x="{left}" y="{height - 2}" fill="#1565c0">● Legba'
               f'</text><text x="{left + 80}" y="{height - 2}" '
               f'fill="#999">● soketi</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---- main ----

def report(results, results_path, output, chart_path):
    rng = random.Random(SEED)
    sizes = results["plan"]["sizes"]
    series = collect(results)
    summary, _ = summary_table(series, sizes, rng)
    p = results["plan"]
    rel = lambda path: os.path.relpath(  # noqa: E731
        path, os.path.dirname(os.path.abspath(output)))
    lines = [
        "# Benchmark results: signalling server",
        "",
        "Generated by `bench/analyze.py` from "
        f"[`{rel(results_path)}`]({rel(results_path)}); do not edit by "
        "hand. How to run and what each figure means: "
        f"[docs/benchmarks.md]({rel(os.path.join(HERE, '..', 'docs', 'benchmarks.md'))}).",
        "",
        f"Command: `{results['command']}` ({'smoke run' if results['quick'] else 'full run'}, "
        f"{results['started']} to {results['finished']}, "
        f"{results['elapsed_s']:.0f} s).",
        "",
        f"![Each run relative to soketi's median]({rel(chart_path)})",
        "",
    ] + ([f"**This run stopped early** ({results['aborted']}); the tables "
          "hold what it measured before.", ""]
         if results.get("aborted") else []) + [
        "## Legba against soketi",
        "",
        f"{p['rounds']} round(s), order A B B A swapped every round (so "
        f"{2 * p['rounds']} runs per peer and figure), each run on a fresh "
        "server process, same generator. Medians; the interval is the 95% "
        f"bootstrap interval of the difference of medians ({RESAMPLES} "
        f"resamples, seed {SEED}); *established* only when it excludes 0. "
        "Lower is better for every figure.",
        "",
    ] + summary + [
        "",
        "## Fan-out of one HTTP API event",
        "",
        f"Per run: {p['warmup']} warm-up events (untimed), then the timed "
        "events (" + ", ".join(f"{n}: {e}" for n, e in p["events"].items())
        + " sockets: events), each published once the previous one reached "
        "every socket; every socket times its own receipt against the "
        "publish time (CLOCK_MONOTONIC, one host).",
        "",
    ] + fanout_table(results, sizes) + [
        "",
        "## The generator's ceiling",
        "",
        "`legba-probe load --self-test`: the same generator against a "
        "built-in fan-out server that does nothing but write one "
        "pre-encoded frame per socket (same machine, same run). No server "
        "can look faster than this through this generator; figures near "
        "it measure the generator and the kernel, not the server. "
        "Generator µs/frame is the generator's CPU time after setup "
        "(kernel time included) over the frames it received; its inverse "
        "is what one generator process can absorb, to compare with the "
        "receipt rates of the runs above. The self-test server is sampled "
        "like the peers (`utime + stime` over the timed events): its CPU "
        "per socket per broadcast is what one `send()` of a ready frame "
        "per socket costs on this machine, the floor under any server's "
        "figure above.",
        "",
    ] + ceiling_table(results, sizes) + relay_floor_lines(results) + [
        "",
        "## Not measured",
        "",
        "- Fan-out on two instances (suite 8 of docs/benchmarks.md): this "
        "suite runs one instance of each peer; two would need a Redis "
        "server and each peer's Redis relay in the run. The generator "
        "already splits its sockets over several `--targets`.",
        "- 20,000 sockets: one server process would need more than the "
        f"{results['conditions']['nofile_hard']} file descriptors the hard "
        "limit gives every process here; the harness does not raise hard "
        "limits.",
        "",
        "## Conditions",
        "",
    ] + conditions_lines(results["conditions"]) + [
        "",
        "## Raw series (run order)",
        "",
    ] + series_lines(series) + [""]
    with open(output, "w") as f:
        f.write("\n".join(lines))
    chart(series, chart_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?")
    ap.add_argument("--output", default=os.path.join(HERE, "server", "RESULTS.md"))
    args = ap.parse_args()
    path = args.results
    if path is None:
        # server-STAMP.json: not server-flood-STAMP.json, a suite of its own
        found = sorted(glob.glob(os.path.join(HERE, "results",
                                              "server-[0-9]*.json")))
        if not found:
            raise SystemExit("analyze.py: no bench/results/server-*.json")
        path = found[-1]
    with open(path) as f:
        results = json.load(f)
    chart_path = path[:-len(".json")] + ".svg"
    report(results, path, args.output, chart_path)
    print(f"analyze.py: wrote {args.output} and {chart_path}")


if __name__ == "__main__":
    main()

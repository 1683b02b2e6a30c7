# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The statistics every benchmark figure goes through (docs/benchmarks.md,
"Comparisons and verdicts").

- median of a series, and the ratio of two medians against a named
  baseline;
- the 95% bootstrap interval of the difference of medians (10,000
  resamples of each series, a fixed seed: the same series always give the
  same interval);
- the verdict: *established* only when that interval excludes zero,
  otherwise *inconclusive*, whatever the point estimate says (and always
  inconclusive with fewer than MIN_RUNS runs a side);
- samples that come in runs (the four participants of one mesh, the
  warm pairs of one process): the bootstrap resamples whole runs, the
  unit that is independent, so samples of one run sharing its conditions
  do not pass for independent evidence;
- each figure's state: measured / estimated / not measured.

Standard library only (/usr/bin/python3).
"""

import random
import statistics

SEED = 20240607
RESAMPLES = 10000
STATES = ("measured", "estimated", "not measured")
# fewer runs than this a side and a bootstrap interval only echoes the
# runs themselves: no verdict but "inconclusive"
MIN_RUNS = 3


def median(values):
    return statistics.median(values) if values else None


def percentile(values, q):
    """Nearest-rank percentile (as legbastampcheck's), q in 0..100."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def runs_of(values, runs=None):
    """The samples as runs: lists of the values that share a run id in
    runs (aligned with values), in the order of first appearance; each
    value a run of its own when runs is None."""
    if runs is None:
        return [[v] for v in values]
    if len(runs) != len(values):
        raise ValueError(f"{len(runs)} run ids for {len(values)} values")
    grouped = {}
    for run, v in zip(runs, values):
        grouped.setdefault(run, []).append(v)
    return list(grouped.values())


def _resampled_median(rng, runs):
    picked = rng.choices(runs, k=len(runs))
    return statistics.median([v for run in picked for v in run])


def _interval(ra, rb, seed, resamples):
    rng = random.Random(seed)
    diffs = sorted(_resampled_median(rng, ra) - _resampled_median(rng, rb)
                   for _ in range(resamples))
    return diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


def bootstrap_ci(a, b, seed=SEED, resamples=RESAMPLES, a_runs=None,
                 b_runs=None):
    """95% interval of median(a) - median(b), resampling each series' runs
    with replacement (each sample is a run unless a_runs/b_runs give the
    run of each); a fixed seed replays it exactly."""
    return _interval(runs_of(a, a_runs), runs_of(b, b_runs), seed,
                     resamples)


def compare(series, baseline, seed=SEED, resamples=RESAMPLES, runs=None,
            baseline_runs=None):
    """One row: medians, ratio series/baseline, the interval of the
    difference and the verdict. Either series may be empty: then the row
    says so and carries no verdict. runs and baseline_runs, when given,
    name each sample's run (see runs_of): the interval then resamples
    runs, and MIN_RUNS counts runs."""
    row = {"median": median(series), "baseline_median": median(baseline),
           "n": len(series), "baseline_n": len(baseline),
           "ratio": None, "ci": None, "verdict": None}
    if not series or not baseline:
        return row
    if row["baseline_median"]:
        row["ratio"] = row["median"] / row["baseline_median"]
    ra, rb = runs_of(series, runs), runs_of(baseline, baseline_runs)
    if len(ra) < MIN_RUNS or len(rb) < MIN_RUNS:
        row["verdict"] = "inconclusive"
        row["few_runs"] = True
        return row
    lo, hi = _interval(ra, rb, seed, resamples)
    row["ci"] = (lo, hi)
    if lo > 0:
        row["verdict"] = "higher (established)"
    elif hi < 0:
        row["verdict"] = "lower (established)"
    else:
        row["verdict"] = "inconclusive"
    return row


def mad_test(a, b, k=3.0):
    """The shortcut docs/benchmarks.md rules out, kept to show why: calls a
    difference when the medians differ by more than k pooled median
    absolute deviations. A bimodal series fools it."""
    def mad(values):
        m = statistics.median(values)
        return statistics.median(abs(v - m) for v in values)
    spread = max(mad(a), mad(b))
    return abs(statistics.median(a) - statistics.median(b)) > k * spread


def state(values, estimated=False):
    if not values:
        return "not measured"
    return "estimated" if estimated else "measured"

# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The statistics every benchmark figure goes through (BENCHMARKING.md).

- median of a series, and the ratio of two medians against a named
  baseline;
- the 95% bootstrap interval of the difference of medians (10,000
  resamples of each series, a fixed seed: the same series always give the
  same interval);
- the verdict: *established* only when that interval excludes zero,
  otherwise *inconclusive*, whatever the point estimate says (and always
  inconclusive with fewer than MIN_RUNS runs a side);
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


def bootstrap_ci(a, b, seed=SEED, resamples=RESAMPLES):
    """95% interval of median(a) - median(b), resampling each series with
    replacement; a fixed seed replays it exactly."""
    rng = random.Random(seed)
    diffs = sorted(statistics.median(rng.choices(a, k=len(a)))
                   - statistics.median(rng.choices(b, k=len(b)))
                   for _ in range(resamples))
    return diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


def compare(series, baseline, seed=SEED, resamples=RESAMPLES):
    """One row: medians, ratio series/baseline, the interval of the
    difference and the verdict. Either series may be empty: then the row
    says so and carries no verdict."""
    row = {"median": median(series), "baseline_median": median(baseline),
           "n": len(series), "baseline_n": len(baseline),
           "ratio": None, "ci": None, "verdict": None}
    if not series or not baseline:
        return row
    if row["baseline_median"]:
        row["ratio"] = row["median"] / row["baseline_median"]
    if len(series) < MIN_RUNS or len(baseline) < MIN_RUNS:
        row["verdict"] = "inconclusive"
        row["few_runs"] = True
        return row
    lo, hi = bootstrap_ci(series, baseline, seed, resamples)
    row["ci"] = (lo, hi)
    if lo > 0:
        row["verdict"] = "higher (established)"
    elif hi < 0:
        row["verdict"] = "lower (established)"
    else:
        row["verdict"] = "inconclusive"
    return row


def mad_test(a, b, k=3.0):
    """The shortcut BENCHMARKING.md rules out, kept to show why: calls a
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

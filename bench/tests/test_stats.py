#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of the benchmarks' statistics (bench/stats.py)."""

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import report  # noqa: E402
import stats  # noqa: E402


def bimodal(rng, n, low, high):
    """Half the samples near low, half near high: the medians of two such
    series land anywhere between the modes."""
    return [rng.gauss(low if rng.random() < 0.5 else high, 0.05)
            for _ in range(n)]


class Stats(unittest.TestCase):
    def test_bimodal_fools_mad_not_bootstrap(self):
        # Two draws from the same bimodal process: no real difference.
        # Each series' MAD is tiny (samples hug their mode) while the
        # medians fall on different sides: a MAD test calls a difference,
        # the bootstrap interval of the difference of medians does not.
        a = [1.0, 1.01, 0.99, 1.02, 5.0, 5.01, 4.99, 1.0, 5.02]
        b = [1.0, 5.0, 5.01, 0.99, 4.99, 1.01, 5.02, 4.98, 1.02]
        self.assertAlmostEqual(stats.median(a), 1.02)
        self.assertAlmostEqual(stats.median(b), 4.98)
        self.assertTrue(stats.mad_test(a, b))
        row = stats.compare(a, b)
        self.assertEqual(row["verdict"], "inconclusive")
        lo, hi = row["ci"]
        self.assertLess(lo, 0)
        self.assertGreater(hi, 0)

    def test_bimodal_random_draws(self):
        rng = random.Random(7)
        wrong = 0
        for _ in range(20):
            a, b = bimodal(rng, 15, 1, 5), bimodal(rng, 15, 1, 5)
            row = stats.compare(a, b, resamples=2000)
            if row["verdict"] != "inconclusive":
                wrong += 1
        # at a 95% level, about one in twenty may be called; not more
        self.assertLessEqual(wrong, 3)

    def test_identical_series_inconclusive(self):
        a = [10.0, 11.0, 12.0, 10.5, 11.5]
        row = stats.compare(a, list(a))
        self.assertEqual(row["verdict"], "inconclusive")
        self.assertEqual(row["ratio"], 1.0)
        lo, hi = row["ci"]
        self.assertLessEqual(lo, 0)
        self.assertGreaterEqual(hi, 0)

    def test_clear_difference_established(self):
        a = [10.0 + 0.1 * i for i in range(10)]
        b = [20.0 + 0.1 * i for i in range(10)]
        self.assertEqual(stats.compare(a, b)["verdict"],
                         "lower (established)")
        self.assertEqual(stats.compare(b, a)["verdict"],
                         "higher (established)")

    def test_seed_replays_exactly(self):
        rng = random.Random(3)
        a = [rng.expovariate(1) for _ in range(30)]
        b = [rng.expovariate(1.2) for _ in range(30)]
        first = stats.bootstrap_ci(a, b)
        self.assertEqual(first, stats.bootstrap_ci(a, b))
        self.assertEqual(stats.compare(a, b), stats.compare(a, b))
        self.assertNotEqual(first, stats.bootstrap_ci(a, b, seed=1))

    def test_too_few_runs_inconclusive(self):
        row = stats.compare([1.0, 1.1], [5.0, 5.1])
        self.assertEqual(row["verdict"], "inconclusive")
        self.assertIsNone(row["ci"])
        self.assertEqual(stats.compare([1.0, 1.1, 1.2], [5.0, 5.1, 5.2])[
            "verdict"], "lower (established)")

    def test_missing_side_has_no_verdict(self):
        row = stats.compare([], [1.0, 2.0])
        self.assertIsNone(row["verdict"])
        self.assertIsNone(row["median"])
        self.assertEqual(stats.state([]), "not measured")
        self.assertEqual(stats.state([1.0]), "measured")
        self.assertEqual(stats.state([1.0], estimated=True), "estimated")

    def test_runs_resampled_whole(self):
        # CPU per participant of three 4-way meshes a peer (two builds of
        # one program, bench/run.sh mesh of 2026-12-01): within a run the
        # four participants share its conditions and move together. Taken
        # as 12 independent samples the difference looks established;
        # resampling the three runs it is not.
        a = [24.39, 23.89, 24.15, 24.3, 24.15, 22.43, 23.4, 23.64, 22.52,
             21.57, 21.54, 22.82]
        b = [24.62, 23.3, 22.38, 22.86, 21.91, 21.39, 20.68, 20.18, 22.39,
             22.35, 21.8, 21.54]
        runs = [0] * 4 + [1] * 4 + [2] * 4
        self.assertEqual(stats.compare(a, b)["verdict"],
                         "higher (established)")
        row = stats.compare(a, b, runs=runs, baseline_runs=runs)
        self.assertEqual(row["verdict"], "inconclusive")
        self.assertEqual(row["n"], 12)
        self.assertAlmostEqual(row["median"], 23.52)
        lo, hi = row["ci"]
        self.assertLess(lo, 0)
        self.assertGreater(hi, 0)
        # fewer than three runs a side: no verdict, however many samples
        row = stats.compare(a[:8], b[:8], runs=runs[:8],
                            baseline_runs=runs[:8])
        self.assertTrue(row.get("few_runs"))

    def test_one_sample_runs_replay_ungrouped(self):
        # a run id per sample resamples exactly as no run ids at all, so
        # results recorded without run ids keep their intervals
        a = [10.0, 11.0, 12.0, 10.5, 11.5, 13.0]
        b = [9.0, 9.5, 10.0, 9.2, 9.8, 9.9]
        self.assertEqual(
            stats.compare(a, b, runs=list(range(6)),
                          baseline_runs=list(range(6)))["ci"],
            stats.compare(a, b)["ci"])
        with self.assertRaises(ValueError):
            stats.compare(a, b, runs=[0, 1])

    def test_percentile_nearest_rank(self):
        values = list(range(1, 101))
        self.assertEqual(stats.percentile(values, 50), 50)
        self.assertEqual(stats.percentile(values, 95), 95)
        self.assertEqual(stats.percentile([3.0], 99), 3.0)

    def test_ratio_target_decided_by_interval(self):
        # A target "within 1.05 x the baseline" is decided like any
        # comparison: by the interval of the difference to 1.05 x the
        # baseline, whatever the point estimate says.
        rng = random.Random(7)
        base = [rng.gauss(100.0, 1.0) for _ in range(60)]

        def verdict(who):
            return report._vs({"m": {"legba": who, "base": base}}, "m",
                              "base", 1.05)
        self.assertIs(verdict([rng.gauss(90.0, 1.0) for _ in range(60)]),
                      True)
        self.assertIs(verdict([rng.gauss(120.0, 1.0) for _ in range(60)]),
                      False)
        # a bimodal series whose median lands above the target: not
        # decided, where the point estimate alone said "not met"
        noisy = bimodal(rng, 60, 60.0, 150.0)
        self.assertGreater(stats.median(noisy), 105.0 * 1.01)
        self.assertEqual(verdict(noisy), "inconclusive")
        # one deterministic count a side (callgrind): the medians decide
        self.assertIs(report._vs({"m": {"legba": [104.0], "base": [100.0]}},
                                 "m", "base", 1.05), True)
        self.assertIs(report._vs({"m": {"legba": [106.0], "base": [100.0]}},
                                 "m", "base", 1.05), False)
        self.assertIsNone(report._vs({"m": {"base": [1.0]}}, "m", "base",
                                     1.05))


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network lab's figures from synthetic samples (bench/netlab/
netlab.py): freezes by Chromium's definition, a Chromium receiver's
counters over the window, RTX told from media by payload type, the
competing TCP flow's share, data messages' latency and order
(bench/netlab/data.py). No lab, no root: milliseconds."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "netlab"))
import netlab  # noqa: E402
import data  # noqa: E402

FPS = 1 / 30


def frames(start, end, step=FPS):
    """Frame times from start to end inclusive, step apart."""
    return [start + i * step for i in range(round((end - start) / step) + 1)]


class Freezes(unittest.TestCase):
    def test_steady_stream_has_none(self):
        self.assertEqual(netlab.freezes(frames(0, 10), 1, 9), [])

    def test_a_gap_over_mean_plus_150_ms(self):
        # at 30 fps the threshold is max(100 ms, 183 ms): 150 ms passes,
        # 250 ms is a freeze
        t = frames(0, 4) + frames(4.15, 6) + frames(6.25, 10)
        fr = netlab.freezes(sorted(t), 1, 9)
        self.assertEqual(len(fr), 1)
        self.assertAlmostEqual(fr[0], 0.25, delta=0.04)

    def test_slow_stream_uses_three_times_its_mean(self):
        # 5 fps: mean 200 ms, threshold max(600, 350) ms; 500 ms is not a
        # freeze, 700 ms is
        t = frames(0, 4, 0.2) + frames(4.5, 5.9, 0.2) + frames(6.6, 10, 0.2)
        fr = netlab.freezes(sorted(t), 1, 9)
        self.assertEqual(len(fr), 1)
        self.assertAlmostEqual(fr[0], 0.7, delta=0.21)

    def test_no_frame_is_frozen_throughout(self):
        self.assertEqual(netlab.freezes([], 5, 35), [30])
        self.assertEqual(netlab.freezes(frames(0, 4), 5, 35), [30])

    def test_stall_at_the_end_counts_to_the_end(self):
        fr = netlab.freezes(frames(0, 20), 5, 35)
        self.assertEqual(len(fr), 1)
        self.assertAlmostEqual(fr[0], 15, delta=0.05)


class ChromiumReceiver(unittest.TestCase):
    def lines(self, counters):
        return [(t, '{"stats": [{"participant": "p", "inbound": %s}]}'
                 % c) for t, c in counters]

    def test_counters_over_the_window(self):
        lines = self.lines([
            (t, '{"framesDecoded": %d, "freezeCount": %d, '
             '"totalFreezesDuration": %.1f, "nackCount": %d, '
             '"pliCount": 1, "payloadType": 102}'
             % (30 * t, 1 if t >= 8 else 0, 0.5 if t >= 8 else 0, t))
            for t in range(1, 16)])
        series = [{"t": float(t)} for t in range(1, 16)]
        res = netlab.chromium_receiver(lines, 0, series, 5, 15)
        self.assertEqual(res["first_frame_s"], 1)
        self.assertEqual(res["frames_in_window"], 300)
        self.assertEqual(res["freeze_count"], 1)
        self.assertAlmostEqual(res["freeze_s"], 0.5)
        self.assertEqual(res["nacks_sent"], 10)
        self.assertEqual(res["plis_sent"], 0)
        self.assertEqual([s["frames"] for s in series[1:]], [30] * 14)

    def test_stall_at_the_end_is_added(self):
        # frames stop at 9 s; Chromium has not counted the freeze yet
        lines = self.lines([(t, '{"framesDecoded": %d}' % (30 * min(t, 9)))
                            for t in range(1, 16)])
        series = [{"t": float(t)} for t in range(1, 16)]
        res = netlab.chromium_receiver(lines, 0, series, 5, 15)
        self.assertEqual(res["freeze_count"], 1)
        self.assertAlmostEqual(res["freeze_s"], 6)

    def test_samples_straddling_the_end_are_no_stall(self):
        # a sample just before 14 s, the next just after the window's end
        # at 15 s: frames every second, no freeze
        times = [t + 0.0004 for t in range(1, 14)] + [13.9996, 15.0004]
        lines = self.lines([(t, '{"framesDecoded": %d}' % (30 * i))
                            for i, t in enumerate(times, 1)])
        series = [{"t": float(t)} for t in range(1, 16)]
        res = netlab.chromium_receiver(lines, 0, series, 5, 15)
        self.assertEqual(res["freeze_count"], 0)
        self.assertEqual(res["freeze_s"], 0)

    def test_stall_counted_after_the_end_is_added(self):
        # frames stop at 12 s and come back after the window's end, where
        # Chromium counts the freeze
        lines = self.lines([
            (t, '{"framesDecoded": %d, "freezeCount": %d, '
             '"totalFreezesDuration": %d}'
             % (30 * min(t, 12) + (30 if t >= 16 else 0),
                1 if t >= 16 else 0, 4 if t >= 16 else 0))
            for t in range(1, 18)])
        series = [{"t": float(t)} for t in range(1, 16)]
        res = netlab.chromium_receiver(lines, 0, series, 5, 15)
        self.assertEqual(res["freeze_count"], 1)
        self.assertAlmostEqual(res["freeze_s"], 3)


class Wire(unittest.TestCase):
    def sample(self, t, rtp, lost=0):
        return {"t": t, "sent_bytes": 125000 * t, "received_bytes":
                62500 * t, "backlog_bytes": 12500, "qdisc_drops": 10 * t,
                "rate_kbps": 1000,
                "delayline": {"t": t, "ab": {"rtp": rtp, "lost": lost}}}

    def test_rtx_is_every_other_dynamic_payload_type(self):
        samples = [self.sample(0, {}),
                   self.sample(1, {"102": 100, "111": 50, "103": 400,
                                   "13": 7}, lost=5)]
        [s] = netlab.wire_series(samples, {"102", "111"})
        self.assertEqual(s["rtp_pps"], 150)
        self.assertEqual(s["rtx_pps"], 400)
        self.assertEqual(s["random_losses"], 5)
        self.assertEqual(s["sent_kbps"], 1000)
        self.assertEqual(s["received_kbps"], 500)
        self.assertEqual(s["queue_ms"], 100)
        self.assertEqual(s["qdisc_drops"], 10)


class TcpShare(unittest.TestCase):
    def test_call_keeps_the_rest(self):
        res = {"warmup_s": 0, "window_s": 3,
               "series": [{"t": float(t), "received_kbps": 1000.0}
                          for t in range(1, 4)]}
        lines = [(t / 10, str(int(t / 10 * 75000))) for t in range(0, 40)]
        netlab.tcp_share(res, lines, 0)
        self.assertAlmostEqual(res["tcp_kbps_median"], 600, delta=1)
        self.assertAlmostEqual(res["call_kbps_median"], 400, delta=1)


class DataMessages(unittest.TestCase):
    def test_latency_order_loss_and_repeats(self):
        sent = {i: i * 0.1 for i in range(10)}
        # 3 overtaken by 4, 7 never arrives, 5 twice
        arrived = [(0, 0.02), (1, 0.12), (2, 0.25), (4, 0.43), (3, 0.44),
                   (5, 0.52), (5, 0.6), (6, 0.62), (8, 1.0), (9, 1.2)]
        s = data.messages_summary(sent, arrived)
        self.assertEqual(s["messages_sent"], 10)
        self.assertEqual(s["messages_arrived"], 9)
        self.assertEqual(s["lost"], 1)
        self.assertEqual(s["out_of_order"], 1)
        self.assertEqual(s["duplicated"], 1)
        # 20 20 50 140 30 20 20 200 300 ms: the first arrival counts (5
        # took 20 ms, not 100)
        self.assertAlmostEqual(s["latency_ms_p50"], 30, delta=0.01)
        self.assertAlmostEqual(s["latency_ms_mean"], 800 / 9, delta=0.01)
        self.assertAlmostEqual(s["latency_ms_max"], 300, delta=0.01)

    def test_nothing_arrived(self):
        s = data.messages_summary({0: 0.0, 1: 0.1}, [])
        self.assertEqual(s["lost"], 2)
        self.assertIsNone(s["latency_ms_p95"])


if __name__ == "__main__":
    unittest.main()

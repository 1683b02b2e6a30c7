/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaBwe (docs/congestion-control.md) against simulated links
 * (bwe-sim.h): a bottleneck, a capacity step, random loss, a long round
 * trip, each also with jitter; and against hostile feedback. Simulated
 * time: each case runs in milliseconds, every seed fixed.
 */
#include "bwe-sim.h"

#include <stdlib.h>

#define MS ((gint64) 1000)
#define S ((gint64) 1000000)
#define JITTER_US (20 * MS)

static gboolean with_jitter;
static gboolean audio_untracked;

/* Every half second, with --verbose: the target and the queue. */
static void
trace (BweSim * s, const char *name)
{
  const GArray *samples = bwe_sim_get_samples (s);

  if (!g_test_verbose ())
    return;
  for (guint i = 0; i < samples->len; i += 50) {
    const BweSimSample *x = &g_array_index (samples, BweSimSample, i);

    g_printerr ("%s %5.1f s target %7u queue %4" G_GINT64_FORMAT " ms "
        "delay %7u loss %7u (%.3f) acked %7u %s %s trend %.1f/%.1f\n", name,
        x->t / (gdouble) S, x->target, x->queue_us / MS, x->state.delay_bps,
        x->state.loss_bps, x->state.loss_fraction, x->state.acked_bps,
        legba_bwe_usage_name (x->state.usage),
        legba_bwe_rate_state_name (x->state.rate_state),
        x->state.modified_trend, x->state.threshold);
  }
}

static BweSim *
sim_new_encoder (guint capacity, gdouble loss, gint64 one_way_us,
    gdouble encoder_share, gint64 encoder_lag_us)
{
  BweSimConfig c;

  bwe_sim_config_init (&c);
  c.capacity_bps = capacity;
  c.loss = loss;
  c.one_way_us = one_way_us;
  c.jitter_us = with_jitter ? JITTER_US : 0;
  c.encoder_share = encoder_share;
  c.encoder_lag_us = encoder_lag_us;
  c.audio_untracked = c.untracked_told = audio_untracked;
  c.seed = 42;
  return bwe_sim_new (&c);
}

static BweSim *
sim_new_full (guint capacity, gdouble loss, gint64 one_way_us,
    gdouble encoder_share)
{
  return sim_new_encoder (capacity, loss, one_way_us, encoder_share, 0);
}

static BweSim *
sim_new (guint capacity, gdouble loss, gint64 one_way_us)
{
  return sim_new_full (capacity, loss, one_way_us, 1.0);
}

/* A bottleneck of capacity, the user's ceiling at 2 Mbit/s: from 10 s on
 * the target's mean over each second stays within [low, 1.05] x capacity
 * (the target saws: overuse cuts it to 0.85 x the acknowledged bitrate,
 * and an encoder follows it over about a second), its mean over the last
 * 30 s of 60 is below the capacity, and so is the queue's p95 100 ms. */
static void
check_bottleneck_full (guint capacity, gdouble loss, gint64 one_way_us,
    gdouble low, gdouble high)
{
  g_autoptr (BweSim) s = sim_new (capacity, loss, one_way_us);
  guint min, max, mean;
  gint64 p95;

  bwe_sim_run (s, 60 * S);
  trace (s, "bottleneck");
  bwe_sim_target_range (s, 10 * S, 60 * S, &min, &max);
  mean = bwe_sim_target_mean (s, 30 * S, 60 * S);
  p95 = bwe_sim_queue_percentile (s, 30 * S, 60 * S, 0.95);
  g_test_message ("capacity %u: target %u..%u, mean %u, queue p95 %"
      G_GINT64_FORMAT " ms", capacity, min, max, mean, p95 / MS);
  g_assert_cmpuint (min, >=, low * capacity);
  g_assert_cmpuint (max, <=, high * capacity);
  g_assert_cmpuint (mean, <, capacity);
  g_assert_cmpint (p95, <=, 100 * MS);
}

static void
check_bottleneck (guint capacity, gdouble loss, gint64 one_way_us, gdouble low)
{
  check_bottleneck_full (capacity, loss, one_way_us, low, 1.05);
}

static void
test_1mbit (void)
{
  check_bottleneck (1000000, 0, 20 * MS, 0.8);
}

static void
test_300kbit (void)
{
  check_bottleneck (300000, 0, 20 * MS, 0.7);
}

/* 80 ms round trip and 2% loss */
static void
test_1mbit_loss_rtt (void)
{
  check_bottleneck (1000000, 0.02, 40 * MS, 0.8);
}

/* The audio carries no transport-wide sequence number (webrtcbin numbers
 * only the packets of a stream negotiated with the extension) and the
 * estimator is told its rate: the target still covers all that the link
 * carries, and holds the same band as when every packet is reported. At
 * 300 kbit/s the audio is a fifth of the link: a decrease to 0.85 times
 * the video alone would cut the target to two thirds of the link (0.68
 * there). The rate told is what was sent; while a queue grows the audio
 * arrives later than that, so a second's mean may pass the link by 6%. */
static void
test_300kbit_audio_untracked (void)
{
  audio_untracked = TRUE;
  check_bottleneck_full (300000, 0, 20 * MS, 0.7, 1.06);
  audio_untracked = FALSE;
}

static void
test_1mbit_audio_untracked (void)
{
  audio_untracked = TRUE;
  check_bottleneck_full (1000000, 0, 20 * MS, 0.8, 1.06);
  audio_untracked = FALSE;
}

/* Random loss below 10% on a link without a bottleneck is not
 * congestion: the target stays at 80% of the ceiling or more. */
static void
check_loss (gdouble loss)
{
  g_autoptr (BweSim) s = sim_new (0, loss, 20 * MS);
  guint min, max;

  bwe_sim_run (s, 60 * S);
  trace (s, "loss");
  bwe_sim_target_range (s, 15 * S, 60 * S, &min, &max);
  g_test_message ("loss %.0f%%: target from 15 s on >= %u", loss * 100, min);
  g_assert_cmpuint (min, >=, 0.8 * 2000000);
}

static void
test_loss3 (void)
{
  check_loss (0.03);
}

static void
test_loss5 (void)
{
  check_loss (0.05);
}

/* 2 Mbit/s, 500 kbit/s from 20 s to 40 s, 2 Mbit/s again: below
 * 500 kbit/s within 1 s of the drop (the lab's target is 2 s; Chromium's
 * sender took 1 s), the queue under 100 ms within 3 s, and 1.6 Mbit/s or
 * more within 10 s of the restore. */
static void
check_step_seed (gdouble encoder_share, gint64 encoder_lag_us, gboolean pads,
    gint64 back_within_us, guint32 seed)
{
  g_autoptr (BweSim) s = NULL;
  BweSimConfig c;
  gint64 below, drained, back, dip_p95;

  bwe_sim_config_init (&c);
  c.capacity_bps = 2000000;
  c.one_way_us = 20 * MS;
  c.jitter_us = with_jitter ? JITTER_US : 0;
  c.encoder_share = encoder_share;
  c.encoder_lag_us = encoder_lag_us;
  c.audio_untracked = c.untracked_told = audio_untracked;
  c.pads = pads;
  c.seed = seed;
  s = bwe_sim_new (&c);

  bwe_sim_run (s, 20 * S);
  bwe_sim_set_capacity (s, 500000);
  bwe_sim_run (s, 40 * S);
  bwe_sim_set_capacity (s, 2000000);
  bwe_sim_run (s, 60 * S);
  trace (s, "step");
  below = bwe_sim_first_target_below (s, 20 * S, 500000) - 20 * S;
  drained = bwe_sim_first_queue_below (s, 20 * S + 500 * MS, 100 * MS) - 20 * S;
  back = bwe_sim_first_target_above (s, 40 * S, 1600000) - 40 * S;
  dip_p95 = bwe_sim_queue_percentile (s, 23 * S, 40 * S, 0.95);
  g_test_message ("step (encoder %.2f, lag %" G_GINT64_FORMAT
      " ms%s, seed %u): below 500k after %" G_GINT64_FORMAT
      " ms, queue under 100 ms after %" G_GINT64_FORMAT " ms, the dip's p95 %"
      G_GINT64_FORMAT " ms, 1.6M after %" G_GINT64_FORMAT " ms",
      encoder_share, encoder_lag_us / MS, pads ? ", padded" : "", seed,
      below / MS, drained / MS, dip_p95 / MS, back / MS);
  g_assert_cmpint (below, >=, 0);
  g_assert_cmpint (below, <=, 1 * S);
  g_assert_cmpint (drained, >=, 0);
  g_assert_cmpint (drained, <=, 3 * S);
  g_assert_cmpint (dip_p95, <=, 100 * MS);
  g_assert_cmpint (back, >=, 0);
  g_assert_cmpint (back, <=, back_within_us);
}

static void
check_step_full (gdouble encoder_share, gint64 encoder_lag_us, gboolean pads,
    gint64 back_within_us)
{
  check_step_seed (encoder_share, encoder_lag_us, pads, back_within_us, 42);
}

static void
check_step (gdouble encoder_share, gint64 encoder_lag_us)
{
  check_step_full (encoder_share, encoder_lag_us, FALSE, 10 * S);
}

static void
test_step (void)
{
  check_step (1.0, 0);
}

/* The same with an encoder that makes 80% of its target, as x264 does of
 * a quiet picture at low rates: a queue-free link is still let to grow
 * (the rate is not held to what such an encoder delivers). */
static void
test_step_encoder_under (void)
{
  check_step (0.8, 0);
}

/* The same with that encoder following its target a second late, as
 * x264's rate control does in the lab (its bitrate a second after the
 * target moved): the acknowledged bitrate lags the target more, and so
 * does the sign that the link has grown back. */
static void
test_step_encoder_lag (void)
{
  check_step (0.8, 1 * S);
}

/* The same lagging encoder with a sender that pads up to what the
 * estimator asks while the link may have grown back (legba_bwe_probe(),
 * as LegbaPeerSender does): the link is tested over the dip's capacity,
 * not at the 80% of the rate the encoder makes, and the restore is seen
 * sooner: 1.6 Mbit/s within 8 s (4.2 s, 4.2 with jitter; 8.0 and 6.9
 * unpadded), the dip's queue no longer. */
static void
test_step_encoder_lag_padded (void)
{
  check_step_full (0.8, 1 * S, TRUE, 8 * S);
}

/* The same, jittered, over forty seeds: each is back within 7 s (4.8 s
 * on average, 6.1 at most). A sign of growth that noise gives in the dip
 * (the dip's capacity estimate lags the link) starts a recovery that
 * soon meets the dip's link again; that recovery must not cost the link's
 * past, or the real restore climbs from the dip without it (11.7 s). */
static void
test_step_seeds (void)
{
  for (guint32 seed = 1; seed <= 40; seed++)
    check_step_seed (0.8, 1 * S, TRUE, 7 * S, seed);
}

/* The receiver stops reporting for 10 s on a 1 Mbit/s link: the target
 * holds, then falls, and says why; once reports come again it is back to
 * 80% of the link within 10 s, without a queue over 100 ms. */
static void
test_feedback_gap (void)
{
  g_autoptr (BweSim) s = sim_new (1000000, 0, 20 * MS);
  LegbaBweState st;
  guint min, max;

  bwe_sim_run (s, 20 * S);
  bwe_sim_set_feedback (s, FALSE);
  bwe_sim_run (s, 30 * S);
  legba_bwe_get_state (bwe_sim_get_bwe (s), &st);
  g_assert_true (st.feedback_missing);
  g_assert_cmpuint (st.target_bps, <, 400000);
  bwe_sim_set_feedback (s, TRUE);
  bwe_sim_run (s, 45 * S);
  trace (s, "gap");
  legba_bwe_get_state (bwe_sim_get_bwe (s), &st);
  g_assert_false (st.feedback_missing);
  bwe_sim_target_range (s, 40 * S, 45 * S, &min, &max);
  g_test_message ("after the gap: target %u..%u", min, max);
  g_assert_cmpuint (min, >=, 800000);
  g_assert_cmpint (bwe_sim_queue_percentile (s, 30 * S, 45 * S, 1.0), <=,
      100 * MS);
}

/* The user's ceiling moves: the target follows it down at once, and back
 * up. */
/* A bulk TCP flow shares the 1 Mbit/s bottleneck and its 200 ms queue
 * from 5 s on: what the link delivered of the call from 20 s to 60 s. */
static guint
beside_tcp (BweSimTcp tcp, guint32 seed)
{
  g_autoptr (BweSim) s = NULL;
  BweSimConfig c;
  guint call, tcp_bps;

  bwe_sim_config_init (&c);
  c.capacity_bps = 1000000;
  c.jitter_us = with_jitter ? JITTER_US : 0;
  c.audio_untracked = c.untracked_told = audio_untracked;
  c.tcp = tcp;
  c.tcp_from_us = 5 * S;
  c.seed = seed;
  s = bwe_sim_new (&c);
  bwe_sim_run (s, 60 * S);
  trace (s, "tcp");
  bwe_sim_delivered (s, 20 * S, 60 * S, &call, &tcp_bps);
  g_test_message ("beside TCP (%s), seed %u: the call %u bit/s (target "
      "%u), TCP %u", tcp == BWE_SIM_TCP_BBR ? "BBR" : "Reno", seed, call,
      bwe_sim_target_mean (s, 20 * S, 60 * S), tcp_bps);
  return call;
}

/* Reno halves its window on loss, and its queue saws between half full
 * and full: the trend sees it grow each time, and the call keeps what
 * plain GCC keeps, about a tenth of the link (the floor is 50 kbit/s). */
static void
test_beside_reno (void)
{
  g_assert_cmpuint (beside_tcp (BWE_SIM_TCP_RENO, 42), >=, 80000);
}

static gint
compare_uint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

/* BBR keeps a queue standing and drains it every 10 s: the standing queue
 * rule, taught the base again by each drain, must not take the queue
 * BBR refills for ours. The share either way depends on who holds the
 * queue when BBR measures its round trip (a seed gives the call 15% of
 * the link or 70%), so over 41 seeds: the call's median at least 25% of
 * the link (32%, 49% with jitter; each decrease the rule made until it
 * gave up after 3 s: 14%, 20%). */
static void
test_beside_bbr (void)
{
  guint calls[41];

  for (guint i = 0; i < G_N_ELEMENTS (calls); i++)
    calls[i] = beside_tcp (BWE_SIM_TCP_BBR, i + 1);
  qsort (calls, G_N_ELEMENTS (calls), sizeof calls[0], compare_uint);
  g_test_message ("beside BBR: the call's median %u bit/s",
      calls[G_N_ELEMENTS (calls) / 2]);
  g_assert_cmpuint (calls[G_N_ELEMENTS (calls) / 2], >=, 250000);
}

static void
test_set_max (void)
{
  g_autoptr (BweSim) s = sim_new (0, 0, 20 * MS);
  LegbaBwe *bwe = bwe_sim_get_bwe (s);
  guint min, max;

  bwe_sim_run (s, 20 * S);
  g_assert_cmpuint (legba_bwe_target (bwe), ==, 2000000);
  legba_bwe_set_max (bwe, 700000);
  g_assert_cmpuint (legba_bwe_target (bwe), ==, 700000);
  bwe_sim_run (s, 25 * S);
  bwe_sim_target_range (s, 20 * S, 25 * S, &min, &max);
  g_assert_cmpuint (max, ==, 700000);
  legba_bwe_set_max (bwe, 10);
  g_assert_cmpuint (legba_bwe_target (bwe), ==, 50000);
  legba_bwe_set_max (bwe, 2000000);
  bwe_sim_run (s, 45 * S);
  g_assert_cmpuint (legba_bwe_target (bwe), ==, 2000000);
}

static void
run_jittered (gconstpointer data)
{
  GTestFunc func = (GTestFunc) data;

  with_jitter = TRUE;
  func ();
  with_jitter = FALSE;
}

static void
add_sim (const char *path, GTestFunc func)
{
  g_autofree char *jittered = g_strconcat (path, "-jitter", NULL);

  g_test_add_func (path, func);
  g_test_add_data_func (jittered, (gconstpointer) func, run_jittered);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  add_sim ("/bwe/sim/1mbit", test_1mbit);
  add_sim ("/bwe/sim/300kbit", test_300kbit);
  add_sim ("/bwe/sim/1mbit-loss-rtt", test_1mbit_loss_rtt);
  add_sim ("/bwe/sim/300kbit-audio-untracked", test_300kbit_audio_untracked);
  add_sim ("/bwe/sim/1mbit-audio-untracked", test_1mbit_audio_untracked);
  add_sim ("/bwe/sim/loss3", test_loss3);
  add_sim ("/bwe/sim/loss5", test_loss5);
  add_sim ("/bwe/sim/step", test_step);
  add_sim ("/bwe/sim/step-encoder-under", test_step_encoder_under);
  add_sim ("/bwe/sim/step-encoder-lag", test_step_encoder_lag);
  add_sim ("/bwe/sim/step-encoder-lag-padded", test_step_encoder_lag_padded);
  g_test_add_data_func ("/bwe/sim/step-seeds-jitter",
      (gconstpointer) test_step_seeds, run_jittered);
  add_sim ("/bwe/sim/feedback-gap", test_feedback_gap);
  add_sim ("/bwe/sim/beside-reno", test_beside_reno);
  add_sim ("/bwe/sim/beside-bbr", test_beside_bbr);
  g_test_add_func ("/bwe/sim/set-max", test_set_max);
  return g_test_run ();
}

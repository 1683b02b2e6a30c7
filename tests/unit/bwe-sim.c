/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The simulated call of bwe-sim.h.
 */
#include "bwe-sim.h"

#define MS ((gint64) 1000)
#define STEP_US MS
#define FPS 30
#define MAX_PAYLOAD 1200
#define AUDIO_BYTES 120
#define AUDIO_INTERVAL_US (20 * MS)
/* IP, UDP and SRTP around each RTP packet: counted in the sizes the
 * estimator is given, as it is on the link */
#define OVERHEAD 40
#define AUDIO_LINK_BPS ((AUDIO_BYTES + OVERHEAD) * 8 * 50)
#define PACING 2.5
#define TICK_US (50 * MS)
#define RTT_US (1000 * MS)
#define SAMPLE_US (10 * MS)
/* the receiver's clock is this far ahead of the sender's */
#define RECEIVER_OFFSET_US ((gint64) 987654321)
#define FIRST_SEQ 65000
/* the TCP flow: segments of 1,460 bytes (1,500 on the link), an initial
 * window of 10 */
#define TCP_BYTES 1460
#define TCP_LINK_BITS ((TCP_BYTES + OVERHEAD) * 8.0)
#define TCP_INITIAL_WINDOW 10.0
#define TCP_MIN_WINDOW 2.0
/* BBR (v1's parameters as Linux has them; startup goes straight to the
 * gain cycle, without the drain phase): its startup gain, its window
 * twice the rate times the lowest round trip and 3 segments, the
 * bandwidth filter over 10 rounds, the lowest round trip measured again
 * every 10 s with 4 segments in flight for 200 ms, the gains it paces at
 * in turn, a round trip each, and its rate before any measure (its
 * initial window over 100 ms) */
#define BBR_HIGH_GAIN 2.885
#define BBR_CWND_GAIN 2.0
#define BBR_EXTRA_SEGMENTS 3.0
#define BBR_MIN_WINDOW 4.0
#define BBR_BW_ROUNDS 10
#define BBR_RTT_EXPIRY_US (10000 * MS)
#define BBR_PROBE_RTT_US (200 * MS)
#define BBR_PHASES 8
static const gdouble bbr_gains[BBR_PHASES] = { 1.25, 0.75, 1, 1, 1, 1, 1, 1 };

#define BBR_INITIAL_BPS (TCP_INITIAL_WINDOW * TCP_LINK_BITS * 10)

typedef struct
{
  gint64 send_us;
  gint64 arrival_us;            /* sim time, -1 until delivered */
  guint size;
  gint twcc;                    /* the transport-wide index, -1: none */
  gboolean tcp;                 /* the TCP flow's */
  guint64 delivered;            /* the TCP flow's bytes acknowledged when
                                 * it was sent, and when the last of them
                                 * was */
  gint64 delivered_at;
} Sent;

typedef struct
{
  guint index;                  /* into sent */
  gint64 at;                    /* when it reaches the next stage */
  guint bits_left;              /* in the bottleneck, of the head */
} Hop;

typedef struct
{
  gint64 at;
  GArray *packets;              /* LegbaBwePacket */
} Report;

struct _BweSim
{
  BweSimConfig c;
  LegbaBwe *bwe;
  GRand *rand;
  gint64 now;
  gboolean feedback_on;

  GArray *sent;                 /* Sent, in sending order */
  gint next_twcc;
  GQueue pacer;                 /* guint index */
  gdouble budget;               /* pacer, bytes */
  GQueue queue;                 /* Hop, the bottleneck */
  guint64 queue_bits;
  gint64 link_clock;
  GQueue flight;                /* Hop, past the bottleneck */
  gint64 last_delivery;
  guint next_report;            /* first index not yet reported */
  guint highest_arrived;
  gboolean any_arrived;
  GQueue reports;               /* Report, on the way back */
  GArray *samples;              /* BweSimSample */
  gdouble encoder_bps;          /* the target as the encoder follows it */
  guint64 call_bytes;           /* delivered */
  guint64 tcp_bytes;

  /* the TCP flow: its window and slow start threshold in segments,
   * segments in flight, the acknowledgement of each delivered segment and
   * the duplicate acknowledgements that tell each lost one (TcpEvent, in
   * the order they reach it), the end of a loss recovery (within which
   * another loss does not halve the window again); BBR's lowest round
   * trip, when it was measured, and the end of its drain */
  gdouble cwnd;
  gdouble ssthresh;
  guint inflight;
  GQueue acks;
  GQueue losses;
  gint64 recover_until;
  guint64 delivered;
  gint64 delivered_at;
  /* BBR: the highest delivery rate of each of the last rounds, the
   * current round's end (the bytes delivered when it ends) and count,
   * startup (and the rate it last grew from, and the rounds since), the
   * lowest round trip and when it was measured, the end of the drain that
   * measures it, the pacing gain's phase and its start, the pacer's
   * budget */
  gdouble bw[BBR_BW_ROUNDS];
  guint64 round_end;
  guint round;
  gboolean startup;
  gdouble full_bw;
  guint full_bw_rounds;
  gint64 min_rtt;
  gint64 min_rtt_at;
  gint64 probe_rtt_until;
  guint phase;
  gint64 phase_start;
  gdouble tcp_budget;
};

typedef struct
{
  gint64 at;                    /* when it reaches the TCP sender */
  gint64 send_us;               /* the segment's */
  guint64 delivered;
  gint64 delivered_at;
} TcpEvent;

void
bwe_sim_config_init (BweSimConfig * c)
{
  *c = (BweSimConfig) {
    .capacity_bps = 0,.queue_us = 200 * MS,.one_way_us = 20 * MS,.feedback_us =
        100 * MS,.encoder_share = 1.0,.seed = 1,.bwe = {
      50000, 300000, 2000000
    }
  };
}

BweSim *
bwe_sim_new (const BweSimConfig * c)
{
  BweSim *s = g_new0 (BweSim, 1);

  s->c = *c;
  s->bwe = legba_bwe_new (&c->bwe);
  s->rand = g_rand_new_with_seed (c->seed);
  s->feedback_on = TRUE;
  s->sent = g_array_new (FALSE, TRUE, sizeof (Sent));
  s->samples = g_array_new (FALSE, FALSE, sizeof (BweSimSample));
  g_queue_init (&s->pacer);
  g_queue_init (&s->queue);
  g_queue_init (&s->flight);
  g_queue_init (&s->reports);
  g_queue_init (&s->acks);
  g_queue_init (&s->losses);
  s->cwnd = TCP_INITIAL_WINDOW;
  s->ssthresh = G_MAXDOUBLE;
  s->startup = TRUE;
  return s;
}

static void
report_free (gpointer data)
{
  Report *r = data;

  g_array_unref (r->packets);
  g_free (r);
}

void
bwe_sim_free (BweSim * s)
{
  legba_bwe_free (s->bwe);
  g_rand_free (s->rand);
  g_array_unref (s->sent);
  g_array_unref (s->samples);
  g_queue_clear (&s->pacer);
  g_queue_clear_full (&s->queue, g_free);
  g_queue_clear_full (&s->flight, g_free);
  g_queue_clear_full (&s->reports, report_free);
  g_queue_clear_full (&s->acks, g_free);
  g_queue_clear_full (&s->losses, g_free);
  g_free (s);
}

void
bwe_sim_set_capacity (BweSim * s, guint bps)
{
  s->c.capacity_bps = bps;
}

void
bwe_sim_set_feedback (BweSim * s, gboolean on)
{
  s->feedback_on = on;
}

LegbaBwe *
bwe_sim_get_bwe (BweSim * s)
{
  return s->bwe;
}

const GArray *
bwe_sim_get_samples (BweSim * s)
{
  return s->samples;
}

static void
encode (BweSim * s, guint bytes, gboolean tracked)
{
  guint n = (bytes + MAX_PAYLOAD - 1) / MAX_PAYLOAD;

  for (guint i = 0; i < n; i++) {
    Sent p = {.arrival_us = -1,.size = bytes / n,.twcc = -1 };

    if (tracked)
      p.twcc = s->next_twcc++;

    g_array_append_val (s->sent, p);
    g_queue_push_tail (&s->pacer, GUINT_TO_POINTER (s->sent->len - 1));
  }
}

/* Media for this step: a video frame of the target's size (less the
 * audio and the overhead, give or take 15%, times the encoder's share;
 * the target as the encoder follows it) and an audio packet when due. */
static void
produce (BweSim * s)
{
  gdouble target = legba_bwe_target (s->bwe);

  if (s->c.encoder_lag_us > 0) {
    if (s->now == 0)
      s->encoder_bps = target;
    s->encoder_bps += (target - s->encoder_bps) * STEP_US /
        (gdouble) s->c.encoder_lag_us;
    target = s->encoder_bps;
  }

  if (s->now % AUDIO_INTERVAL_US == 0)
    encode (s, AUDIO_BYTES, !s->c.audio_untracked);
  if (s->now * FPS / G_USEC_PER_SEC != (s->now - STEP_US) * FPS /
      G_USEC_PER_SEC || s->now == 0) {
    gdouble video = MAX (target - AUDIO_LINK_BPS, 20000) / FPS / 8
        * MAX_PAYLOAD / (MAX_PAYLOAD + OVERHEAD) * s->c.encoder_share;

    guint frame = video * g_rand_double_range (s->rand, 0.85, 1.15);
    guint probe = s->c.pads ? legba_bwe_probe (s->bwe) : 0;

    encode (s, frame, TRUE);
    /* padding up to what the estimator asks the link to carry */
    if (probe > 0) {
      gdouble pad = (gdouble) (probe - MIN (probe, AUDIO_LINK_BPS)) / FPS / 8
          * MAX_PAYLOAD / (MAX_PAYLOAD + OVERHEAD) - frame;

      if (pad >= 1)
        encode (s, (guint) pad, TRUE);
    }
  }
}

static void
depart (BweSim * s, Hop * h, gint64 at)
{
  gint64 jitter = s->c.jitter_us > 0 ?
      g_rand_int_range (s->rand, 0, s->c.jitter_us + 1) : 0;

  h->bits_left = 0;
  h->at = MAX (s->last_delivery, at + s->c.one_way_us + jitter);
  s->last_delivery = h->at;
  g_queue_push_tail (&s->flight, h);
}

static gint64
queue_delay (BweSim * s)
{
  return s->c.capacity_bps ? (gint64) (s->queue_bits * G_USEC_PER_SEC /
      s->c.capacity_bps) : 0;
}

/* Returns FALSE when the packet is lost on the way in or dropped by the
 * full queue. */
static gboolean
enqueue (BweSim * s, guint index)
{
  Sent *p = &g_array_index (s->sent, Sent, index);
  guint bits = (p->size + OVERHEAD) * 8;
  Hop *h;

  if (g_rand_double (s->rand) < s->c.loss)
    return FALSE;
  if (s->c.capacity_bps > 0 && (s->queue_bits + bits) * G_USEC_PER_SEC >
      (guint64) s->c.capacity_bps * s->c.queue_us)
    return FALSE;
  h = g_new0 (Hop, 1);
  h->index = index;
  h->at = s->now;
  h->bits_left = bits;
  if (s->c.capacity_bps == 0) {
    depart (s, h, s->now);
    return TRUE;
  }
  g_queue_push_tail (&s->queue, h);
  s->queue_bits += bits;
  return TRUE;
}

static void
push_event (GQueue * q, gint64 at, const Sent * p)
{
  TcpEvent *e = g_new (TcpEvent, 1);

  e->at = at;
  e->send_us = p->send_us;
  e->delivered = p->delivered;
  e->delivered_at = p->delivered_at;
  g_queue_push_tail (q, e);
}

/* Takes the head of q into *e if it is due. */
static gboolean
pop_due (BweSim * s, GQueue * q, TcpEvent * e)
{
  TcpEvent *head = g_queue_peek_head (q);

  if (head == NULL || head->at > s->now)
    return FALSE;
  *e = *head;
  g_free (g_queue_pop_head (q));
  return TRUE;
}

static gdouble
bbr_bw (const BweSim * s)
{
  gdouble bw = 0;

  for (guint i = 0; i < BBR_BW_ROUNDS; i++)
    bw = MAX (bw, s->bw[i]);
  return bw > 0 ? bw : BBR_INITIAL_BPS;
}

/* BBR takes an acknowledgement: the delivery rate since the segment was
 * sent, the rounds, the end of startup, the lowest round trip (and, when
 * it is 10 s old, a drain to measure it again). */
static void
bbr_ack (BweSim * s, const TcpEvent * e)
{
  gint64 rtt = e->at - e->send_us, interval = s->now - e->delivered_at;

  if (interval > 0) {
    gdouble rate = (s->delivered - e->delivered) * 8.0 * G_USEC_PER_SEC /
        interval;

    s->bw[s->round % BBR_BW_ROUNDS] = MAX (s->bw[s->round % BBR_BW_ROUNDS],
        rate);
  }
  if (e->delivered >= s->round_end) {
    s->round_end = s->delivered;
    s->round++;
    s->bw[s->round % BBR_BW_ROUNDS] = 0;
    if (s->startup) {
      if (bbr_bw (s) >= 1.25 * s->full_bw) {
        s->full_bw = bbr_bw (s);
        s->full_bw_rounds = 0;
      } else if (++s->full_bw_rounds >= 3) {
        s->startup = FALSE;
        s->phase = 1;
        s->phase_start = s->now;
      }
    }
  }
  if (s->min_rtt == 0 || rtt <= s->min_rtt ||
      s->now - s->min_rtt_at > BBR_RTT_EXPIRY_US) {
    if (s->min_rtt > 0 && s->now - s->min_rtt_at > BBR_RTT_EXPIRY_US &&
        s->now >= s->probe_rtt_until)
      s->probe_rtt_until = s->now + BBR_PROBE_RTT_US;
    s->min_rtt = rtt;
    s->min_rtt_at = s->now;
  }
}

/* BBR's window, and the gain it paces at now. */
static gdouble
bbr_window (BweSim * s, gdouble * gain)
{
  gdouble bdp = bbr_bw (s) * s->min_rtt / G_USEC_PER_SEC / TCP_LINK_BITS;

  if (s->startup) {
    *gain = BBR_HIGH_GAIN;
    return s->min_rtt ? MAX (TCP_INITIAL_WINDOW, BBR_HIGH_GAIN * bdp) :
        TCP_INITIAL_WINDOW;
  }
  if (s->now < s->probe_rtt_until) {
    *gain = 1;
    return BBR_MIN_WINDOW;
  }
  if (s->now - s->phase_start >= MAX (s->min_rtt, MS)) {
    s->phase = (s->phase + 1) % BBR_PHASES;
    s->phase_start = s->now;
  }
  *gain = bbr_gains[s->phase];
  return MAX (BBR_MIN_WINDOW, BBR_CWND_GAIN * bdp + BBR_EXTRA_SEGMENTS);
}

/* The TCP flow, which always has data: Reno's window (slow start, then a
 * segment more each round trip, halved at most once a round trip on
 * loss, which the duplicate acknowledgements of the segments after it
 * tell a round trip later), kept full; or BBR's, paced at its gain times
 * the highest delivery rate it measured. */
static void
tcp_step (BweSim * s)
{
  TcpEvent e;
  gdouble window, gain = 0;

  if (s->c.tcp == BWE_SIM_TCP_NONE || s->now < s->c.tcp_from_us)
    return;
  while (pop_due (s, &s->acks, &e)) {
    s->inflight--;
    s->delivered += TCP_BYTES + OVERHEAD;
    s->delivered_at = s->now;
    if (s->c.tcp == BWE_SIM_TCP_BBR)
      bbr_ack (s, &e);
    else
      s->cwnd += s->cwnd < s->ssthresh ? 1 : 1 / s->cwnd;
  }
  while (pop_due (s, &s->losses, &e)) {
    s->inflight--;
    if (s->c.tcp == BWE_SIM_TCP_RENO && s->now >= s->recover_until) {
      s->ssthresh = s->cwnd = MAX (s->cwnd / 2, TCP_MIN_WINDOW);
      s->recover_until = s->now + 2 * s->c.one_way_us + queue_delay (s);
    }
  }
  window = s->cwnd;
  if (s->c.tcp == BWE_SIM_TCP_BBR) {
    window = bbr_window (s, &gain);
    s->tcp_budget = MIN (s->tcp_budget + gain * bbr_bw (s) / 8 * STEP_US /
        G_USEC_PER_SEC, 2 * (TCP_BYTES + OVERHEAD));
  }
  while (s->inflight < window && (gain == 0 || s->tcp_budget > 0)) {
    Sent p = {.send_us = s->now,.arrival_us = -1,.size = TCP_BYTES,
      .twcc = -1,.tcp = TRUE,.delivered = s->delivered,
      .delivered_at = s->delivered_at ? s->delivered_at : s->now
    };

    g_array_append_val (s->sent, p);
    s->inflight++;
    s->tcp_budget -= TCP_BYTES + OVERHEAD;
    if (!enqueue (s, s->sent->len - 1))
      push_event (&s->losses, s->now + 2 * s->c.one_way_us +
          queue_delay (s), &p);
  }
}

/* The pacer sends at PACING times the target. */
static void
pace (BweSim * s)
{
  s->budget += PACING * legba_bwe_target (s->bwe) / 8.0 * STEP_US /
      G_USEC_PER_SEC;
  s->budget = MIN (s->budget, MAX_PAYLOAD);
  while (s->budget > 0 && !g_queue_is_empty (&s->pacer)) {
    guint index = GPOINTER_TO_UINT (g_queue_pop_head (&s->pacer));
    Sent *p = &g_array_index (s->sent, Sent, index);

    p->send_us = s->now;
    s->budget -= p->size;
    enqueue (s, index);
  }
  if (g_queue_is_empty (&s->pacer))
    s->budget = MIN (s->budget, 0);
}

/* The bottleneck serves its queue until the end of this step. */
static void
serve (BweSim * s)
{
  gint64 end = s->now + STEP_US;
  Hop *h;

  if (s->c.capacity_bps == 0)
    return;
  s->link_clock = MAX (s->link_clock, s->now);
  while ((h = g_queue_peek_head (&s->queue)) != NULL) {
    gint64 need = (gint64) h->bits_left * G_USEC_PER_SEC / s->c.capacity_bps;

    if (s->link_clock + need > end) {
      guint served = (end - s->link_clock) * s->c.capacity_bps / G_USEC_PER_SEC;

      h->bits_left -= served;
      s->queue_bits -= served;
      s->link_clock = end;
      return;
    }
    s->link_clock += need;
    s->queue_bits -= (guint64) (h->bits_left);
    g_queue_pop_head (&s->queue);
    depart (s, h, s->link_clock);
  }
}

/* Delivery, and the receiver's feedback every interval. */
static void
receive (BweSim * s)
{
  Hop *h;

  while ((h = g_queue_peek_head (&s->flight)) != NULL && h->at <= s->now) {
    Sent *p = &g_array_index (s->sent, Sent, h->index);

    p->arrival_us = h->at;
    if (p->tcp) {
      s->tcp_bytes += p->size + OVERHEAD;
      push_event (&s->acks, h->at + s->c.one_way_us, p);
      g_free (g_queue_pop_head (&s->flight));
      continue;
    }
    s->call_bytes += p->size + OVERHEAD;
    s->highest_arrived = h->index;
    s->any_arrived = TRUE;
    g_free (g_queue_pop_head (&s->flight));
  }
  if (!s->feedback_on || !s->any_arrived || s->now % s->c.feedback_us != 0 ||
      s->next_report > s->highest_arrived)
    return;
  {
    Report *r = g_new0 (Report, 1);

    r->packets = g_array_new (FALSE, FALSE, sizeof (LegbaBwePacket));
    for (; s->next_report <= s->highest_arrived; s->next_report++) {
      Sent *p = &g_array_index (s->sent, Sent, s->next_report);
      LegbaBwePacket fb = {.seq = (FIRST_SEQ + p->twcc) & 0xffff,
        .send_us = p->send_us,.size = p->size + OVERHEAD,
        .arrival_us = p->arrival_us < 0 ? LEGBA_BWE_LOST :
            p->arrival_us + RECEIVER_OFFSET_US
      };
      if (p->twcc >= 0)
        g_array_append_val (r->packets, fb);
    }
    r->at = s->now + s->c.one_way_us;
    if (g_rand_double (s->rand) < s->c.loss)
      report_free (r);
    else
      g_queue_push_tail (&s->reports, r);
  }
}

static void
sender_events (BweSim * s)
{
  Report *r;

  while ((r = g_queue_peek_head (&s->reports)) != NULL && r->at <= s->now) {
    g_queue_pop_head (&s->reports);
    legba_bwe_on_feedback (s->bwe, (const LegbaBwePacket *) r->packets->data,
        r->packets->len, s->now);
    report_free (r);
  }
  if (s->c.audio_untracked && s->c.untracked_told)
    legba_bwe_set_untracked (s->bwe, AUDIO_LINK_BPS);
  if (s->now % TICK_US == 0)
    legba_bwe_on_tick (s->bwe, s->now);
  if (s->now % RTT_US == 0 && s->now > 0)
    legba_bwe_on_rtt (s->bwe, 2 * s->c.one_way_us + queue_delay (s), s->now);
}

static void
sample (BweSim * s)
{
  BweSimSample x = {.t = s->now,.target = legba_bwe_target (s->bwe),
    .queue_us = queue_delay (s),.call_bytes = s->call_bytes,
    .tcp_bytes = s->tcp_bytes
  };

  legba_bwe_get_state (s->bwe, &x.state);
  g_array_append_val (s->samples, x);
}

void
bwe_sim_run (BweSim * s, gint64 until_us)
{
  for (; s->now < until_us; s->now += STEP_US) {
    produce (s);
    pace (s);
    tcp_step (s);
    serve (s);
    receive (s);
    sender_events (s);
    if (s->now % SAMPLE_US == 0)
      sample (s);
  }
}

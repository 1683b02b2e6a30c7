/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The network lab's delay line (docs/benchmarks.md, "Network lab"): a wire
 * between two TUN devices of the lab's router namespace. What the router
 * routes into one device comes out of the other after a one-way delay,
 * plus a jitter, in both directions; packets going from the first device
 * to the second are dropped at random with a given probability. This
 * kernel has no netem, so delay, jitter and random loss are done here.
 *
 *   delayline --dev-a TUN --dev-b TUN [--delay MS] [--jitter MS]
 *             [--loss PERCENT] [--limit PACKETS] [--reorder] [--seed N]
 *
 * Each packet is held for DELAY plus a uniform draw in [-JITTER, JITTER]
 * ms (never less than zero); without --reorder a packet never leaves
 * before the one that came in before it on the same device, so jitter
 * delays without reordering. A direction holds at most LIMIT packets; a
 * packet arriving at a full direction is dropped and counted.
 *
 * Every second, and once more at SIGINT/SIGTERM, one JSON line on standard
 * output with the counts since the start, per direction ("ab": from
 * dev-a to dev-b, "ba" the other way): packets in, forwarded, dropped
 * (random loss, full queue, refused by the device), the bytes forwarded,
 * the packets held, and the RTP packets forwarded by payload type and
 * RTCP packets (UDP payloads that look like RTP/RTCP version 2), so that
 * a run can tell retransmissions (their own payload type) from media.
 */
#include <glib.h>
#include <glib-unix.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PACKET_MAX 65536
#define RTP_PAYLOAD_TYPES 128

typedef struct
{
  gint64 release;               /* monotonic time, us */
  gsize size;
  guint8 data[];
} Packet;

typedef struct
{
  const char *name;
  int in_fd;
  int out_fd;
  gdouble loss;                 /* probability, first direction only */
  GQueue queue;                 /* of Packet, in release order */
  gint64 last_release;
  guint64 in, forwarded, bytes, lost, overflow, refused;
  guint64 rtp[RTP_PAYLOAD_TYPES];
  guint64 rtcp;
} Direction;

typedef struct
{
  Direction dir[2];
  gint64 delay;                 /* us */
  gint64 jitter;                /* us */
  guint limit;
  gboolean reorder;
  GRand *rand;
  GSource *timer;
  GMainLoop *loop;
  gint64 start;
} Line;

static int
tun_open (const char *name, GError ** error)
{
  struct ifreq ifr;
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);

  if (fd < 0) {
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
        "/dev/net/tun: %s", g_strerror (errno));
    return -1;
  }
  memset (&ifr, 0, sizeof (ifr));
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  g_strlcpy (ifr.ifr_name, name, IFNAMSIZ);
  if (ioctl (fd, TUNSETIFF, &ifr) < 0) {
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
        "TUN device %s: %s", name, g_strerror (errno));
    close (fd);
    return -1;
  }
  return fd;
}

/* RTP (RFC 3550 5.1) or RTCP (RFC 5761 4: payload types 192-223) in an
 * IPv4 UDP datagram; STUN and DTLS begin otherwise (RFC 7983). */
static void
count_rtp (Direction * d, const guint8 * p, gsize size)
{
  gsize ihl;
  const guint8 *rtp;

  if (size < 20 || (p[0] >> 4) != 4 || p[9] != 17)
    return;
  ihl = (p[0] & 0x0f) * 4;
  if (size < ihl + 8 + 12)
    return;
  rtp = p + ihl + 8;
  if ((rtp[0] >> 6) != 2)
    return;
  if (rtp[1] >= 192 && rtp[1] <= 223)
    d->rtcp++;
  else
    d->rtp[rtp[1] & 0x7f]++;
}

static void
arm_timer (Line * line)
{
  gint64 next = -1;

  for (guint i = 0; i < 2; i++) {
    Packet *head = g_queue_peek_head (&line->dir[i].queue);

    if (head && (next < 0 || head->release < next))
      next = head->release;
  }
  g_source_set_ready_time (line->timer, next);
}

static void
release_due (Line * line)
{
  gint64 now = g_get_monotonic_time ();

  for (guint i = 0; i < 2; i++) {
    Direction *d = &line->dir[i];
    Packet *head;

    while ((head = g_queue_peek_head (&d->queue)) && head->release <= now) {
      g_queue_pop_head (&d->queue);
      if (write (d->out_fd, head->data, head->size) == (gssize) head->size) {
        d->forwarded++;
        d->bytes += head->size;
        count_rtp (d, head->data, head->size);
      } else {
        d->refused++;
      }
      g_free (head);
    }
  }
  arm_timer (line);
}

static gint64
release_time (Line * line, Direction * d, gint64 now)
{
  gint64 hold = line->delay;

  if (line->jitter > 0)
    hold += g_rand_int_range (line->rand, 0, 2 * line->jitter + 1)
        - line->jitter;
  if (hold < 0)
    hold = 0;
  if (!line->reorder && now + hold < d->last_release)
    return d->last_release;
  return now + hold;
}

/* Keeps the queue in release order: with --reorder a packet may leave
 * before those that came before it. */
static void
enqueue (Direction * d, Packet * packet)
{
  GList *l = d->queue.tail;

  while (l && ((Packet *) l->data)->release > packet->release)
    l = l->prev;
  if (l)
    g_queue_insert_after (&d->queue, l, packet);
  else
    g_queue_push_head (&d->queue, packet);
}

static gboolean
on_readable (gint fd, GIOCondition condition, gpointer data)
{
  Line *line = data;
  Direction *d = fd == line->dir[0].in_fd ? &line->dir[0] : &line->dir[1];
  static guint8 buf[PACKET_MAX];
  gssize n;

  while ((n = read (fd, buf, sizeof (buf))) > 0) {
    gint64 now = g_get_monotonic_time ();
    Packet *packet;

    d->in++;
    if (d->loss > 0 && g_rand_double (line->rand) < d->loss) {
      d->lost++;
      continue;
    }
    if (d->queue.length >= line->limit) {
      d->overflow++;
      continue;
    }
    packet = g_malloc (sizeof (Packet) + n);
    packet->size = n;
    memcpy (packet->data, buf, n);
    packet->release = release_time (line, d, now);
    d->last_release = MAX (d->last_release, packet->release);
    enqueue (d, packet);
  }
  release_due (line);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_timer (GSource * source, GSourceFunc callback, gpointer data)
{
  release_due (data);
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs timer_funcs = { NULL, NULL, on_timer, NULL, NULL, NULL };

static void
print_direction (GString * s, Direction * d)
{
  gboolean first = TRUE;

  g_string_append_printf (s, "\"%s\": {\"in\": %" G_GUINT64_FORMAT
      ", \"forwarded\": %" G_GUINT64_FORMAT ", \"bytes\": %"
      G_GUINT64_FORMAT ", \"lost\": %" G_GUINT64_FORMAT ", \"overflow\": %"
      G_GUINT64_FORMAT ", \"refused\": %" G_GUINT64_FORMAT
      ", \"held\": %u, \"rtcp\": %" G_GUINT64_FORMAT ", \"rtp\": {",
      d->name, d->in, d->forwarded, d->bytes, d->lost, d->overflow,
      d->refused, d->queue.length, d->rtcp);
  for (guint pt = 0; pt < RTP_PAYLOAD_TYPES; pt++) {
    if (!d->rtp[pt])
      continue;
    g_string_append_printf (s, "%s\"%u\": %" G_GUINT64_FORMAT,
        first ? "" : ", ", pt, d->rtp[pt]);
    first = FALSE;
  }
  g_string_append (s, "}}");
}

static gboolean
on_stats (gpointer data)
{
  Line *line = data;
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "{\"t\": %.3f, ",
      (g_get_monotonic_time () - line->start) / 1e6);
  print_direction (s, &line->dir[0]);
  g_string_append (s, ", ");
  print_direction (s, &line->dir[1]);
  g_string_append (s, "}\n");
  fputs (s->str, stdout);
  fflush (stdout);
  g_string_free (s, TRUE);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_signal (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static gboolean
parse_args (int argc, char **argv, Line * line, char **dev_a, char **dev_b)
{
  gint delay = 0, jitter = 0, limit = 1000;
  gint64 seed = 0;
  gdouble loss = 0;
  gboolean reorder = FALSE;
  GOptionEntry entries[] = {
    {"dev-a", 0, 0, G_OPTION_ARG_STRING, dev_a, "First TUN device", "NAME"},
    {"dev-b", 0, 0, G_OPTION_ARG_STRING, dev_b, "Second TUN device", "NAME"},
    {"delay", 0, 0, G_OPTION_ARG_INT, &delay,
        "One-way delay in ms, each direction (default 0)", "MS"},
    {"jitter", 0, 0, G_OPTION_ARG_INT, &jitter,
        "Uniform jitter around the delay in ms (default 0)", "MS"},
    {"loss", 0, 0, G_OPTION_ARG_DOUBLE, &loss,
        "Random loss from dev-a to dev-b in percent (default 0)", "PERCENT"},
    {"limit", 0, 0, G_OPTION_ARG_INT, &limit,
        "Packets held per direction at most (default 1000)", "PACKETS"},
    {"reorder", 0, 0, G_OPTION_ARG_NONE, &reorder,
        "Let jitter reorder packets", NULL},
    {"seed", 0, 0, G_OPTION_ARG_INT64, &seed,
        "Seed of the random draws (default: from the clock)", "N"},
    G_OPTION_ENTRY_NULL
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- the lab's delay"
      " line between two TUN devices");
  g_autoptr (GError) error = NULL;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    g_printerr ("delayline: %s\n", error->message);
    return FALSE;
  }
  if (!*dev_a || !*dev_b || delay < 0 || jitter < 0 || limit < 1
      || loss < 0 || loss > 100) {
    g_printerr ("delayline: --dev-a and --dev-b are required; delay, jitter"
        " and loss (0 to 100) cannot be negative, limit is at least 1\n");
    return FALSE;
  }
  line->delay = (gint64) delay *1000;
  line->jitter = (gint64) jitter *1000;
  line->limit = limit;
  line->reorder = reorder;
  line->dir[0].loss = loss / 100;
  line->rand = seed ? g_rand_new_with_seed ((guint32) seed) : g_rand_new ();
  return TRUE;
}

int
main (int argc, char **argv)
{
  Line line = { 0 };
  g_autofree char *dev_a = NULL;
  g_autofree char *dev_b = NULL;
  g_autoptr (GError) error = NULL;
  int fd_a, fd_b;

  if (!parse_args (argc, argv, &line, &dev_a, &dev_b))
    return 2;
  fd_a = tun_open (dev_a, &error);
  fd_b = fd_a < 0 ? -1 : tun_open (dev_b, &error);
  if (fd_b < 0) {
    g_printerr ("delayline: %s\n", error->message);
    return 1;
  }
  line.dir[0].name = "ab";
  line.dir[0].in_fd = fd_a;
  line.dir[0].out_fd = fd_b;
  line.dir[1].name = "ba";
  line.dir[1].in_fd = fd_b;
  line.dir[1].out_fd = fd_a;
  g_queue_init (&line.dir[0].queue);
  g_queue_init (&line.dir[1].queue);
  line.start = g_get_monotonic_time ();
  line.loop = g_main_loop_new (NULL, FALSE);
  line.timer = g_source_new (&timer_funcs, sizeof (GSource));
  g_source_set_callback (line.timer, NULL, &line, NULL);
  g_source_attach (line.timer, NULL);
  g_unix_fd_add (fd_a, G_IO_IN, on_readable, &line);
  g_unix_fd_add (fd_b, G_IO_IN, on_readable, &line);
  g_timeout_add_seconds (1, on_stats, &line);
  g_unix_signal_add (SIGINT, on_signal, line.loop);
  g_unix_signal_add (SIGTERM, on_signal, line.loop);
  g_main_loop_run (line.loop);
  on_stats (&line);
  for (guint i = 0; i < 2; i++)
    g_queue_clear_full (&line.dir[i].queue, g_free);
  g_source_destroy (line.timer);
  g_source_unref (line.timer);
  g_main_loop_unref (line.loop);
  g_rand_free (line.rand);
  close (fd_a);
  close (fd_b);
  return 0;
}

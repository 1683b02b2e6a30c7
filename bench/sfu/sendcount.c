/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * An LD_PRELOAD library that counts the bytes a process hands to the
 * kernel on its datagram sockets (send, sendto, sendmsg, sendmmsg): UDP
 * payload, so RTP, RTCP, SRTP, DTLS and STUN, without the UDP and IP
 * headers. The count (a 64-bit integer, native order) lives in the file
 * named by SENDCOUNT_FILE, mapped shared, so that another process reads it
 * at any time. Built and used by bench/sfu/sfu-vs-mesh.py.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static uint64_t *counter;

__attribute__((constructor))
     static void open_counter (void)
{
  const char *path = getenv ("SENDCOUNT_FILE");
  int fd;

  if (path == NULL)
    return;
  fd = open (path, O_RDWR | O_CREAT, 0644);
  if (fd < 0)
    return;
  if (ftruncate (fd, sizeof (uint64_t)) == 0) {
    void *p = mmap (NULL, sizeof (uint64_t), PROT_READ | PROT_WRITE,
        MAP_SHARED, fd, 0);

    if (p != MAP_FAILED)
      counter = p;
  }
  close (fd);
}

static void
count (int fd, ssize_t n)
{
  int type = 0;
  socklen_t len = sizeof type;

  if (counter == NULL || n <= 0)
    return;
  if (getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
      type == SOCK_DGRAM)
    __atomic_add_fetch (counter, (uint64_t) n, __ATOMIC_RELAXED);
}

ssize_t
sendto (int fd, const void *buf, size_t n, int flags,
    const struct sockaddr *to, socklen_t tolen)
{
  static ssize_t (*real) (int, const void *, size_t, int,
      const struct sockaddr *, socklen_t);
  ssize_t r;

  if (real == NULL)
    real = dlsym (RTLD_NEXT, "sendto");
  r = real (fd, buf, n, flags, to, tolen);
  count (fd, r);
  return r;
}

ssize_t
send (int fd, const void *buf, size_t n, int flags)
{
  static ssize_t (*real) (int, const void *, size_t, int);
  ssize_t r;

  if (real == NULL)
    real = dlsym (RTLD_NEXT, "send");
  r = real (fd, buf, n, flags);
  count (fd, r);
  return r;
}

ssize_t
sendmsg (int fd, const struct msghdr *msg, int flags)
{
  static ssize_t (*real) (int, const struct msghdr *, int);
  ssize_t r;

  if (real == NULL)
    real = dlsym (RTLD_NEXT, "sendmsg");
  r = real (fd, msg, flags);
  count (fd, r);
  return r;
}

int
sendmmsg (int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
  static int (*real) (int, struct mmsghdr *, unsigned int, int);
  int r;
  ssize_t total = 0;

  if (real == NULL)
    real = dlsym (RTLD_NEXT, "sendmmsg");
  r = real (fd, msgs, n, flags);
  for (int i = 0; i < r; i++)
    total += msgs[i].msg_len;
  count (fd, total);
  return r;
}

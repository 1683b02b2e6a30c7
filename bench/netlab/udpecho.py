#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
"""UDP round trips across the network lab (no ping on this machine):

  udpecho.py serve PORT              echoes every datagram to its sender
  udpecho.py probe HOST PORT COUNT   sends COUNT numbered datagrams, 50 ms
                                     apart, and prints one JSON object:
                                     the round-trip times in ms of those
                                     that came back within 5 s, and their
                                     numbers in the order they came
"""

import json
import socket
import sys
import time


def serve(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    print("ready", flush=True)
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)


def probe(host, port, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    sent = {}
    rtts, order = [], []
    deadline = time.monotonic() + count * 0.05 + 5
    nxt = time.monotonic()
    i = 0
    while time.monotonic() < deadline and len(rtts) < count:
        now = time.monotonic()
        if i < count and now >= nxt:
            sent[i] = now
            s.sendto(str(i).encode(), (host, port))
            i += 1
            nxt += 0.05
        try:
            data, _ = s.recvfrom(2048)
            seq = int(data)
            if seq in sent:
                rtts.append((time.monotonic() - sent.pop(seq)) * 1000)
                order.append(seq)
        except BlockingIOError:
            time.sleep(0.001)
    print(json.dumps({"sent": i, "rtt_ms": rtts, "order": order}))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))

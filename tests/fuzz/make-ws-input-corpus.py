#!/usr/bin/env python3
"""Writes the seed corpus of fuzz-ws-input (tests/fuzz/corpus/ws-input/).

Each seed is one byte choosing how the input is cut (0: all at once, else
pieces of 1 + byte % 32 bytes), then what a client sends after the
upgrade: frames as RFC 6455 section 5.2 lays them out.
"""
import os
import struct
import sys

MASK = b"\x37\xfa\x21\x3d"


def frame(opcode, payload=b"", fin=True, masked=True, rsv=0, length_bits=None):
    """A frame; length_bits (16 or 64) writes the length in that form
    whatever its size, where RFC 6455 wants the fewest bytes."""
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    bit = 0x80 if masked else 0
    if length_bits is None:
        length_bits = 7 if n < 126 else 16 if n < 65536 else 64
    if length_bits == 7:
        head += bytes([bit | n])
    elif length_bits == 16:
        head += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([bit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + payload
    return head + MASK + bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))


def text(s, **kw):
    return frame(0x1, s if isinstance(s, bytes) else s.encode(), **kw)


def close(code=1000, reason=b""):
    return frame(0x8, struct.pack(">H", code) + reason)


EVENT = b'{"event":"client-move","channel":"presence-room","data":{"x":1}}'

SEEDS = {
    "mixed-whole": (0, text(EVENT) + frame(0x9, b"p") + text("second")
                    + frame(0x2, b"\x00\x01") + text("") + close()),
    "mixed-pieces": (2, text(EVENT) + frame(0x9, b"p") + text("second")
                     + frame(0x2, b"\x00\x01") + text("") + close()),
    "many-texts": (31, b"".join(text('{"n":%d}' % i) for i in range(20))),
    "fragments-ping": (5, text("ab", fin=False) + frame(0x9, b"in")
                       + frame(0x0, b"cd", fin=False) + frame(0x0, b"ef")
                       + text("after")),
    "data-inside-fragments": (3, text("ab", fin=False) + text("cd")),
    "invalid-utf8": (0, text("before") + text(b"\xff\xfe") + text("after")),
    "utf8-four-byte": (0, text("before") + text("\U0001F600 \u00e9") + text("after")),
    "utf8-surrogate": (0, text("before") + text(b"\xed\xa0\x80") + text("after")),
    "utf8-overlong": (0, text("before") + text(b"\xc0\xaf") + text("after")),
    "utf8-beyond": (0, text("before") + text(b"\xf4\x90\x80\x80") + text("after")),
    "utf8-cut": (2, text("before") + text(b"ab\xe2\x82") + text("after")),
    "nul": (1, text("before") + text(b"a\x00b") + text("after")),
    "close-then-text": (0, text("before") + close() + text("late")),
    "close-reason": (4, close(1001, b"going") + text("late")),
    "close-bad-code": (0, text("before") + close(999)),
    "unmasked": (0, text("before") + text("bare", masked=False)),
    "rsv": (6, text("before") + text("rsv", rsv=0x40)),
    "opcode-3": (0, text("before") + frame(0x3, b"x")),
    "oversize": (7, text("before") + text("x" * 1025) + text("after")),
    "at-bound": (6, text("y" * 1024) + text("after")),
    "length-64": (0, text("before") + bytes([0x81, 0xff]) + struct.pack(">Q", 70000)
                  + MASK),
    "partial-at-eof": (0, text("whole") + text("0123456789")[:9]),
    "partial-header-at-eof": (2, text("whole") + b"\x81"),
    "length-not-minimal-16": (0, text("before") + text("hello", length_bits=16)
                              + text("after")),
    "length-not-minimal-64": (3, text("before") + text("hello", length_bits=64)
                              + text("after")),
    "frames-after-own-close": (0, text("before") + text(b"\xff")
                               + b"".join(text("x") for _ in range(300))
                               + text("bare", masked=False)
                               + b"".join(text("y") for _ in range(300))
                               + close()),
    "pong-and-texts": (9, frame(0xA, b"unasked") + text("one") + text("two")),
    "fragmented-oversize": (0, text("a" * 600, fin=False)
                            + frame(0x0, b"b" * 600) + text("after")),
    "pings-and-texts": (0, b"".join(frame(0x9, bytes([i]) * (i % 126))
                                    + text('{"n":%d}' % i)
                                    for i in range(0, 130, 7))),
    "pings-cut": (13, b"".join(frame(0x9, b"p%d" % i) for i in range(40))
                  + text("after") + frame(0x9, b"z" * 125)),
    "ping-invalid": (0, frame(0x9, b"ok") + frame(0x9, b"long", length_bits=16)
                     + frame(0x9, b"after")),
    "ping-too-long": (0, frame(0x9, b"ok") + frame(0x9, b"x" * 126)),
    "ping-rsv": (0, frame(0x9, b"ok") + frame(0x9, b"rsv", rsv=0x40)),
    "ping-unmasked": (0, frame(0x9, b"ok") + frame(0x9, b"bare", masked=False)),
    "ping-unfinished": (0, frame(0x9, b"ok") + frame(0x9, b"nofin", fin=False)),
    "ping-after-close": (0, frame(0x9, b"before") + close()
                         + frame(0x9, b"late")),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "ws-input")
    os.makedirs(out, exist_ok=True)
    for name, (cut, body) in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([cut]) + body)


if __name__ == "__main__":
    main()

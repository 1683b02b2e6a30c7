// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The protocol helpers of room-peer.js, in Node: part chunking and sizes
// (docs/room-protocol.md §4), the pacing window, byte-wise id order (§3), data
// messages (§6), codec choice (§5) and the SFU topology event (§8,
// room-sfu.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  codecPreferences, compareIds, jsonBytes, maxMessageSize, paceDelay,
  parseDataMessage, splitSignal,
} from './room-peer.js';
import { parseTopology } from './room-sfu.js';

const offer = (sdp) => ({ to: 'bob-abcdef', from: 'alice-123456',
  pc: 'pc1', type: 'offer', sdp });

test('a signal within the limit is one part; sizes are UTF-8 bytes', () => {
  assert.equal(jsonBytes({ a: 'é' }), 10, 'é is two bytes, unescaped');
  assert.equal(jsonBytes({ a: '\r\n' }), 12, 'CR LF escape to four bytes');
  const small = offer('v=0\r\n');
  assert.equal(splitSignal(small, 'x.1', 10000).length, 1);
});

test('parts fit the limit and concatenate to the signal', () => {
  /* SDP-like text with escapes, multi-byte and astral characters */
  const sdp = Array.from({ length: 400 }, (_, i) =>
    `a=candidate:${i} 1 udp 2122 "ü" \\ 𝄞 127.0.0.1 ${5000 + i} typ host\r\n`)
    .join('');
  const signal = offer(sdp);
  for (const limit of [300, 1000, 10000]) {
    const parts = splitSignal(signal, 'alice.7', limit);
    assert.ok(parts.length > 1);
    parts.forEach((p, i) => {
      assert.ok(jsonBytes(p) <= limit,
          `part ${i} is ${jsonBytes(p)} bytes, over ${limit}`);
      assert.deepEqual(Object.keys(p), ['to', 'from', 'pc', 'type', 'id',
        'part', 'parts', 'chunk']);
      assert.equal(p.part, i);
      assert.equal(p.parts, parts.length);
      assert.equal(p.type, 'part');
      assert.equal(p.pc, 'pc1');
    });
    const text = parts.map((p) => p.chunk).join('');
    assert.equal(text, JSON.stringify(signal));
    assert.deepEqual(JSON.parse(text), signal);
    /* parts use the room they have: none is far below the limit but the
     * last */
    for (const p of parts.slice(0, -1))
      assert.ok(jsonBytes(p) > limit - 16, `part ${p.part} is ${jsonBytes(p)}`);
  }
  assert.throws(() => splitSignal(signal, 'alice.8', 80), RangeError);
});

test('pacing: at most `rate` sends in any 1.1 s window', () => {
  const sent = [];
  let now = 0;
  const times = [];
  for (let i = 0; i < 25; i++) {
    now += paceDelay(sent, 10, now);
    sent.push(now);
    times.push(now);
  }
  for (let i = 0; i + 10 < times.length; i++)
    assert.ok(times[i + 10] - times[i] >= 1100, `window at ${i}`);
  assert.deepEqual(times.slice(0, 10), Array(10).fill(0), 'a burst of 10 goes');
  assert.equal(times[10], 1100);
  assert.equal(paceDelay([0, 50], 10, 2000), 0, 'old sends age out');
});

test('ids compare byte-wise', () => {
  assert.equal(compareIds('bob-1', 'alice-2'), 1);
  assert.equal(compareIds('alice-2', 'bob-1'), -1);
  assert.equal(compareIds('a-1', 'a-1'), 0);
  assert.equal(compareIds('Zed-1', 'amy-1'), -1, 'upper case sorts first');
  assert.equal(compareIds('é-1', 'z-1'), 1, 'UTF-8 bytes, not code units');
  assert.equal(compareIds('\u{ff}-1', '\u{1d11e}-1'), -1,
      'U+00FF (c3 bf) before U+1D11E (f0 ...), unlike UTF-16 order');
  assert.equal(compareIds('ab', 'abc'), -1);
});

test('data messages are {"topic", "data"} objects (§6)', () => {
  assert.deepEqual(parseDataMessage('{"topic":"chat","data":{"x":1}}'),
      { topic: 'chat', data: { x: 1 } });
  assert.deepEqual(parseDataMessage('{"data":null}'),
      { topic: undefined, data: null });
  assert.deepEqual(parseDataMessage('{"topic":null,"data":3,"more":1}'),
      { topic: undefined, data: 3 });
  for (const bad of ['{"topic":"t"}', '[1]', '"x"', 'nope', '{"topic":1,"data":1}'])
    assert.equal(parseDataMessage(bad), null, bad);
  assert.equal(maxMessageSize('v=0\r\nm=application 9\r\n'), 65536);
  assert.equal(maxMessageSize('a=max-message-size:262144\r\n'), 262144);
  assert.equal(maxMessageSize('a=max-message-size:0\r\n'), Infinity);
});

test('codec choice: the published codec, or H.264 and VP8 (§5)', () => {
  const caps = { codecs: [
    { mimeType: 'video/VP8' },
    { mimeType: 'video/rtx' },
    { mimeType: 'video/H264', sdpFmtpLine: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f' },
    { mimeType: 'video/H264', sdpFmtpLine: 'level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f' },
    { mimeType: 'video/H264', sdpFmtpLine: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f' },
    { mimeType: 'video/AV1' },
    { mimeType: 'video/red' },
  ] };
  const names = (list) => list.map((c) => `${c.mimeType} ${c.sdpFmtpLine ?? ''}`.trim());
  assert.deepEqual(names(codecPreferences(caps, 'video', 'H264')), [
    'video/H264 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
    'video/rtx']);
  assert.deepEqual(names(codecPreferences(caps, 'video', 'VP8')),
      ['video/VP8', 'video/rtx']);
  assert.deepEqual(names(codecPreferences(caps, 'video', null)), [
    'video/H264 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
    'video/VP8', 'video/rtx']);
  assert.deepEqual(names(codecPreferences({ codecs: [{ mimeType: 'audio/opus' },
    { mimeType: 'audio/PCMU' }] }, 'audio', null)), ['audio/opus']);
  /* videoFec: RED and ULPFEC beside the codec, for the lab only */
  const fec = { codecs: [...caps.codecs, { mimeType: 'video/ulpfec' }] };
  assert.deepEqual(names(codecPreferences(fec, 'video', 'VP8', true)),
      ['video/VP8', 'video/red', 'video/ulpfec', 'video/rtx']);
  assert.deepEqual(names(codecPreferences(fec, 'audio', null, true)), []);
});

test('legba:topology: mesh, a Janus room, and what is refused', () => {
  assert.deepEqual(parseTopology('{"topology":"mesh"}'), { topology: 'mesh' });
  const sfu = { kind: 'janus', url: 'ws://127.0.0.1:8188/', room: 1234,
    pin: 'p', token: 't' };
  assert.deepEqual(parseTopology(JSON.stringify({ topology: 'sfu', sfu })),
      { topology: 'sfu', sfu: { url: sfu.url, room: 1234, pin: 'p',
        token: 't' } });
  assert.deepEqual(parseTopology({ topology: 'sfu', sfu: { kind: 'janus',
    url: 'wss://sfu.example/janus', room: 2 ** 53 - 1 } }).sfu,
  { url: 'wss://sfu.example/janus', room: 2 ** 53 - 1, pin: undefined,
    token: undefined });
  for (const bad of ['not json', '[]', '{"topology":"star"}',
    { topology: 'sfu' }, { topology: 'sfu', sfu: { ...sfu, kind: 'mcu' } },
    { topology: 'sfu', sfu: { ...sfu, url: 'http://127.0.0.1:8088/janus' } },
    { topology: 'sfu', sfu: { ...sfu, room: 0 } },
    { topology: 'sfu', sfu: { ...sfu, room: '1234' } },
    { topology: 'sfu', sfu: { ...sfu, room: 2 ** 53 } },
    { topology: 'sfu', sfu: { ...sfu, token: 5 } }])
    assert.throws(() => parseTopology(bad), TypeError, JSON.stringify(bad));
});

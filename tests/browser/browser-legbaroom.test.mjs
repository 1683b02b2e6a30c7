// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Interop: headless Chromium (room-peer.js) and a legbaroom pipeline
// (gst-peer) in one room through legba-server, each decoding the other's
// video, in both offer directions (the browser joins first, and joins
// last), with H.264 and VP8; the browser's trace holds the element's
// signals to docs/room-protocol.md (§4 sizes, pacing and order, §5 what its
// offers and answers carry), also when signals must go as parts and slowly,
// and when the element must apply the 3 s rule.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../integration/server.mjs';
import {
  decodedFrom, launchChromium, openParticipant, servePage, teardown, until,
} from './browser.mjs';
import { startGstPeer } from './gst-peer.mjs';
import { checkTrace } from './protocol-check.mjs';

const FRAMES = 15;
/* a sanitizer build on a loaded 2-core machine sets up a call in ~15 s */
const SETUP_MS = 60000;
let chrome;
let page;

before(async () => {
  [chrome, page] = await Promise.all([launchChromium(), servePage()]);
});

after(async () => {
  await chrome?.close();
  await page?.close();
});

/* A server for the test; what the test starts on it is torn down first. */
async function serverFor (t, args = [])
{
  const defer = teardown(t);
  const server = await startServer({ args });
  defer(() => server.stop());
  server.defer = defer;
  return server;
}

async function browser (server, identity)
{
  const p = await openParticipant(chrome, page, identity);
  server.defer(() => p.close());
  return p;
}

async function gst (server, options)
{
  const p = await startGstPeer(server, options);
  server.defer(async () => {
    const status = await p.stop();
    assert.deepEqual(status, { code: 0, signal: null },
        `gst-peer exits 0 on SIGTERM\n${p.describe()}`);
  });
  return p;
}

/* Resolves once legbaroom says it is in the room. */
function joined (g)
{
  return g.until(() => g.messages('legba-room-state').some((m) =>
    m.fields.includes('state=(string)connected')), `${g.identity} to join`,
  SETUP_MS);
}

/* The id of the participant with `identity`, once the page lists it. */
async function idIn (b, identity)
{
  return until(async () => (await b.record()).events.find((e) =>
    e.type === 'participant-joined' &&
      e.participant.startsWith(`${identity}-`))?.participant,
  `${b.identity} to see ${identity} join`, { ms: SETUP_MS,
    detail: () => b.describe() });
}

/* Both directions of media, then the trace checked; returns who sent
 * which description. */
async function call (b, g, limits)
{
  const gstId = await idIn(b, g.identity);
  await Promise.all([
    decodedFrom(b, gstId, FRAMES, SETUP_MS),
    g.decodedFrom(b.id, FRAMES, 'video', SETUP_MS),
  ]);
  const { signals } = await b.record();
  assert.deepEqual(checkTrace(signals, { self: b.id, limits }), [],
      'both sides hold to docs/room-protocol.md (browser trace)');
  const descriptions = signals.filter((e) =>
    ['offer', 'answer'].includes(e.message.type))
    .map((e) => `${e.message.from === b.id ? 'browser' : 'legbaroom'} ` +
        e.message.type);
  return { gstId, descriptions };
}

const LIMITS = { bytes: 10240, rate: 10 };

test('browser joins first: legbaroom offers, each decodes the other (H.264)',
    async (t) => {
  const server = await serverFor(t);
  const b = await browser(server, 'web');
  await b.join(server, 'first');
  const g = await gst(server, { room: 'first', identity: 'pipe' });
  const { descriptions } = await call(b, g, LIMITS);
  assert.deepEqual(descriptions, ['legbaroom offer', 'browser answer']);
  const stats = await b.stats();
  const gstId = Object.keys(stats)[0];
  /* MIME subtypes are case-insensitive (RFC 6838): the SDP says OPUS */
  assert.equal(stats[gstId].inbound.video.codec.toLowerCase(), 'video/h264');
  assert.equal(stats[gstId].inbound.audio.codec.toLowerCase(), 'audio/opus');
  assert.ok(stats[gstId].inbound.audio.packets > 0, 'audio from legbaroom');
  await g.decodedFrom(b.id, 5, 'audio');
});

test('browser joins last: the browser offers, each decodes the other (H.264)',
    async (t) => {
  const server = await serverFor(t);
  const b = await browser(server, 'web');
  const g = await gst(server, { room: 'last', identity: 'pipe' });
  await joined(g);
  await b.join(server, 'last');
  const { descriptions } = await call(b, g, LIMITS);
  assert.deepEqual(descriptions, ['browser offer', 'legbaroom answer']);
});

test('VP8 both ways, the browser offering', async (t) => {
  const server = await serverFor(t);
  const b = await browser(server, 'web');
  const g = await gst(server, { room: 'vp8', identity: 'pipe',
    video: 'vp8' });
  await joined(g);
  await b.join(server, 'vp8', { videoCodec: 'VP8' });
  const { gstId } = await call(b, g, LIMITS);
  const stats = await b.stats();
  assert.equal(stats[gstId].inbound.video.codec.toLowerCase(), 'video/vp8');
});

test('small and slow client events: parts and pacing both ways (§4)',
    async (t) => {
  const server = await serverFor(t, ['--max-event-bytes', '1500',
    '--client-events-per-second', '3']);
  const b = await browser(server, 'web');
  await b.join(server, 'parts');
  const g = await gst(server, { room: 'parts', identity: 'pipe' });
  await call(b, g, { bytes: 1500, rate: 3 });
  const { signals } = await b.record();
  assert.ok(signals.some((e) => e.direction === 'in' &&
      e.message.type === 'part'), 'legbaroom sent parts');
  assert.doesNotMatch(server.log(), /code=430[12]/,
      'the server refused no event for its size or rate');
});

test('the 3 s rule: a browser that missed the member list gets the offer',
    async (t) => {
  const server = await serverFor(t);
  const b = await browser(server, 'amy');
  const g = await gst(server, { room: 'late', identity: 'zed' });
  await joined(g);
  await b.join(server, 'late', { missMembers: true });
  const { descriptions } = await call(b, g, LIMITS);
  assert.deepEqual(descriptions, ['legbaroom offer', 'browser answer'],
      'zed (greater id) offered after amy stayed silent');
  const { signals, events } = await b.record();
  const offerAt = signals.find((e) => e.message.type === 'offer').at;
  const joinedAt = events.find((e) => e.type === 'state' &&
      e.state === 'connected').at;
  t.diagnostic(`zed offered ${(offerAt - joinedAt).toFixed(0)} ms after ` +
      'amy joined');
  assert.ok(offerAt - joinedAt > 2500,
      'zed waited for amy\'s offer (3 s) before offering itself');
});

test('garbage and spoofed signals leave the element working (§4)',
    async (t) => {
  const server = await serverFor(t);
  const b = await browser(server, 'web');
  await b.join(server, 'junk');
  const g = await gst(server, { room: 'junk', identity: 'pipe' });
  const gstId = await idIn(b, 'pipe');
  /* junk of every kind, through the page's paced queue */
  await b.tab.evaluate(({ me, to }) => {
    const peer = window.legba.peer();
    for (const junk of ['not json', [1, 2, 3],
      { to, from: 'mallory-abcdef', pc: 'x', type: 'offer', sdp: 'v=0' },
      { to, from: me, pc: 'x', type: 'answer', sdp: 'garbage' },
      { to, from: me, pc: 'y', type: 'candidates', candidates: 'no' },
      { to, from: me, pc: 'z', type: 'part', id: 'q', part: 5, parts: 2,
        chunk: 'x' },
      { to, from: me, type: 'bye' },
      { to, from: me, pc: 'w', type: 'offer', sdp: 'v=0\r\nnonsense' }])
      peer._enqueue(junk);
  }, { me: b.id, to: gstId });
  await Promise.all([
    decodedFrom(b, gstId, FRAMES, SETUP_MS),
    g.decodedFrom(b.id, FRAMES, 'video', SETUP_MS),
  ]);
  assert.deepEqual(g.errors(), [], 'no GStreamer error');
});

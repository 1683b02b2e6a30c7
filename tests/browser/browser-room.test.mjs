// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The browser participant against itself, through legba-server: two
// headless Chromium pages in one room, each decoding the other's video
// (getStats framesDecoded), with their whole signal traces held to
// ROOM-PROTOCOL.md: who offers (§3, the 3 s rule, glare), chunking and
// pacing (§4), one video and one audio section, H.264 or VP8 and Opus
// (§5), and the data channels (§6).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../integration/server.mjs';
import {
  decodedFrom, launchChromium, openParticipant, servePage, teardown, until,
} from './browser.mjs';
import { checkTrace } from './protocol-check.mjs';

const FRAMES = 20;
let chrome;
let page;

before(async () => {
  [chrome, page] = await Promise.all([launchChromium(), servePage()]);
});

after(async () => {
  await chrome?.close();
  await page?.close();
});

/* A server of the test's own (fresh limits), stopped after the test and
 * after the pages on it closed. */
async function serverFor (t, args = [])
{
  const defer = teardown(t);
  const server = await startServer({ args });
  defer(async () => {
    const status = await server.stop();
    assert.deepEqual(status, { code: 0, signal: null },
        `legba-server exits 0 on SIGTERM; its log:\n${server.log()}`);
  });
  server.defer = defer;
  return server;
}

/* Browser participants with these identities, their pages opened
 * together; each joins `room` in order (after the previous one joined). */
async function join (t, server, room, identities, options = {})
{
  const people = await Promise.all(identities.map((identity) =>
    openParticipant(chrome, page, identity)));
  server.defer(() => Promise.all(people.map((p) => p.close())));
  for (const p of people)
    await p.join(server, room, options[p.identity] ?? {});
  return people;
}

/* The offers and answers a page sent, as (type, to, pc). */
async function descriptions (p, direction = 'out')
{
  const { signals } = await p.record();
  return signals.filter((e) => e.direction === direction &&
      ['offer', 'answer'].includes(e.message.type))
    .map((e) => ({ type: e.message.type, to: e.message.to,
      from: e.message.from, pc: e.message.pc }));
}

async function assertConforms (p, limits)
{
  const { signals } = await p.record();
  assert.deepEqual(checkTrace(signals, { self: p.id, limits }), [],
      `${p.identity}'s signal trace holds to ROOM-PROTOCOL.md`);
}

const DEFAULT_LIMITS = { bytes: 10000, rate: 10 };

test('two browsers decode each other; the later one offers', async (t) => {
  const server = await serverFor(t);
  const [alice, bob] = await join(t, server, 'pair', ['alice', 'bob']);
  assert.match(alice.id, /^alice-[a-z0-9]{6,16}$/, 'id is IDENTITY-SUFFIX');

  const [a, b] = await Promise.all([decodedFrom(alice, bob.id, FRAMES),
    decodedFrom(bob, alice.id, FRAMES)]);
  assert.equal(a[bob.id].inbound.video.codec, 'video/H264');
  assert.equal(b[alice.id].inbound.audio.codec, 'audio/opus');
  assert.ok(b[alice.id].inbound.audio.packets > 0, 'audio flows too');

  assert.deepEqual((await descriptions(bob)).map((d) => d.type), ['offer'],
      'the participant that joined later offers (§3)');
  assert.deepEqual((await descriptions(alice)).map((d) => d.type),
      ['answer']);
  /* alice is still inside the 1.1 s window of the limit the server
   * advertised (10240 bytes): the page keeps to the server's figure */
  await assertConforms(alice, { ...DEFAULT_LIMITS, bytes: 10240 });
  await assertConforms(bob, { ...DEFAULT_LIMITS, bytes: 10240 });
});

test('data channels carry topics, reliable and lossy (§6)', async (t) => {
  const server = await serverFor(t);
  const [alice, bob] = await join(t, server, 'data', ['alice', 'bob']);
  await until(async () => (await bob.record()).events.some((e) =>
    e.type === 'mute' && e.participant === alice.id),
  'legba.mute from alice once the channel opened', {
    detail: () => bob.describe() });

  assert.equal(await alice.tab.evaluate(() =>
    window.legba.send({ n: 1 }, { topic: 'chat' })), 1);
  assert.equal(await alice.tab.evaluate(() =>
    window.legba.send([1, 2], { topic: 'pos', lossy: true })), 1);
  assert.equal(await alice.tab.evaluate(() =>
    window.legba.send(new Uint8Array([7, 8, 9]))), 1);
  const got = await until(async () => {
    const data = (await bob.record()).events.filter((e) => e.type === 'data');
    return data.length >= 3 && data;
  }, 'three data messages at bob', { detail: () => bob.describe() });
  const byTopic = Object.fromEntries(got.map((e) => [e.topic ?? 'binary', e]));
  assert.deepEqual(byTopic.chat.data, { n: 1 });
  assert.equal(byTopic.chat.lossy, false);
  assert.deepEqual(byTopic.pos.data, [1, 2]);
  assert.equal(byTopic.pos.lossy, true);
  assert.deepEqual(byTopic.binary.data, { bytes: 3 });

  /* Chromium advertises a=max-message-size:262144 */
  await assert.rejects(alice.tab.evaluate(() =>
    window.legba.send('x'.repeat(300000))), /max-message-size 262144/,
  'a message over the peer\'s max-message-size is refused');
  await assert.rejects(alice.tab.evaluate(() =>
    window.legba.send(1, { topic: 'legba.mute' })), /reserved/);
});

test('small client events: signals go as parts, within the limit (§4)',
    async (t) => {
  const limits = { bytes: 1500, rate: 10 };
  const server = await serverFor(t, ['--max-event-bytes', '1500']);
  const [alice, bob] = await join(t, server, 'parts', ['alice', 'bob']);
  await Promise.all([decodedFrom(alice, bob.id, FRAMES),
    decodedFrom(bob, alice.id, FRAMES)]);
  const { signals } = await bob.record();
  const parts = signals.filter((e) => e.direction === 'out' &&
      e.message.type === 'part');
  assert.ok(parts.length >= 3, `the offer went as ${parts.length} parts`);
  await assertConforms(alice, limits);
  await assertConforms(bob, limits);
  assert.equal((await alice.record()).signals.filter((e) => e.whole &&
      e.message.type === 'offer').length, 1, 'alice reassembled one offer');
});

test('a slow server: signals are paced, never dropped (§4)', async (t) => {
  const limits = { bytes: 10000, rate: 2 };
  const server = await serverFor(t, ['--client-events-per-second', '2',
    '--max-event-bytes', '2500']);
  const [alice, bob] = await join(t, server, 'pace', ['alice', 'bob']);
  await Promise.all([decodedFrom(alice, bob.id, FRAMES, 30000),
    decodedFrom(bob, alice.id, FRAMES, 30000)]);
  await assertConforms(alice, { ...limits, bytes: 2500 });
  await assertConforms(bob, { ...limits, bytes: 2500 });
  assert.doesNotMatch(server.log(), /code=4301/,
      'the server never refused an event for its rate');
});

test('a member list that missed someone: the greater id offers after 3 s',
    async (t) => {
  const server = await serverFor(t);
  const [zed, amy] = await join(t, server, 'late', ['zed', 'amy'],
      { amy: { missMembers: true } });
  await Promise.all([decodedFrom(zed, amy.id, FRAMES),
    decodedFrom(amy, zed.id, FRAMES)]);
  const offers = await descriptions(zed);
  assert.deepEqual(offers.map((d) => d.type), ['offer'],
      'zed (the greater id) offered');
  const { signals } = await zed.record();
  const offerAt = signals.find((e) => e.message.type === 'offer').at;
  const joinedAt = (await zed.record()).events.find((e) =>
    e.type === 'participant-joined' && e.participant === amy.id).at;
  assert.ok(offerAt - joinedAt >= 2900,
      `zed waited 3 s for amy's offer (${(offerAt - joinedAt).toFixed(0)} ms)`);
  assert.deepEqual(await descriptions(amy), [{ type: 'answer', to: zed.id,
    from: amy.id, pc: offers[0].pc }]);
});

test('glare: crossing offers, the greater id wins (§3)', async (t) => {
  const server = await serverFor(t);
  const [amy, zed] = await join(t, server, 'glare', ['amy', 'zed'],
      { amy: { missMembers: true }, zed: { missMembers: true } });
  /* both offer while the server holds the frames: each receives the
   * other's offer with its own unanswered */
  process.kill(server.pid, 'SIGSTOP');
  try {
    await Promise.all([
      amy.tab.evaluate((id) => window.legba.peer()._offer(
          window.legba.peer()._participant(id)), zed.id),
      zed.tab.evaluate((id) => window.legba.peer()._offer(
          window.legba.peer()._participant(id)), amy.id),
    ]);
    await until(async () => (await descriptions(amy)).length === 1 &&
        (await descriptions(zed)).length === 1, 'both offers handed to pusher-js');
  } finally {
    process.kill(server.pid, 'SIGCONT');
  }
  await Promise.all([decodedFrom(amy, zed.id, FRAMES),
    decodedFrom(zed, amy.id, FRAMES)]);
  const zedSent = await descriptions(zed);
  const amySent = await descriptions(amy);
  assert.deepEqual(zedSent.map((d) => d.type), ['offer']);
  assert.deepEqual(amySent.map((d) => d.type), ['offer', 'answer'],
      'amy (the smaller id) dropped its offer and answered zed\'s');
  assert.equal(amySent[1].pc, zedSent[0].pc);
  const stats = await amy.stats();
  assert.equal(stats[zed.id].pc, zedSent[0].pc, 'the winning pc is in use');
});

test('leaving: bye, then gone at once for the other (§3, §4)', async (t) => {
  const server = await serverFor(t);
  const [alice, bob] = await join(t, server, 'leave', ['alice', 'bob']);
  await decodedFrom(alice, bob.id, FRAMES);
  const leftAt = Date.now();
  await bob.leave();
  await until(async () => (await alice.record()).events.some((e) =>
    e.type === 'participant-left' && e.participant === bob.id),
  'alice to see bob leave', { detail: () => alice.describe() });
  t.diagnostic(`bob gone for alice ${Date.now() - leftAt} ms after leave()`);
  const { signals } = await bob.record();
  assert.deepEqual(signals.filter((e) => e.direction === 'out')
    .map((e) => e.message.type).filter((type) => type !== 'candidates'),
  ['offer', 'bye'], 'bob said bye on its peer connection');
  assert.deepEqual(await alice.stats(), {}, 'alice lists nobody');
});

test('the signalling server restarts: media flows on, nothing renegotiated',
    async (t) => {
  const defer = teardown(t);
  const first = await startServer();
  let second = null;
  defer(async () => {
    await first.stop();
    await second?.stop();
  });
  first.defer = defer;
  const [alice, bob] = await join(t, first, 'restart', ['alice', 'bob']);
  await Promise.all([decodedFrom(alice, bob.id, FRAMES),
    decodedFrom(bob, alice.id, FRAMES)]);
  await first.stop();
  const during = (await alice.stats())[bob.id].inbound.video.frames;
  await decodedFrom(alice, bob.id, during + FRAMES);
  const restartedAt = Date.now();
  second = await startServer({ appId: first.appId, key: first.key,
    secret: first.secret, args: ['--port', String(first.port)] });
  await Promise.all([alice, bob].map((p) => until(async () =>
    (await p.record()).events.filter((e) => e.type === 'state' &&
        e.state === 'connected').length === 2,
  `${p.identity} to join again`, { ms: 30000, detail: () => p.describe() })));
  t.diagnostic(`both joined again ${Date.now() - restartedAt} ms after the restart`);
  const stats = await alice.stats();
  assert.equal(stats[bob.id].connectionState, 'connected');
  assert.equal((await descriptions(bob)).length, 1, 'no new offer');
  assert.equal((await descriptions(alice)).length, 1, 'no new answer');
  assert.deepEqual((await alice.record()).events.filter((e) =>
    e.type === 'participant-left'), [], 'nobody left');
});

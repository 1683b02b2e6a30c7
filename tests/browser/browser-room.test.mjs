// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The browser participant against itself, through legba-server: two
// headless Chromium pages in one room, each decoding the other's video
// (getStats framesDecoded), with their whole signal traces held to
// docs/room-protocol.md: who offers (§3, the 3 s rule, glare), chunking and
// pacing (§4), one video and one audio section, H.264 or VP8 and Opus
// (§5), and the data channels (§6).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
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
      `${p.identity}'s signal trace holds to docs/room-protocol.md`);
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

/* ---- TURN: coturn on loopback, credentials from legba-server ---- */

/* A free UDP port on 127.0.0.1 (bound, read, released). */
function freeUdpPort ()
{
  return new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    socket.on('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      const { port } = socket.address();
      socket.close(() => resolve(port));
    });
  });
}

/* Does a STUN binding request to 127.0.0.1:port get its success
 * response (RFC 5389) within 200 ms? */
function stunAnswers (port)
{
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    const request = Buffer.alloc(20);
    request.writeUInt16BE(0x0001, 0);
    request.writeUInt32BE(0x2112a442, 4);
    randomBytes(12).copy(request, 8);
    const done = (answered) => {
      clearTimeout(timer);
      socket.close();
      resolve(answered);
    };
    const timer = setTimeout(() => done(false), 200);
    socket.on('error', () => done(false));
    socket.on('message', (m) => done(m.length >= 20 &&
      m.readUInt16BE(0) === 0x0101 && m.subarray(8, 20).equals(
        request.subarray(8, 20))));
    socket.send(request, port, '127.0.0.1');
  });
}

/* Debian's coturn on a free loopback port with the REST scheme's shared
 * secret; stopped (and its files removed) when the test ends. */
async function startCoturn (t, secret)
{
  const dir = await mkdtemp(joinPath(tmpdir(), 'legba-turn-'));
  const log = joinPath(dir, 'turn.log');
  const port = await freeUdpPort();
  const child = spawn('turnserver', ['-n', '--listening-ip=127.0.0.1',
    '--relay-ip=127.0.0.1', `--listening-port=${port}`, '--use-auth-secret',
    `--static-auth-secret=${secret}`, '--realm=legba', '--no-cli',
    '--no-tls', '--no-dtls', '--no-tcp', '--no-tcp-relay',
    '--allow-loopback-peers', '--fingerprint', '--verbose', '--simple-log',
    '--no-stdout-log', `--log-file=${log}`, `--pidfile=${dir}/turn.pid`,
    `--userdb=${dir}/turndb`], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  teardown(t)(async () => {
    child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  });
  await until(() => stunAnswers(port), 'coturn to answer STUN', {
    detail: () => readFile(log, 'utf8').catch(() => '(no log)') });
  return { port, log: () => readFile(log, 'utf8') };
}

const haveCoturn = spawnSync('sh', ['-c', 'command -v turnserver'])
  .status === 0;

test('relayed through TURN only, credentials from legba-server',
    { skip: !haveCoturn && 'turnserver (coturn) is not installed' },
    async (t) => {
  const secret = randomBytes(16).toString('hex');
  const turn = await startCoturn(t, secret);
  const url = `turn:127.0.0.1:${turn.port}?transport=udp`;
  const server = await serverFor(t, ['--turn-url', url, '--turn-secret',
    secret, '--turn-ttl', '600']);
  const relay = { iceTransportPolicy: 'relay' };
  const [alice, bob] = await join(t, server, 'turn', ['alice', 'bob'],
      { alice: relay, bob: relay });

  /* what legba-server handed each page: EXPIRY:PARTICIPANT_ID, about
   * ten minutes ahead */
  for (const p of [alice, bob]) {
    const handedOut = await p.tab.evaluate(() =>
      window.legba.peer().serverIceServers);
    assert.equal(handedOut.length, 1);
    assert.deepEqual(handedOut[0].urls, [url]);
    const [expiry, user] = handedOut[0].username.split(':');
    assert.equal(user, p.id);
    assert.ok(Math.abs(Number(expiry) - Date.now() / 1000 - 600) < 60,
        `expiry ${expiry} is about 600 s ahead`);
    assert.match(handedOut[0].credential, /^[A-Za-z0-9+/]{27}=$/,
        'base64 of an HMAC-SHA1');
  }

  await Promise.all([decodedFrom(alice, bob.id, FRAMES),
    decodedFrom(bob, alice.id, FRAMES)]);
  const log = await turn.log();
  assert.match(log, /ALLOCATE processed, success/,
      'coturn granted the pages allocations');
});

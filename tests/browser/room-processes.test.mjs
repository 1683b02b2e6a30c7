// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// legbaroom participants as separate processes (gst-peer) through
// legba-server: 2 and 4 of them each decoding everyone's video and audio;
// a process killed with SIGKILL is gone at once for the others, one
// stopped with SIGSTOP within the server's activity timeout, and in both
// cases its pads and its webrtcbin are released; the signalling server
// restarted mid-call while media keeps flowing, and the room whole again
// after it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../integration/server.mjs';
import { teardown } from './browser.mjs';
import { startGstPeer } from './gst-peer.mjs';

const FRAMES = 15;
/* a sanitizer build on a loaded 2-core machine sets up a call in ~15 s */
const SETUP_MS = 60000;

/* A server for the test, and `defer` for what runs on it (stopped first). */
async function serverFor (t, args = [])
{
  const defer = teardown(t);
  const server = await startServer({ args });
  defer(() => server.stop());
  return { server, defer };
}

/* gst-peer processes for these identities, started in this order without
 * waiting for one another (the protocol settles who offers); each must
 * exit 0 on SIGTERM at the end. */
async function peers (defer, server, room, identities, options = {})
{
  const list = [];
  for (const identity of identities)
    list.push(await startGstPeer(server, { room, identity, ...options }));
  defer(async () => {
    const statuses = await Promise.all(list.map((p) => p.stop()));
    list.forEach((p, i) => assert.deepEqual(statuses[i],
        { code: 0, signal: null },
        `gst-peer ${p.identity} exits 0 on SIGTERM\n${p.describe()}`));
  });
  return list;
}

/* The participant id each peer has, as the others see it. */
async function idsOf (list)
{
  const ids = new Map();
  await list[0].until(() => {
    for (const p of list) {
      for (const q of list) {
        const id = q.senders().find((s) => s.startsWith(`${p.identity}-`));
        if (id)
          ids.set(p.identity, id);
      }
    }
    return ids.size === list.length;
  }, 'every participant to be received by someone', SETUP_MS);
  return ids;
}

async function everyoneDecodesEveryone (list, ids, frames = FRAMES)
{
  const waits = [];
  for (const p of list) {
    for (const q of list) {
      if (p === q)
        continue;
      waits.push(p.decodedFrom(ids.get(q.identity), frames, 'video', SETUP_MS));
      waits.push(p.decodedFrom(ids.get(q.identity), 5, 'audio', SETUP_MS));
    }
  }
  await Promise.all(waits);
}

test('two legbaroom processes decode each other', async (t) => {
  const { server, defer } = await serverFor(t);
  const started = Date.now();
  const list = await peers(defer, server, 'two', ['alice', 'bob']);
  const ids = await idsOf(list);
  await everyoneDecodesEveryone(list, ids);
  t.diagnostic(`2 processes: everyone decoding after ${Date.now() - started} ms`);
  for (const p of list)
    assert.deepEqual(p.errors(), [], `${p.identity} reported no error`);
});

test('four legbaroom processes: everyone decodes everyone', async (t) => {
  const { server, defer } = await serverFor(t);
  const started = Date.now();
  const list = await peers(defer, server, 'four', ['ann', 'ben', 'cat', 'dan']);
  const ids = await idsOf(list);
  await everyoneDecodesEveryone(list, ids);
  t.diagnostic(`4 processes: everyone decoding after ${Date.now() - started} ms`);
  for (const p of list)
    assert.equal(p.counts.webrtcbins, 3, `${p.identity} runs one webrtcbin per peer`);
});

/* Waits until `gone` is gone for each of `others`: its pads removed and
 * one webrtcbin fewer; returns the time that took for each. */
async function released (others, goneId, webrtcbins, since, ms)
{
  return Promise.all(others.map(async (p) => {
    await p.until(() => p.senders().every((s) => s !== goneId) &&
        p.counts.webrtcbins === webrtcbins,
    `${p.identity} to release ${goneId}'s pads and webrtcbin`, ms);
    return Date.now() - since;
  }));
}

test('a peer killed with SIGKILL is gone at once; its pads and webrtcbin released',
    async (t) => {
  const { server, defer } = await serverFor(t);
  const list = await peers(defer, server, 'kill', ['ann', 'ben']);
  const victim = await startGstPeer(server, { room: 'kill', identity: 'cat' });
  defer(() => victim.stop());
  const ids = await idsOf([...list, victim]);
  await everyoneDecodesEveryone([...list, victim], ids);
  const killedAt = Date.now();
  victim.signal('SIGKILL');
  const times = await released(list, ids.get('cat'), 1, killedAt, 5000);
  t.diagnostic(`SIGKILL: released after ${times.join(' and ')} ms`);
  for (const p of list) {
    assert.ok(p.messages('legba-participant-left').some((m) =>
      m.fields.includes(`participant-id=(string)${ids.get('cat')}`)),
    `${p.identity} posted legba-participant-left for ${ids.get('cat')}`);
  }
  /* the others still decode each other */
  const before = list[0].decoded(ids.get('ben'));
  await list[0].until(() => list[0].decoded(ids.get('ben')) > before + 10,
      'ann to keep decoding ben');
});

test('a peer stopped with SIGSTOP is gone within the activity timeout',
    async (t) => {
  /* the server pings after 2 s of silence and gives 2 s for the pong
   * (1 s each made live peers on a loaded machine miss their pongs) */
  const { server, defer } = await serverFor(t, ['--activity-timeout', '2',
    '--pong-timeout', '2']);
  const list = await peers(defer, server, 'stop', ['ann', 'ben']);
  const victim = await startGstPeer(server, { room: 'stop', identity: 'cat' });
  defer(() => victim.stop());
  const ids = await idsOf([...list, victim]);
  await everyoneDecodesEveryone([...list, victim], ids);
  const stoppedAt = Date.now();
  victim.signal('SIGSTOP');
  /* server: 2 s + 2 s; a peer whose media stopped is not kept for the
   * grace period (§3) */
  const times = await released(list, ids.get('cat'), 1, stoppedAt, 12000);
  t.diagnostic(`SIGSTOP: released after ${times.join(' and ')} ms`);
});

test('the signalling server restarts mid-call: media flows on, the room is whole again',
    async (t) => {
  const defer = teardown(t);
  const first = await startServer();
  let second = null;
  defer(async () => {
    await first.stop();
    await second?.stop();
  });
  const list = await peers(defer, first, 'restart', ['ann', 'ben']);
  const ids = await idsOf(list);
  await everyoneDecodesEveryone(list, ids);
  const [ann, ben] = list;
  await first.stop();
  const during = ann.decoded(ids.get('ben'));
  await ann.until(() => ann.decoded(ids.get('ben')) > during + FRAMES,
      'ann to keep decoding ben while the server is down');
  second = await startServer({ appId: first.appId, key: first.key,
    secret: first.secret, args: ['--port', String(first.port)] });
  /* a newcomer after the restart sees both and is seen by both */
  const cat = await startGstPeer(second, { room: 'restart', identity: 'cat' });
  defer(() => cat.stop());
  const all = await idsOf([ann, ben, cat]);
  await everyoneDecodesEveryone([ann, ben, cat], all);
  assert.equal(all.get('ann'), ids.get('ann'), 'ann kept its participant id');
  for (const p of [ann, ben])
    assert.equal(p.counts.webrtcbins, 2, `${p.identity}: no duplicate peer connection`);
});

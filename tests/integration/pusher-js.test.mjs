// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// legba-server driven by the real pusher-js client (Node build) and the
// official pusher server SDK: Pusher Channels protocol 7 as a Pusher app
// sees it. One server for the file; every test uses channels of its own.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import {
  WAIT_MS, connectClient, disconnectAll, named, roundTrip, sdkChannelAuth,
  sdkFor, startServer, subscribed, within,
} from './server.mjs';

let server;
let sdk;

before(async () => {
  server = await startServer();
  sdk = sdkFor(server);
});

after(async () => {
  if (!server)
    return;
  const status = await server.stop();
  assert.deepEqual(status, { code: 0, signal: null },
      `legba-server exits 0 on SIGTERM; its log:\n${server.log()}`);
});

/* Connected clients, disconnected when the test ends. */
async function clients (t, count, options = {})
{
  const list = [];
  t.after(() => disconnectAll(list));
  for (let i = 0; i < count; i++)
    list.push(await connectClient(server, options));
  return list;
}

async function client (t, options)
{
  return (await clients(t, 1, options))[0];
}

function presenceAuth (userId, userInfo)
{
  return { channelAuthorization: sdkChannelAuth(sdk,
      { user_id: userId, user_info: userInfo }) };
}

/* An HTTP API event that every listed client receives: frames to one
 * socket keep their order, so anything the server sent a client before
 * this event has arrived once the event has. */
async function barrier (channel, receivers)
{
  const marker = `barrier-${Math.random().toString(36).slice(2)}`;
  await sdk.trigger(channel, 'barrier', { marker });
  await Promise.all(receivers.map((c) => c.recorder.next(
      (e) => e.event === 'barrier' && e.data?.marker === marker,
      `the barrier event on ${channel}`)));
}

/* Polls an HTTP API GET until `accept` holds for its JSON body. */
async function pollApi (path, params, accept, reason)
{
  const deadline = Date.now() + WAIT_MS;
  let last;
  for (;;) {
    const res = await sdk.get({ path, params });
    last = await res.json();
    if (accept(last))
      return last;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${WAIT_MS} ms waiting for ${reason}; ` +
          `last answer ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/* The data of the raw pusher:connection_established frame. */
async function establishedData (target)
{
  const ws = new WebSocket(`ws://${target.host}:${target.port}/app/` +
      `${target.key}?protocol=7&client=js&version=8.6.0`);
  try {
    const raw = await within(new Promise((resolve, reject) => {
      ws.once('message', (message) => resolve(message));
      ws.once('error', reject);
    }), WAIT_MS, 'the first frame from the server');
    const frame = JSON.parse(raw.toString());
    assert.equal(frame.event, 'pusher:connection_established');
    assert.equal(typeof frame.data, 'string',
        'servers send data as a JSON-encoded string');
    return JSON.parse(frame.data);
  } finally {
    ws.terminate();
  }
}

function pusherErrors (pusher, code)
{
  return pusher.recorder.all((e) => e.event === 'pusher:error' &&
      (code === undefined || e.data?.code === code));
}

/* ---- connection ---- */
test('pusher-js connects and gets a socket_id', async (t) => {
  const pusher = await client(t);
  assert.match(pusher.connection.socket_id, /^\d+\.\d+$/);
  await roundTrip(pusher);
  const other = await client(t);
  assert.notEqual(other.connection.socket_id, pusher.connection.socket_id);
});

test('connection_established advertises the limits (raw frame)',
    async () => {
  const data = await establishedData(server);
  assert.match(data.socket_id, /^\d+\.\d+$/);
  assert.ok(Number.isInteger(data.activity_timeout) &&
      data.activity_timeout > 0);
  assert.equal(data.limits?.client_event_bytes, 10240, 'the default 10 KB');
  assert.equal(data.limits?.client_events_per_second, 10,
      'the default rate, as Pusher documents');
});

test('configured limits are advertised and enforced', async () => {
  const tuned = await startServer({ args: ['--max-event-bytes', '5000',
    '--client-events-per-second', '20'] });
  const list = [];
  try {
    const data = await establishedData(tuned);
    assert.deepEqual(data.limits, { client_event_bytes: 5000,
      client_events_per_second: 20 });

    const auth = { channelAuthorization: sdkChannelAuth(sdkFor(tuned)) };
    for (let i = 0; i < 2; i++)
      list.push(await connectClient(tuned, auth));
    const [a, b] = list;
    const name = 'private-tuned';
    const channel = await subscribed(a, name);
    await subscribed(b, name);
    for (let i = 0; i < 21; i++)
      channel.trigger('client-tick', { i });
    await a.recorder.next((e) => e.event === 'pusher:error' &&
        e.data?.code === 4301, 'pusher:error 4301 for the 21st event');
    await roundTrip(a);
    assert.equal(pusherErrors(a).length, 1);
    await b.recorder.until(() => b.recorder.all(named('client-tick'))
        .length === 20, 'the 20 events within the raised rate');
  } finally {
    await disconnectAll(list);
    const status = await tuned.stop();
    assert.deepEqual(status, { code: 0, signal: null }, tuned.log());
  }
});

/* ---- channels ---- */
test('a public channel receives an SDK trigger', async (t) => {
  const pusher = await client(t);
  const channel = await subscribed(pusher, 'news');
  const received = [];
  channel.bind('headline', (data) => received.push(data));
  const res = await sdk.trigger('news', 'headline', { text: 'hello' });
  assert.equal(res.status, 200);
  await pusher.recorder.next(named('headline', 'news'), 'the headline');
  assert.deepEqual(received, [{ text: 'hello' }]);
});

test('a private channel with an SDK-signed auth', async (t) => {
  const pusher = await client(t,
      { channelAuthorization: sdkChannelAuth(sdk) });
  const channel = await subscribed(pusher, 'private-vault');
  assert.equal(channel.subscribed, true);
  const received = [];
  channel.bind('opened', (data) => received.push(data));
  await sdk.trigger('private-vault', 'opened', { by: 'sdk' });
  await pusher.recorder.next(named('opened', 'private-vault'), 'opened');
  assert.deepEqual(received, [{ by: 'sdk' }]);
});

test('a wrongly signed subscription is refused and gets no events',
    async (t) => {
  const forger = sdkFor(server, { secret: 'not-the-secret' });
  const pusher = await client(t,
      { channelAuthorization: sdkChannelAuth(forger) });
  await subscribed(pusher, 'lobby-forged');
  const channel = pusher.subscribe('private-forged');
  const errors = [];
  channel.bind('pusher:subscription_error', (data) => errors.push(data));
  await pusher.recorder.next(
      named('pusher:subscription_error', 'private-forged'),
      'pusher:subscription_error for the forged auth');
  assert.equal(errors.length, 1, 'pusher-js reports it on the channel');
  assert.equal(channel.subscribed, false);
  assert.equal(pusher.recorder.all(named(
      'pusher_internal:subscription_succeeded', 'private-forged')).length, 0);

  await sdk.trigger('private-forged', 'secret', { leaked: true });
  await barrier('lobby-forged', [pusher]);
  assert.equal(pusher.recorder.all(named('secret')).length, 0);
  const res = await sdk.get({ path: '/channels/private-forged' });
  assert.equal((await res.json()).occupied, false);
  assert.equal(pusher.connection.state, 'connected');
});

/* ---- presence ---- */
test('members, me, member_added and member_removed', async (t) => {
  const [alice] = await clients(t, 1,
      presenceAuth('alice', { name: 'Alice' }));
  const [bob] = await clients(t, 1, presenceAuth('bob', { name: 'Bob' }));

  const room = await subscribed(alice, 'presence-garden');
  assert.equal(room.members.count, 1);
  assert.deepEqual(room.members.me, { id: 'alice', info: { name: 'Alice' } });
  const added = [];
  const removed = [];
  room.bind('pusher:member_added', (m) => added.push(m));
  room.bind('pusher:member_removed', (m) => removed.push(m));

  const bobRoom = await subscribed(bob, 'presence-garden');
  assert.equal(bobRoom.members.count, 2);
  assert.deepEqual(bobRoom.members.me, { id: 'bob', info: { name: 'Bob' } });
  assert.deepEqual(bobRoom.members.get('alice'),
      { id: 'alice', info: { name: 'Alice' } });
  const subscription = bob.recorder.all(named(
      'pusher_internal:subscription_succeeded', 'presence-garden'))[0];
  assert.deepEqual([...subscription.data.presence.ids].sort(),
      ['alice', 'bob']);

  await alice.recorder.next(
      named('pusher_internal:member_added', 'presence-garden'),
      'member_added for bob');
  assert.deepEqual(added, [{ id: 'bob', info: { name: 'Bob' } }]);
  assert.equal(room.members.count, 2);

  bob.disconnect();
  await alice.recorder.next(
      named('pusher_internal:member_removed', 'presence-garden'),
      'member_removed for bob');
  assert.deepEqual(removed, [{ id: 'bob', info: { name: 'Bob' } }]);
  assert.equal(room.members.count, 1);
});

test('one user on two connections counts once and leaves once',
    async (t) => {
  const name = 'presence-twins';
  const [watcher] = await clients(t, 1, presenceAuth('watcher', {}));
  const [bob1, bob2] = await clients(t, 2,
      presenceAuth('bob', { name: 'Bob' }));
  const room = await subscribed(watcher, name);
  const memberEvents = (event) => watcher.recorder.all(
      (e) => e.event === event && e.channel === name).length;

  await subscribed(bob1, name);
  await watcher.recorder.next(named('pusher_internal:member_added', name),
      'member_added for bob\'s first connection');
  const bob2Room = await subscribed(bob2, name);
  assert.equal(bob2Room.members.count, 2);
  await barrier(name, [watcher]);
  assert.equal(memberEvents('pusher_internal:member_added'), 1,
      'the second connection of a present user is no new member');
  assert.equal(room.members.count, 2);

  const info = await (await sdk.get({ path: `/channels/${name}`,
    params: { info: 'user_count,subscription_count' } })).json();
  assert.equal(info.user_count, 2);
  assert.equal(info.subscription_count, 3);

  bob1.disconnect();
  await pollApi(`/channels/${name}`, { info: 'subscription_count' },
      (body) => body.subscription_count === 2,
      'the server to drop bob\'s first connection');
  await barrier(name, [watcher]);
  assert.equal(memberEvents('pusher_internal:member_removed'), 0,
      'bob is still present through his second connection');

  bob2.disconnect();
  await watcher.recorder.next(named('pusher_internal:member_removed', name),
      'member_removed once bob\'s last connection left');
  await barrier(name, [watcher]);
  assert.equal(memberEvents('pusher_internal:member_removed'), 1);
  assert.equal(room.members.count, 1);
  assert.equal(room.members.get('bob'), null);
});

/* ---- subscription counts ---- */
test('an app with subscription-count = true: pusher:subscription_count ' +
    'as subscribers come and go, none on presence channels', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'legba-count-'));
  const config = join(dir, 'legba.conf');
  const app = { appId: '7', key: 'counted-key',
    secret: randomBytes(16).toString('hex') };
  writeFileSync(config, `[app counted]\nid = ${app.appId}\nkey = ` +
      `${app.key}\nsecret = ${app.secret}\nsubscription-count = true\n`);
  const server = await startServer({ args: ['--config', config] });
  const counting = { ...server, ...app };
  const list = [];
  const countIs = (pusher, channel, n) => pusher.recorder.next((e) =>
    e.event === 'pusher_internal:subscription_count' &&
      e.channel === channel && e.data?.subscription_count === n,
  `subscription_count ${n} on ${channel}`);
  try {
    const auth = { channelAuthorization: sdkChannelAuth(sdkFor(counting),
        { user_id: 'viewer', user_info: {} }) };
    for (let i = 0; i < 3; i++)
      list.push(await connectClient(counting, auth));
    const [a, b, c] = list;
    const name = 'private-audience';
    const channel = a.subscribe(name);
    const counts = [];
    channel.bind('pusher:subscription_count',
        (data) => counts.push(data.subscription_count));
    await countIs(a, name, 1);
    assert.equal(channel.subscriptionCount, 1);

    await subscribed(b, name);
    await subscribed(c, name);
    await countIs(a, name, 3);
    await countIs(c, name, 3);
    assert.equal(channel.subscriptionCount, 3);
    assert.equal(counts.at(-1), 3);

    c.disconnect();
    await countIs(a, name, 2);
    await countIs(b, name, 2);
    assert.equal(channel.subscriptionCount, 2);

    /* a presence channel's count would go out at the same tick as, or
     * before, that of the channel subscribed after it */
    await subscribed(a, 'presence-stage');
    await subscribed(a, 'after-stage');
    await countIs(a, 'after-stage', 1);
    assert.equal(a.recorder.all(named('pusher_internal:subscription_count',
        'presence-stage')).length, 0);
  } finally {
    await disconnectAll(list);
    rmSync(dir, { recursive: true });
    const status = await server.stop();
    assert.deepEqual(status, { code: 0, signal: null }, server.log());
  }
});

/* ---- client events ---- */
test('relayed to the others on a private channel, never to the sender',
    async (t) => {
  const name = 'private-chat';
  const [a, b, c] = await clients(t, 3,
      { channelAuthorization: sdkChannelAuth(sdk) });
  const channels = [];
  for (const p of [a, b, c])
    channels.push(await subscribed(p, name));
  assert.equal(channels[0].trigger('client-say', { text: 'hi' }), true);
  for (const p of [b, c]) {
    const e = await p.recorder.next(named('client-say', name),
        'the relayed client event');
    assert.deepEqual(e.data, { text: 'hi' });
    assert.equal(e.user_id, undefined, 'no user_id off presence');
  }
  await barrier(name, [a, b, c]);
  assert.equal(a.recorder.all(named('client-say')).length, 0,
      'the sender does not get its own event');
  assert.equal(b.recorder.all(named('client-say')).length, 1);
});

test('carry the sender\'s user_id on a presence channel', async (t) => {
  const name = 'presence-talk';
  const [ann] = await clients(t, 1, presenceAuth('ann', { name: 'Ann' }));
  const [ben] = await clients(t, 1, presenceAuth('ben', { name: 'Ben' }));
  await subscribed(ann, name);
  const benRoom = await subscribed(ben, name);
  const seen = [];
  benRoom.bind('client-wave', (data, metadata) => seen.push({ data,
    metadata }));
  ann.channel(name).trigger('client-wave', { hand: 'left' });
  const e = await ben.recorder.next(named('client-wave', name),
      'the relayed client event');
  assert.equal(e.user_id, 'ann');
  assert.deepEqual(seen, [{ data: { hand: 'left' },
    metadata: { user_id: 'ann' } }]);
  await barrier(name, [ann]);
  assert.equal(ann.recorder.all(named('client-wave')).length, 0);
});

test('refused on a public channel, the connection stays', async (t) => {
  const name = 'square';
  const [a, b] = await clients(t, 2);
  await subscribed(a, name);
  await subscribed(b, name);
  a.channel(name).trigger('client-shout', { loud: true });
  const error = await a.recorder.next(named('pusher:error'),
      'pusher:error for a client event on a public channel');
  assert.ok(Number.isInteger(error.data?.code) && error.data.code >= 4000 &&
      error.data.code < 5000, `a 4xxx code: ${JSON.stringify(error.data)}`);
  await barrier(name, [a, b]);
  assert.equal(b.recorder.all(named('client-shout')).length, 0);
  assert.equal(a.connection.state, 'connected');
  await roundTrip(a);
});

test('a client event over the rate limit gets 4301, the connection stays',
    async (t) => {
  const name = 'private-burst';
  const [a, b] = await clients(t, 2,
      { channelAuthorization: sdkChannelAuth(sdk) });
  const channel = await subscribed(a, name);
  await subscribed(b, name);
  for (let i = 0; i < 11; i++)
    channel.trigger('client-tick', { i });
  await a.recorder.next((e) => e.event === 'pusher:error' &&
      e.data?.code === 4301, 'pusher:error 4301 for the 11th event');
  await roundTrip(a);
  await barrier(name, [a, b]);
  assert.equal(pusherErrors(a, 4301).length, 1, 'only the excess is refused');
  assert.equal(pusherErrors(a).length, 1);
  assert.deepEqual(b.recorder.all(named('client-tick', name)).map(
      (e) => e.data.i), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(a.connection.state, 'connected');
});

test('a socket over max-channels-per-socket gets subscription_error on ' +
    'that channel, the connection stays', async () => {
  const bounded = await startServer({
    args: ['--max-channels-per-socket', '3'] });
  const list = [];
  try {
    const pusher = await connectClient(bounded);
    list.push(pusher);
    for (const name of ['bound-0', 'bound-1', 'bound-2'])
      await subscribed(pusher, name);

    const channel = pusher.subscribe('bound-3');
    const errors = [];
    channel.bind('pusher:subscription_error', (data) => errors.push(data));
    await pusher.recorder.next(named('pusher:subscription_error', 'bound-3'),
        'pusher:subscription_error for the fourth channel');
    assert.equal(errors.length, 1, 'pusher-js reports it on the channel');
    assert.equal(errors[0].type, 'LimitReached');
    assert.equal(errors[0].status, 403);
    assert.equal(channel.subscribed, false);

    await sdkFor(bounded).trigger('bound-2', 'still', { here: true });
    await pusher.recorder.next(named('still', 'bound-2'),
        'an event on a channel it kept');
    assert.equal(pusher.connection.state, 'connected');
    const metrics = await (await fetch(`${bounded.base}/metrics`)).text();
    assert.match(metrics, /^legba_channel_limit_refusals_total 1$/m);

    /* leaving one makes room for another */
    pusher.unsubscribe('bound-0');
    await subscribed(pusher, 'bound-4');
  } finally {
    await disconnectAll(list);
    const status = await bounded.stop();
    assert.deepEqual(status, { code: 0, signal: null }, bounded.log());
  }
});

/* ---- server events ---- */
test('socket_id excludes one connection from a trigger', async (t) => {
  const name = 'feed';
  const [a, b] = await clients(t, 2);
  await subscribed(a, name);
  await subscribed(b, name);
  await sdk.trigger(name, 'item', { n: 1 },
      { socket_id: a.connection.socket_id });
  await b.recorder.next(named('item', name), 'the item at b');
  await barrier(name, [a, b]);
  assert.equal(a.recorder.all(named('item')).length, 0,
      'the excluded socket did not get it');
});

test('signed-in users get sendToUser and are disconnected by ' +
    'terminateUserConnections', async (t) => {
  const userAuth = (id) => ({
    userAuthentication: {
      customHandler: ({ socketId }, callback) => callback(null,
          sdk.authenticateUser(socketId, { id, user_info: { name: id } })),
    },
  });
  const [one, two] = await clients(t, 2, userAuth('user-7'));
  const [other] = await clients(t, 1, userAuth('user-8'));
  const notices = [];
  one.user.bind('notice', (data) => notices.push(data));
  for (const p of [one, two, other]) {
    p.signin();
    const ok = await p.recorder.next(named('pusher:signin_success'),
        'pusher:signin_success');
    assert.equal(typeof JSON.parse(ok.data.user_data).id, 'string');
    await roundTrip(p);
  }

  const res = await sdk.sendToUser('user-7', 'notice', { text: 'for 7' });
  assert.equal(res.status, 200);
  for (const p of [one, two])
    await p.recorder.next(named('notice', '#server-to-user-user-7'),
        'the server-to-user event');
  assert.deepEqual(notices, [{ text: 'for 7' }]);
  await sdk.sendToUser('user-8', 'notice', { text: 'for 8' });
  const own = await other.recorder.next(named('notice'),
      'user-8\'s own event');
  assert.deepEqual(own.data, { text: 'for 8' });
  assert.equal(other.recorder.all(named('notice')).length, 1);

  const term = await sdk.terminateUserConnections('user-7');
  assert.equal(term.status, 200);
  for (const p of [one, two]) {
    await p.recorder.until(() => p.connection.state === 'disconnected',
        'user-7\'s connections to be closed');
    const closes = p.recorder.all((e) => e.event === 'connection:error' &&
        e.data?.data?.code !== undefined);
    assert.ok(closes.some((e) => e.data.data.code >= 4000 &&
        e.data.data.code < 4100), 'a close code that does not reconnect: ' +
        JSON.stringify(closes));
  }
  assert.equal(other.connection.state, 'connected');
  await roundTrip(other);
});

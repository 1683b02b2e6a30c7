// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The Pusher HTTP API of legba-server through the official pusher server
// SDK (events, batches, channel queries, errors), plus raw signed requests
// for what the SDK never sends (stale timestamps, a wrong body_md5).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import {
  WAIT_MS, connectClient, disconnectAll, named, sdkChannelAuth, sdkFor,
  startServer, subscribed,
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

async function client (t, options = {})
{
  const pusher = await connectClient(server, options);
  t.after(() => disconnectAll([pusher]));
  return pusher;
}

function member (t, userId)
{
  return client(t, { channelAuthorization: sdkChannelAuth(sdk,
      { user_id: userId, user_info: { name: userId } }) });
}

/* The SDK's promise rejects with a RequestError on any status >= 400. */
async function refused (promise)
{
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('the request was accepted');
}

function assertJsonError (body)
{
  let parsed;
  assert.doesNotThrow(() => {
    parsed = JSON.parse(body);
  }, `a JSON body: ${body}`);
  assert.equal(typeof parsed.error, 'string', `an error string: ${body}`);
}

/* A GET /channels answer lists exactly the expected channels, each with
 * at least the expected attributes. */
function assertChannels (body, expected)
{
  assert.deepEqual(Object.keys(body.channels).sort(),
      Object.keys(expected).sort());
  for (const [name, attributes] of Object.entries(expected)) {
    for (const [key, value] of Object.entries(attributes))
      assert.equal(body.channels[name][key], value, `${name} ${key}`);
  }
}

/* ---- events ---- */
test('trigger to one channel', async (t) => {
  const pusher = await client(t);
  await subscribed(pusher, 'solo');
  const res = await sdk.trigger('solo', 'ping', { n: 1 });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(typeof body, 'object');
  assert.equal(body.channels, undefined, 'no info asked, none given');
  const e = await pusher.recorder.next(named('ping', 'solo'), 'the event');
  assert.deepEqual(e.data, { n: 1 });
});

test('trigger to many channels', async (t) => {
  const names = ['many-a', 'many-b', 'many-c'];
  const pusher = await client(t);
  for (const name of names)
    await subscribed(pusher, name);
  const res = await sdk.trigger(names, 'fan', 'plain text');
  assert.equal(res.status, 200);
  for (const name of names) {
    const e = await pusher.recorder.next(named('fan', name),
        `the event on ${name}`);
    assert.equal(e.data, 'plain text');
  }
  assert.equal(pusher.recorder.all(named('fan')).length, 3);
});

test('trigger with info returns the channel counts', async (t) => {
  const name = 'presence-counted';
  for (const id of ['u1', 'u2'])
    await subscribed(await member(t, id), name);
  const res = await sdk.trigger(name, 'hello', {},
      { info: 'user_count,subscription_count' });
  assert.deepEqual(await res.json(), { channels: {
    [name]: { user_count: 2, subscription_count: 2 } } });
});

test('triggerBatch delivers each event, honouring socket_id', async (t) => {
  const a = await client(t);
  const b = await client(t);
  for (const p of [a, b]) {
    await subscribed(p, 'batch-1');
    await subscribed(p, 'batch-2');
  }
  const res = await sdk.triggerBatch([
    { channel: 'batch-1', name: 'first', data: { k: 1 } },
    { channel: 'batch-2', name: 'second', data: 'two',
      socket_id: a.connection.socket_id },
    { channel: 'batch-1', name: 'third', data: { k: 3 } },
  ]);
  assert.equal(res.status, 200);
  for (const [name, channel, data] of [['first', 'batch-1', { k: 1 }],
    ['second', 'batch-2', 'two'], ['third', 'batch-1', { k: 3 }]]) {
    const e = await b.recorder.next(named(name, channel), name);
    assert.deepEqual(e.data, data);
  }
  await a.recorder.next(named('third', 'batch-1'), 'the last event at a');
  assert.equal(a.recorder.all(named('second')).length, 0,
      'socket_id excluded a from the second event');
  assert.deepEqual(b.recorder.all((e) => ['first', 'second', 'third']
      .includes(e.event)).map((e) => e.event), ['first', 'second', 'third']);
});

/* ---- channel queries ---- */
test('GET /channels with filter_by_prefix and info', async (t) => {
  for (const id of ['p1', 'p2'])
    await subscribed(await member(t, id), 'presence-q-one');
  const p3 = await member(t, 'p3');
  await subscribed(p3, 'presence-q-two');
  await subscribed(p3, 'private-q-three');
  await subscribed(p3, 'q-four');

  const all = await (await sdk.get({ path: '/channels' })).json();
  for (const name of ['presence-q-one', 'presence-q-two', 'private-q-three',
    'q-four'])
    assert.equal(typeof all.channels[name], 'object', `${name} is listed`);

  const presence = await (await sdk.get({ path: '/channels', params: {
    filter_by_prefix: 'presence-q-', info: 'user_count' } })).json();
  assertChannels(presence, { 'presence-q-one': { user_count: 2 },
    'presence-q-two': { user_count: 1 } });

  const counted = await (await sdk.get({ path: '/channels', params: {
    filter_by_prefix: 'presence-q-one',
    info: 'user_count,subscription_count' } })).json();
  assertChannels(counted, {
    'presence-q-one': { user_count: 2, subscription_count: 2 } });

  const priv = await (await sdk.get({ path: '/channels', params: {
    filter_by_prefix: 'private-q-' } })).json();
  assertChannels(priv, { 'private-q-three': {} });
});

test('GET /channels/NAME', async (t) => {
  const name = 'presence-single';
  const a = await member(t, 'solo-user');
  const b = await member(t, 'solo-user');
  await subscribed(a, name);
  await subscribed(b, name);
  const info = await (await sdk.get({ path: `/channels/${name}`, params: {
    info: 'user_count,subscription_count' } })).json();
  assert.deepEqual(info, { occupied: true, user_count: 1,
    subscription_count: 2 });
  const bare = await (await sdk.get({ path: '/channels/empty-one' })).json();
  assert.equal(bare.occupied, false);
});

test('GET /channels/NAME/users', async (t) => {
  const name = 'presence-roster';
  for (const id of ['r1', 'r2', 'r3'])
    await subscribed(await member(t, id), name);
  const body = await (await sdk.get(
      { path: `/channels/${name}/users` })).json();
  assert.deepEqual(body.users.map((u) => u.id).sort(), ['r1', 'r2', 'r3']);
  for (const u of body.users)
    assert.deepEqual(Object.keys(u), ['id']);
});

/* ---- errors ---- */
test('a wrong secret gets 401', async () => {
  const e = await refused(sdkFor(server, { secret: 'wrong' })
      .trigger('any', 'x', {}));
  assert.equal(e.status, 401);
  assertJsonError(e.body);
});

test('an unknown app id gets 404', async () => {
  const e = await refused(sdkFor(server, { appId: 'no-such-app' })
      .trigger('any', 'x', {}));
  assert.equal(e.status, 404);
});

test('an oversize event gets 413', async (t) => {
  const pusher = await client(t);
  await subscribed(pusher, 'big');
  const e = await refused(sdk.trigger('big', 'huge', 'x'.repeat(10241)));
  assert.equal(e.status, 413);
  assertJsonError(e.body);
  const ok = await sdk.trigger('big', 'fits', 'x'.repeat(9000));
  assert.equal(ok.status, 200);
  await pusher.recorder.next(named('fits', 'big'), 'the event that fits');
  assert.equal(pusher.recorder.all(named('huge')).length, 0);
});

/* ---- raw signed requests ---- */
/* A POST /events signed as Pusher's HTTP API auth_version 1.0 says,
 * with the timestamp and body_md5 given. */
function signedEvents (body, { timestamp, md5 })
{
  const path = `/apps/${server.appId}/events`;
  const params = { auth_key: server.key, auth_timestamp: String(timestamp),
    auth_version: '1.0', body_md5: md5 };
  const query = Object.keys(params).sort().map(
      (k) => `${k}=${params[k]}`).join('&');
  const signature = createHmac('sha256', server.secret)
      .update(`POST\n${path}\n${query}`).digest('hex');
  return fetch(`${server.base}${path}?${query}&auth_signature=${signature}`,
      { method: 'POST', body, headers: { 'content-type': 'application/json' },
        signal: AbortSignal.timeout(WAIT_MS) });
}

const body = JSON.stringify({ name: 'raw', channels: ['raw'], data: '{}' });
const md5 = createHash('md5').update(body).digest('hex');
const now = () => Math.floor(Date.now() / 1000);

test('a correctly signed raw request is accepted', async () => {
  const res = await signedEvents(body, { timestamp: now(), md5 });
  assert.equal(res.status, 200, await res.clone().text());
});

test('a stale auth_timestamp gets 401 with a JSON error', async () => {
  for (const timestamp of [now() - 700, now() + 700]) {
    const res = await signedEvents(body, { timestamp, md5 });
    assert.equal(res.status, 401);
    assert.match(res.headers.get('content-type') ?? '', /json/);
    assertJsonError(await res.text());
  }
});

test('a wrong body_md5 gets 401 with a JSON error', async () => {
  const wrong = createHash('md5').update(body + ' ').digest('hex');
  const res = await signedEvents(body, { timestamp: now(), md5: wrong });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('content-type') ?? '', /json/);
  assertJsonError(await res.text());
});

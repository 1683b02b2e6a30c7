// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// legba-server driven by Laravel Echo, the client most Pusher apps write,
// over pusher-js (Node build), with the official pusher server SDK in the
// role of Laravel's PusherBroadcaster. The test serves the two endpoints a
// Laravel app exposes for Echo (POST /broadcasting/auth and
// /broadcasting/user-auth, form-encoded, answered with the SDK's
// authorizeChannel and authenticateUser as PusherBroadcaster does), with
// the authorization rules of a routes/channels.php. One server for the
// file; every test uses channels of its own.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import Echo from 'laravel-echo';
import PusherClient from 'pusher-js';
import {
  Recorder, WAIT_MS, named, sdkFor, startServer, within,
} from './server.mjs';

/* The app's users, by the API token Echo sends (Echo's bearerToken
 * option, as with Sanctum). Laravel signs presence with the numeric auth
 * identifier and the channel callback's array as user_info. */
const USERS = {
  'token-alice': { id: 1, name: 'Alice' },
  'token-bob': { id: 2, name: 'Bob' },
  'token-mallory': { id: 3, name: 'Mallory' },
};

let server;
let sdk;
let app;

/* routes/channels.php: the channel callbacks of the app, by the name
 * without its private-, private-encrypted- or presence- prefix (Laravel
 * strips it). Returns false (403), true, or the presence user_info. */
function authorizeChannel (user, name)
{
  let m;
  if ((m = /^orders\.(\d+)$/.exec(name)))
    return Number(m[1]) === user.id;
  if ((m = /^App\.Models\.User\.(\d+)$/.exec(name)))
    return Number(m[1]) === user.id;
  if (/^chat\.[a-z0-9-]+$/.test(name) || /^vault\.[a-z0-9-]+$/.test(name))
    return { id: user.id, name: user.name };
  return false;
}

/* PusherBroadcaster::auth and validAuthenticationResponse. */
function broadcastingAuth (user, form)
{
  const socketId = form.get('socket_id');
  const channel = form.get('channel_name');
  if (!socketId || !channel)
    return [403, {}];
  const bare = channel.replace(/^(private-encrypted-|private-|presence-)/, '');
  const result = authorizeChannel(user, bare);
  if (result === false)
    return [403, {}];
  if (channel.startsWith('presence-'))
    return [200, sdk.authorizeChannel(socketId, channel,
        { user_id: user.id, user_info: result })];
  return [200, sdk.authorizeChannel(socketId, channel)];
}

/* The Laravel app's HTTP side, on 127.0.0.1 port 0. */
function startApp ()
{
  const requests = [];
  const http = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
      const user = token ? USERS[token[1]] : undefined;
      let answer = [404, {}];
      requests.push({ url: req.url, channel: form.get('channel_name'),
        user: user?.id });
      if (req.method !== 'POST' ||
          req.headers['content-type'] !== 'application/x-www-form-urlencoded')
        answer = [405, {}];
      else if (!user)
        answer = [403, {}];
      else if (req.url === '/broadcasting/auth')
        answer = broadcastingAuth(user, form);
      else if (req.url === '/broadcasting/user-auth')
        answer = [200, sdk.authenticateUser(form.get('socket_id'),
            { id: String(user.id), name: user.name })];
      res.writeHead(answer[0], { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(answer[1]));
    });
  });
  return new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', () => {
      const { port } = http.address();
      resolve({ http, requests, base: `http://127.0.0.1:${port}` });
    });
  });
}

before(async () => {
  server = await startServer();
  sdk = sdkFor(server,
      { encryptionMasterKeyBase64: randomBytes(32).toString('base64') });
  app = await startApp();
});

after(async () => {
  if (app)
    await new Promise((resolve) => app.http.close(resolve));
  if (!server)
    return;
  const status = await server.stop();
  assert.deepEqual(status, { code: 0, signal: null },
      `legba-server exits 0 on SIGTERM; its log:\n${server.log()}`);
});

/* The resources/js/echo.js of a Laravel app using BROADCAST_CONNECTION=
 * pusher (PUSHER_HOST, PUSHER_PORT, PUSHER_SCHEME=http), with pusher-js
 * passed in as Node has no window.Pusher, the app's endpoints given as
 * absolute URLs, and the user's API token. Resolves once connected;
 * echo.recorder holds what its socket received, and what the listeners
 * given by heard() were called with. */
async function connectEcho (t, token, options = {})
{
  const echo = new Echo({
    broadcaster: 'pusher',
    Pusher: PusherClient,
    key: server.key,
    cluster: 'mt1',
    wsHost: server.host,
    wsPort: server.port,
    wssPort: server.port,
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    authEndpoint: `${app.base}/broadcasting/auth`,
    /* Echo adds the bearer token to its default auth.headers object,
     * which is shared by every Echo of the process (a page has one): each
     * of the test's users needs an object of its own. */
    auth: { headers: {} },
    userAuthentication: {
      endpoint: `${app.base}/broadcasting/user-auth`,
      headers: {},
    },
    bearerToken: token,
    ...options,
  });
  const pusher = echo.connector.pusher;
  const recorder = new Recorder();
  echo.recorder = recorder;
  pusher.connection.bind('message', (event) => recorder.push(event));
  pusher.connection.bind('state_change',
      (change) => recorder.pushState(change));
  t.after(async () => {
    if (pusher.connection.state === 'disconnected')
      return;
    echo.disconnect();
    await recorder.until(() => pusher.connection.state === 'disconnected',
        'Echo to disconnect');
  });
  await recorder.until(() => echo.connectionStatus() !== 'connecting' &&
      pusher.connection.state !== 'initialized',
      `Echo to connect to ws://${server.host}:${server.port}`);
  assert.equal(echo.connectionStatus(), 'connected');
  return echo;
}

/* A listener that records its calls as {event: 'heard:TAG', data}. */
function heard (echo, tag)
{
  return (data, metadata) => echo.recorder.push({ event: `heard:${tag}`,
    data, metadata });
}

function calls (echo, tag)
{
  return echo.recorder.all(named(`heard:${tag}`)).map((e) => e.data);
}

function nextCall (echo, tag, reason)
{
  return echo.recorder.next(named(`heard:${tag}`), reason);
}

/* Resolves once the server confirmed the subscription (Echo's
 * subscribed()), rejects on its error() callback. */
function subscribed (channel, reason)
{
  return within(new Promise((resolve, reject) => {
    channel.subscribed(() => resolve(channel));
    channel.error((error) => reject(new Error(
        `${reason}: subscription_error ${JSON.stringify(error)}`)));
  }), WAIT_MS, reason);
}

/* An HTTP API event every listed Echo receives on a public channel they
 * all listen to: frames to one socket keep their order, so what the server
 * sent them before has arrived once this has. */
async function barrier (channel, echos)
{
  const marker = `barrier-${Math.random().toString(36).slice(2)}`;
  await sdk.trigger(channel, 'barrier', { marker });
  await Promise.all(echos.map((e) => e.recorder.next(
      (ev) => ev.event === 'barrier' && ev.data?.marker === marker,
      `the barrier event on ${channel}`)));
}

async function channelInfo (name)
{
  const res = await sdk.get({ path: `/channels/${name}`,
    params: { info: 'subscription_count' } });
  assert.equal(res.status, 200);
  return res.json();
}

/* ---- public channels ---- */
test('channel().listen: a broadcast from the SDK, event names as Laravel ' +
    'sends them', async (t) => {
  const echo = await connectEcho(t, 'token-alice');
  const orders = await subscribed(
      echo.channel('orders').listen('OrderShipped', heard(echo, 'class'))
          .listen('.order.placed', heard(echo, 'as'))
          .listen('.App\\Events\\OrderShipped', heard(echo, 'dotted')),
      'the public channel');
  echo.listen('orders', 'Shop.Refund', heard(echo, 'nested'));

  /* ShouldBroadcast: the event's class name, unless broadcastAs() */
  await sdk.trigger('orders', 'App\\Events\\OrderShipped',
      { order: { id: 7 } });
  await sdk.trigger('orders', 'order.placed', { order: { id: 8 } });
  await sdk.trigger('orders', 'App\\Events\\Shop\\Refund', { amount: 5 });
  await nextCall(echo, 'nested', 'App\\Events\\Shop\\Refund');
  assert.deepEqual(calls(echo, 'class'), [{ order: { id: 7 } }]);
  assert.deepEqual(calls(echo, 'dotted'), [{ order: { id: 7 } }]);
  assert.deepEqual(calls(echo, 'as'), [{ order: { id: 8 } }]);
  assert.deepEqual(calls(echo, 'nested'), [{ amount: 5 }]);
  assert.equal(orders.name, 'orders');
});

test('a broadcast to several channels at once, and toOthers() (the ' +
    'X-Socket-ID) leaving out its sender', async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const bob = await connectEcho(t, 'token-bob');
  for (const echo of [alice, bob])
    await subscribed(echo.channel('dispatch')
        .listen('Parcel', heard(echo, 'parcel')), 'dispatch');
  await subscribed(alice.private('orders.1')
      .listen('Parcel', heard(alice, 'own')), 'private-orders.1');

  /* PusherBroadcaster::broadcast: one trigger for all the channels */
  await sdk.trigger(['dispatch', 'private-orders.1'], 'App\\Events\\Parcel',
      { n: 1 });
  await nextCall(alice, 'own', 'the parcel on the private channel');
  await nextCall(alice, 'parcel', 'the parcel at alice');
  await nextCall(bob, 'parcel', 'the parcel at bob');

  /* broadcast(...)->toOthers() from a request carrying alice's socket */
  await sdk.trigger('dispatch', 'App\\Events\\Parcel', { n: 2 },
      { socket_id: alice.socketId() });
  await bob.recorder.until(() => calls(bob, 'parcel').length === 2,
      'the second parcel at bob');
  await barrier('dispatch', [alice, bob]);
  assert.deepEqual(calls(alice, 'parcel'), [{ n: 1 }],
      'the excluded socket did not get it');
  assert.deepEqual(calls(bob, 'parcel'), [{ n: 1 }, { n: 2 }]);
});

/* ---- private channels, through /broadcasting/auth ---- */
test('private().listen: authorized by the app\'s endpoint, refused with ' +
    'its 403', async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const mallory = await connectEcho(t, 'token-mallory');
  await subscribed(alice.private('orders.11').listen('.x', () => {}),
      'a channel alice may not have')
      .then(() => assert.fail('orders.11 is not alice\'s'),
          (e) => assert.match(e.message, /"status":403/));
  const mine = alice.private('orders.1')
      .listen('OrderShipped', heard(alice, 'shipped'));
  await subscribed(mine, 'alice\'s own orders channel');

  const refused = await within(new Promise((resolve) => {
    mallory.private('orders.1').error(resolve);
  }), WAIT_MS, 'the app to refuse mallory');
  assert.equal(refused.status, 403);
  assert.equal(refused.type, 'AuthError');

  await sdk.trigger('private-orders.1', 'App\\Events\\OrderShipped',
      { order: { id: 9 } });
  await nextCall(alice, 'shipped', 'the private event');
  assert.deepEqual(calls(alice, 'shipped'), [{ order: { id: 9 } }]);
  await subscribed(mallory.channel('orders-public'), 'a public channel');
  await barrier('orders-public', [mallory]);
  assert.equal(mallory.recorder.all(named('App\\Events\\OrderShipped'))
      .length, 0, 'nothing of a channel the app refused');
  assert.equal((await channelInfo('private-orders.1')).subscription_count, 1);
  assert.ok(app.requests.some((r) => r.url === '/broadcasting/auth' &&
      r.channel === 'private-orders.1' && r.user === 3),
  'mallory\'s Echo asked the app');
});

test('notification(): a broadcast notification on the user\'s private ' +
    'channel', async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  await subscribed(alice.private('App.Models.User.1')
      .notification(heard(alice, 'notice')), 'the user channel');
  const notification = { id: 'a1b2', type: 'App\\Notifications\\Paid',
    amount: 12 };
  await sdk.trigger('private-App.Models.User.1',
      'Illuminate\\Notifications\\Events\\BroadcastNotificationCreated',
      notification);
  await nextCall(alice, 'notice', 'the notification');
  assert.deepEqual(calls(alice, 'notice'), [notification]);
});

test('private().whisper reaches listenForWhisper on the others, never ' +
    'the sender', async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const bob = await connectEcho(t, 'token-bob');
  const bobTab = await connectEcho(t, 'token-bob');
  const channels = [];
  for (const echo of [alice, bob, bobTab]) {
    channels.push(await subscribed(echo.private('chat.whisper')
        .listenForWhisper('typing', heard(echo, 'typing')),
    'private-chat.whisper'));
    await subscribed(echo.channel('whisper-barrier'), 'the barrier channel');
  }
  channels[0].whisper('typing', { name: 'Alice' });
  await nextCall(bob, 'typing', 'the whisper at bob');
  await nextCall(bobTab, 'typing', 'the whisper at bob\'s other tab');
  await barrier('whisper-barrier', [alice, bob, bobTab]);
  assert.deepEqual(calls(bob, 'typing'), [{ name: 'Alice' }]);
  assert.equal(calls(alice, 'typing').length, 0, 'not to its sender');
  const relayed = bob.recorder.all(named('client-typing'))[0];
  assert.equal(relayed.channel, 'private-chat.whisper');
  assert.equal(relayed.user_id, undefined, 'no user_id off presence');

  bob.private('chat.whisper').stopListeningForWhisper('typing');
  channels[2].whisper('typing', { name: 'Bob' });
  await nextCall(alice, 'typing', 'bob\'s whisper at alice');
  await barrier('whisper-barrier', [alice, bob]);
  assert.deepEqual(calls(bob, 'typing'), [{ name: 'Alice' }],
      'bob\'s first tab stopped listening');
});

/* ---- presence channels ---- */
test('join(): here, joining, leaving, and whispers carrying the user',
    async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const bob = await connectEcho(t, 'token-bob');
  const room = 'chat.lobby';

  const aliceRoom = alice.join(room).here(heard(alice, 'here'))
      .joining(heard(alice, 'joining')).leaving(heard(alice, 'leaving'))
      .listenForWhisper('wave', heard(alice, 'wave'));
  await nextCall(alice, 'here', 'alice\'s here()');
  assert.deepEqual(calls(alice, 'here'), [[{ id: 1, name: 'Alice' }]]);

  bob.join(room).here(heard(bob, 'here'));
  await nextCall(bob, 'here', 'bob\'s here()');
  assert.deepEqual(calls(bob, 'here')[0].map((u) => u.name).sort(),
      ['Alice', 'Bob']);
  await nextCall(alice, 'joining', 'alice seeing bob join');
  assert.deepEqual(calls(alice, 'joining'), [{ id: 2, name: 'Bob' }]);

  bob.join(room).whisper('wave', { hand: 'left' });
  await nextCall(alice, 'wave', 'bob\'s whisper');
  assert.deepEqual(calls(alice, 'wave'), [{ hand: 'left' }]);
  const wave = alice.recorder.next(named('heard:wave'), 'the wave');
  assert.equal(String((await wave).metadata?.user_id), '2',
      'pusher-js passes the sender\'s user_id');
  assert.equal(String(alice.recorder.all(named('client-wave'))[0].user_id),
      '2');

  const members = aliceRoom.subscription.members;
  assert.equal(members.count, 2);
  assert.deepEqual(members.me.info, { id: 1, name: 'Alice' });
  const info = await (await sdk.get({ path: `/channels/presence-${room}`,
    params: { info: 'user_count' } })).json();
  assert.equal(info.user_count, 2);
  const users = await (await sdk.get(
      { path: `/channels/presence-${room}/users` })).json();
  assert.deepEqual(users.users.map((u) => String(u.id)).sort(), ['1', '2']);

  bob.leave(room);
  await nextCall(alice, 'leaving', 'alice seeing bob leave');
  assert.deepEqual(calls(alice, 'leaving'), [{ id: 2, name: 'Bob' }]);
  assert.equal(members.count, 1);
  assert.equal(bob.connectionStatus(), 'connected');
});

test('one user in two tabs joins once and leaves once', async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const tabs = [await connectEcho(t, 'token-bob'),
    await connectEcho(t, 'token-bob')];
  const room = 'chat.tabs';
  alice.join(room).joining(heard(alice, 'joining'))
      .leaving(heard(alice, 'leaving'));
  await subscribed(alice.join(room), 'alice in the room');
  await subscribed(alice.channel('tabs-barrier'), 'the barrier channel');
  for (const tab of tabs)
    await subscribed(tab.join(room), 'a tab of bob\'s');
  await nextCall(alice, 'joining', 'bob joining');

  tabs[0].leave(room);
  const deadline = Date.now() + WAIT_MS;
  while ((await channelInfo(`presence-${room}`)).subscription_count !== 2) {
    assert.ok(Date.now() < deadline, 'the server to drop bob\'s first tab');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await barrier('tabs-barrier', [alice]);
  assert.equal(calls(alice, 'leaving').length, 0,
      'bob is still there in his other tab');

  tabs[1].disconnect();
  await nextCall(alice, 'leaving', 'bob leaving with his last tab');
  await barrier('tabs-barrier', [alice]);
  assert.deepEqual(calls(alice, 'joining'), [{ id: 2, name: 'Bob' }]);
  assert.deepEqual(calls(alice, 'leaving'), [{ id: 2, name: 'Bob' }]);
});

/* ---- leave ---- */
test('leave() unsubscribes every kind of the channel; nothing more arrives',
    async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  await subscribed(alice.channel('chat.leave')
      .listen('.ping', heard(alice, 'public')), 'chat.leave');
  await subscribed(alice.private('chat.leave')
      .listen('.ping', heard(alice, 'private')), 'private-chat.leave');
  await subscribed(alice.join('chat.leave'), 'presence-chat.leave');
  await subscribed(alice.channel('leave-barrier'), 'the barrier channel');
  const names = ['chat.leave', 'private-chat.leave', 'presence-chat.leave'];
  for (const name of names)
    assert.equal((await channelInfo(name)).occupied, true, name);

  alice.leave('chat.leave');
  for (const name of names) {
    const deadline = Date.now() + WAIT_MS;
    while ((await channelInfo(name)).occupied) {
      assert.ok(Date.now() < deadline, `the server to vacate ${name}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  await sdk.trigger(names, 'ping', { after: 'leave' });
  await barrier('leave-barrier', [alice]);
  assert.equal(calls(alice, 'public').length + calls(alice, 'private').length,
      0);
  assert.equal(alice.recorder.all(named('ping')).length, 0);
  assert.deepEqual(Object.keys(alice.connector.channels), ['leave-barrier']);
});

/* ---- encrypted private channels ---- */
test('encryptedPrivate(): the SDK\'s encrypted broadcast is read, client ' +
    'events are refused by pusher-js and by the server', async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const bob = await connectEcho(t, 'token-bob');
  const name = 'private-encrypted-vault.team';
  const vaults = [];
  for (const echo of [alice, bob]) {
    vaults.push(await subscribed(echo.encryptedPrivate('vault.team')
        .listen('Secret', heard(echo, 'secret'))
        .listenForWhisper('peek', heard(echo, 'peek')), name));
    await subscribed(echo.channel('vault-barrier'), 'the barrier channel');
  }

  await sdk.trigger(name, 'App\\Events\\Secret', { code: 1234 });
  await nextCall(bob, 'secret', 'the decrypted event');
  assert.deepEqual(calls(bob, 'secret'), [{ code: 1234 }]);
  const raw = bob.recorder.all(named('App\\Events\\Secret'))[0];
  assert.equal(raw.data.code, undefined, 'the server carried ciphertext');
  assert.equal(typeof raw.data.ciphertext, 'string');

  assert.throws(() => vaults[0].whisper('peek', { code: 1234 }),
      /not currently supported for encrypted channels/);
  /* what a client that does not check sends */
  alice.connector.pusher.send_event('client-peek', { code: 1234 }, name);
  const error = await alice.recorder.next(named('pusher:error'),
      'pusher:error for a client event on an encrypted channel');
  assert.equal(error.data.code, 4303);
  await barrier('vault-barrier', [alice, bob]);
  assert.equal(bob.recorder.all(named('client-peek')).length, 0);
  assert.equal(calls(bob, 'peek').length, 0);
  assert.equal(alice.connectionStatus(), 'connected');
});

/* ---- user authentication ---- */
test('signin() through /broadcasting/user-auth, then sendToUser',
    async (t) => {
  const alice = await connectEcho(t, 'token-alice');
  const pusher = alice.connector.pusher;
  pusher.user.bind('Reminder', heard(alice, 'reminder'));
  alice.connector.signin();
  const ok = await alice.recorder.next(named('pusher:signin_success'),
      'pusher:signin_success');
  assert.equal(JSON.parse(ok.data.user_data).id, '1');
  /* pusher-js subscribes to the user's own channel once signed in */
  const own = await alice.recorder.next((e) => e.channel ===
      '#server-to-user-1' && e.event.includes('subscription_'),
  'the answer to the subscription to #server-to-user-1');
  assert.equal(own.event, 'pusher_internal:subscription_succeeded');
  assert.equal(pusher.user.serverToUserChannel.subscribed, true);
  await sdk.sendToUser('1', 'Reminder', { at: '09:00' });
  await nextCall(alice, 'reminder', 'the event sent to user 1');
  assert.deepEqual(calls(alice, 'reminder'), [{ at: '09:00' }]);
});

/* ---- Reverb's front-end configuration ---- */
test('broadcaster \'reverb\' with Reverb\'s echo.js options', async (t) => {
  const echo = await connectEcho(t, 'token-alice', {
    broadcaster: 'reverb',
    cluster: undefined,
  });
  await subscribed(echo.channel('reverb-style')
      .listen('Hello', heard(echo, 'hello')), 'reverb-style');
  await sdk.trigger('reverb-style', 'App\\Events\\Hello', { from: 'sdk' });
  await nextCall(echo, 'hello', 'the event through a Reverb-shaped Echo');
  assert.deepEqual(calls(echo, 'hello'), [{ from: 'sdk' }]);
});

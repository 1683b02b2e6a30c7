// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Watchlist events of legba-server with the real clients: users signed in
// with pusher-js (pusher.signin(), user data signed by the pusher SDK's
// authenticateUser with a "watchlist") hear through
// pusher.user.watchlist.bind('online' | 'offline') when the users they
// watch come and go, on one instance and across two through a redis-server;
// watchlists too long or not lists of user ids are refused and counted.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  connectClient, disconnectAll, haveRedis, metricUntil, metrics, named,
  sdkFor, startRedis, startServer,
} from './server.mjs';

const cleanups = [];

after(async () => {
  for (const cleanup of cleanups.reverse())
    await cleanup();
});

async function server (args = [], app = {})
{
  const s = await startServer({ ...app, args });
  cleanups.push(async () => {
    const status = await s.stop();
    assert.deepEqual(status, { code: 0, signal: null },
        `legba-server exits 0 on SIGTERM; its log:\n${s.log()}`);
  });
  return s;
}

/* A pusher-js client signed in as id (with watchlist, when given), whose
 * watchlist events are recorded in order as "online a,b" / "offline a". */
async function user (s, id, watchlist)
{
  const sdk = sdkFor(s);
  const userData = { id, user_info: { name: id } };
  if (watchlist !== undefined)
    userData.watchlist = watchlist;
  const pusher = await connectClient(s, { userAuthentication: {
    customHandler: ({ socketId }, callback) => callback(null,
        sdk.authenticateUser(socketId, userData)),
  } });
  cleanups.push(() => disconnectAll([pusher]));
  pusher.watched = [];
  for (const name of ['online', 'offline']) {
    pusher.user.watchlist.bind(name, (event) => {
      assert.equal(event.name, name);
      pusher.watched.push(`${name} ${event.user_ids.join(',')}`);
      pusher.recorder.push({ event: 'watchlist' });
    });
  }
  pusher.signin();
  await pusher.recorder.next((e) => e.event === 'pusher:signin_success' ||
      e.event === 'pusher:error', `${id} to be signed in or refused`);
  return pusher;
}

/* Resolves once the client heard `what`, and checks it heard exactly
 * `expected` up to then. */
async function heard (pusher, what, expected)
{
  await pusher.recorder.until(() => pusher.watched.includes(what),
      `the watchlist event "${what}"`);
  assert.deepEqual(pusher.watched.slice(0, expected.length), expected);
  assert.equal(pusher.watched.indexOf(what), expected.length - 1,
      `nothing between: ${pusher.watched}`);
}

test('online at sign-in, then online and offline as users come and go',
    async () => {
      const s = await server();
      const bob = await user(s, 'bob');
      const alice = await user(s, 'alice', ['bob', 'carol', 'dave', 'erin']);
      await heard(alice, 'online bob', ['online bob']);

      const carol = await user(s, 'carol');
      await heard(alice, 'online carol', ['online bob', 'online carol']);
      /* A second connection of bob's, then his first one closes: he is
       * still online. dave signing in marks the moment. */
      const bob2 = await user(s, 'bob');
      await disconnectAll([bob]);
      await user(s, 'dave');
      await disconnectAll([carol]);
      await heard(alice, 'offline carol', ['online bob', 'online carol',
        'online dave', 'offline carol']);
      await disconnectAll([bob2]);
      await heard(alice, 'offline bob', ['online bob', 'online carol',
        'online dave', 'offline carol', 'offline bob']);
      assert.ok((await metrics(s)).legba_watchlist_events_total >= 5);

      /* A user without a watchlist hears nothing. */
      const frank = await user(s, 'frank');
      await user(s, 'erin');
      await heard(alice, 'online erin', alice.watched.slice(0, 5)
          .concat(['online erin']));
      assert.deepEqual(frank.watched, []);
    });

test('a watchlist over max-watchlist-users or not a list of user ids is ' +
    'refused with 4009, counted; other sockets carry on', async () => {
  const s = await server(['--max-watchlist-users', '3']);
  const watcher = await user(s, 'watcher', ['w1']);
  const bad = [
    Array.from({ length: 4 }, (_, i) => `u${i}`),
    'not-a-list',
    ['ok', 42],
    [''],
  ];
  const messages = [];
  for (const watchlist of bad) {
    const p = await user(s, `bad-${messages.length}`, watchlist);
    const error = await p.recorder.next(named('pusher:error'),
        'the refusal');
    assert.equal(error.data.code, 4009);
    messages.push(error.data.message);
    await p.recorder.until(() => p.connection.state !== 'connected',
        'the refused socket to be closed');
  }
  assert.match(messages[0], /has 4 user ids, over the limit of 3/);
  assert.match(messages[1], /must be an array of user ids/);
  assert.match(messages[2], /item 1 is not a non-empty string/);
  assert.match(messages[3], /item 0 is not a non-empty string/);
  await metricUntil(s, 'legba_watchlist_refusals_total', (v) => v === 4,
      'the refusals counted');
  /* The refused users never came online. */
  await user(s, 'w1');
  await heard(watcher, 'online w1', ['online w1']);

  /* Pusher's own bound by default: 100 user ids. */
  const t = await server();
  const many = await user(t, 'many',
      Array.from({ length: 101 }, (_, i) => `u${i}`));
  const error = await many.recorder.next(named('pusher:error'), 'refused');
  assert.match(error.data.message, /over the limit of 100/);
  const fine = await user(t, 'fine',
      Array.from({ length: 100 }, (_, i) => `u${i}`));
  assert.equal(fine.recorder.all(named('pusher:error')).length, 0);
});

test('with two instances, online means signed in anywhere in the cluster',
    { skip: !haveRedis() && 'redis-server is not installed' }, async () => {
      const redis = await startRedis(cleanups);
      const app = { appId: '11', key: 'watch-key', secret: 'watch-secret' };
      const instance = (id) => server(['--redis', redis.url,
        '--instance-id', id], app);
      const a = await instance('instance-a');
      const b = await instance('instance-b');
      for (const s of [a, b]) {
        await metricUntil(s, 'legba_relay_instances', (v) => v === 1,
            'each instance to see the other');
      }

      /* bob on A before alice signs in on B: online at sign-in (or, if B
       * had not read it yet, as he comes online: the same event). */
      const bobA = await user(a, 'bob');
      const alice = await user(b, 'alice', ['bob', 'carol', 'mark']);
      await heard(alice, 'online bob', ['online bob']);

      /* carol comes and goes on A. */
      const carolA = await user(a, 'carol');
      await heard(alice, 'online carol', ['online bob', 'online carol']);
      /* bob also on B, then gone from A: still online. */
      const bobB = await user(b, 'bob');
      await disconnectAll([bobA]);
      await disconnectAll([carolA]);
      await heard(alice, 'offline carol', ['online bob', 'online carol',
        'offline carol']);
      /* mark signs in on A after bob left it: A's entries arrive in
       * order, so bob's departure from A was read before. */
      await user(a, 'mark');
      await heard(alice, 'online mark', ['online bob', 'online carol',
        'offline carol', 'online mark']);
      await disconnectAll([bobB]);
      await heard(alice, 'offline bob', ['online bob', 'online carol',
        'offline carol', 'online mark', 'offline bob']);
    });

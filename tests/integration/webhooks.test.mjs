// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Webhooks of legba-server in Pusher's format, received by real HTTP
// servers and checked with the pusher SDK's webhook(request).isValid():
// channel and member events, client events, subscription counts, the delay
// that hides a page reload, batching, and receivers that fail, redirect,
// answer garbage or hang, none of which holds up the sockets or another
// app.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  WAIT_MS, connectClient, disconnectAll, haveRedis, roundTrip,
  sdkChannelAuth, sdkFor, startRedis, startServer, subscribed, within,
} from './server.mjs';

const ALL = 'channel_occupied,channel_vacated,member_added,member_removed,' +
    'client_event';
const cleanups = [];

after(async () => {
  for (const cleanup of cleanups.reverse())
    await cleanup();
});

/* An HTTP receiver recording every request; respond(req, res, n) answers
 * the n-th one (from 0), 200 by default. */
class Receiver
{
  constructor (respond = (req, res) => res.end('ok'))
  {
    this.requests = [];
    this.waiters = new Set();
    this.server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        const n = this.requests.length;
        this.requests.push({ headers: req.headers, rawBody: body,
          url: req.url, method: req.method });
        respond(req, res, n);
        for (const w of this.waiters)
          w();
      });
    });
  }

  async listen ()
  {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}/hook`;
    cleanups.push(() => new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(resolve);
    }));
    return this;
  }

  /* The events of every request received, in order. */
  events ()
  {
    return this.requests.flatMap((r) => JSON.parse(r.rawBody).events);
  }

  until (get, reason, ms = WAIT_MS)
  {
    let waiter;
    const p = new Promise((resolve) => {
      waiter = () => {
        const v = get();
        if (v) {
          this.waiters.delete(waiter);
          resolve(v);
        }
      };
      this.waiters.add(waiter);
      waiter();
    });
    return within(p, ms, reason).finally(() => this.waiters.delete(waiter));
  }

  event (match, reason, ms)
  {
    return this.until(() => this.events().find(match), reason, ms);
  }
}

/* A TCP server that accepts and then does `behave` with each socket. */
async function tcpReceiver (behave)
{
  const sockets = new Set();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    behave(socket);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => {
    for (const s of sockets)
      s.destroy();
    server.close(resolve);
  }));
  return { url: `http://127.0.0.1:${server.address().port}/hook` };
}

function configFile (text)
{
  const dir = mkdtempSync(join(tmpdir(), 'legba-webhooks-'));
  const path = join(dir, 'server.conf');
  writeFileSync(path, text);
  return path;
}

function named_event (name)
{
  return (e) => e.name === name;
}

async function start (settings, hooks, extra = '', args = [])
{
  const lines = Object.entries(settings).map(([k, v]) => `${k}=${v}`);
  const server = await startServer({ args: ['--config',
    configFile(`[webhooks]\n${lines.join('\n')}\n${extra}`),
    ...hooks.flatMap((h) => ['--webhook', h]), ...args] });
  cleanups.push(async () => {
    const status = await server.stop();
    assert.deepEqual(status, { code: 0, signal: null },
        `legba-server exits 0 on SIGTERM; its log:\n${server.log()}`);
  });
  return server;
}

async function client (server, userId, sdk = sdkFor(server))
{
  const pusher = await connectClient(server, { channelAuthorization:
      sdkChannelAuth(sdk, { user_id: userId, user_info: { name: userId } }) });
  cleanups.push(() => disconnectAll([pusher]));
  return pusher;
}

/* legba-server's /metrics as {"name{labels}": value}. */
async function metrics (server)
{
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    const m = /^(legba_(?:webhook|relay)_\S+) (\d+)$/.exec(line);
    if (m)
      values[m[1]] = Number(m[2]);
  }
  return values;
}

async function metricUntil (server, name, predicate, reason)
{
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = (await metrics(server))[name] ?? 0;
    if (predicate(value))
      return value;
    if (Date.now() > deadline)
      assert.fail(`timed out waiting for ${reason}: ${name} is ${value}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('signed as the pusher SDK checks them, with Pusher\'s events',
    async () => {
      const hooks = await new Receiver().listen();
      const server = await start({ 'batch-ms': 100, 'delay-ms': 300 },
          [`${hooks.url} ${ALL}`]);
      const sdk = sdkFor(server);
      const alice = await client(server, 'alice', sdk);
      const channel = await subscribed(alice, 'presence-room');

      await hooks.event((e) => e.name === 'channel_occupied' &&
          e.channel === 'presence-room', 'channel_occupied');
      await hooks.event((e) => e.name === 'member_added' &&
          e.channel === 'presence-room' && e.user_id === 'alice',
      'member_added');
      channel.trigger('client-hello', { text: 'hi' });
      const ce = await hooks.event(named_event('client_event'),
          'client_event');
      assert.equal(ce.channel, 'presence-room');
      assert.equal(ce.event, 'client-hello');
      assert.deepEqual(JSON.parse(ce.data), { text: 'hi' });
      assert.equal(ce.socket_id, alice.connection.socket_id);
      assert.equal(ce.user_id, 'alice');

      await disconnectAll([alice]);
      await hooks.event((e) => e.name === 'channel_vacated', 'vacated');
      await hooks.event((e) => e.name === 'member_removed' &&
          e.user_id === 'alice', 'member_removed');

      for (const r of hooks.requests) {
        assert.equal(r.method, 'POST');
        assert.equal(r.headers['content-type'], 'application/json');
        const webhook = sdk.webhook({ headers: r.headers,
          rawBody: r.rawBody });
        assert.ok(webhook.isValid(), `valid: ${r.rawBody}`);
        assert.deepEqual(webhook.getEvents(), JSON.parse(r.rawBody).events);
        assert.ok(Math.abs(webhook.getTime().getTime() - Date.now()) <
            60000, 'time_ms is now');
        const forged = sdk.webhook({ headers: r.headers,
          rawBody: r.rawBody.replace('presence-room', 'presence-roon') });
        assert.equal(forged.isValid(), false);
      }
    });

test('cache_miss: a subscriber of a cache channel with nothing cached',
    async () => {
      const hooks = await new Receiver().listen();
      const server = await start({ 'batch-ms': 20 },
          [`${hooks.url} cache_miss`]);
      const sdk = sdkFor(server);
      const alice = await client(server, 'alice', sdk);
      await subscribed(alice, 'cache-empty');
      await alice.recorder.next((e) => e.event === 'pusher:cache_miss' &&
          e.channel === 'cache-empty', 'pusher:cache_miss');
      const miss = await hooks.event(named_event('cache_miss'), 'cache_miss');
      assert.deepEqual(miss, { name: 'cache_miss', channel: 'cache-empty' });

      /* A cached event: no miss, no webhook. */
      await sdk.trigger('cache-full', 'e', {});
      await subscribed(alice, 'cache-full');
      await alice.recorder.next((e) => e.event === 'e', 'the cached event');
      await subscribed(alice, 'cache-marker');
      await hooks.event((e) => e.channel === 'cache-marker', 'the marker');
      assert.deepEqual(hooks.events().map((e) => e.channel),
          ['cache-empty', 'cache-marker']);
      for (const r of hooks.requests) {
        const webhook = sdk.webhook({ headers: r.headers,
          rawBody: r.rawBody });
        assert.ok(webhook.isValid(), `valid: ${r.rawBody}`);
        assert.deepEqual(webhook.getEvents(), JSON.parse(r.rawBody).events);
      }
    });

/* The subscription_count webhooks of channel, their counts in order. */
function counts (hooks, channel)
{
  return hooks.events().filter((e) => e.name === 'subscription_count' &&
      e.channel === channel).map((e) => e.subscription_count);
}

function countIs (hooks, channel, n)
{
  return hooks.event((e) => e.name === 'subscription_count' &&
      e.channel === channel && e.subscription_count === n,
  `subscription_count ${n} on ${channel}`);
}

function assertValid (sdk, hooks)
{
  for (const r of hooks.requests) {
    const webhook = sdk.webhook({ headers: r.headers, rawBody: r.rawBody });
    assert.ok(webhook.isValid(), `valid: ${r.rawBody}`);
    assert.deepEqual(webhook.getEvents(), JSON.parse(r.rawBody).events);
  }
}

test('subscription_count: the count as it changes, for an app that ' +
    'counts subscriptions', async () => {
  const hooks = await new Receiver().listen();
  const server = await start({ 'batch-ms': 20 },
      [`${hooks.url} subscription_count`], '', ['--subscription-count']);
  const sdk = sdkFor(server);
  const alice = await client(server, 'alice', sdk);
  const bob = await client(server, 'bob', sdk);

  await subscribed(alice, 'news');
  await countIs(hooks, 'news', 1);
  await subscribed(bob, 'news');
  await countIs(hooks, 'news', 2);
  bob.unsubscribe('news');
  await roundTrip(bob);
  await hooks.until(() => counts(hooks, 'news').length === 3,
      'subscription_count 1 on news again');
  /* presence channels have their members instead */
  await subscribed(alice, 'presence-room');
  await subscribed(alice, 'marker');
  await countIs(hooks, 'marker', 1);
  assert.deepEqual(counts(hooks, 'news'), [1, 2, 1]);
  assert.deepEqual(counts(hooks, 'presence-room'), []);
  assert.deepEqual(hooks.events()[0],
      { name: 'subscription_count', channel: 'news', subscription_count: 1 });
  assertValid(sdk, hooks);
});

test('subscription_count: a burst of subscribers within a second sends ' +
    'the last count, not one per subscriber', async () => {
  const hooks = await new Receiver().listen();
  const server = await start({ 'batch-ms': 20 },
      [`${hooks.url} subscription_count`], '', ['--subscription-count']);
  const sdk = sdkFor(server);
  const BURST = 8;
  const crowd = await Promise.all(Array.from({ length: BURST },
      (_, i) => client(server, `u${i}`, sdk)));
  await Promise.all(crowd.map((c) => subscribed(c, 'crowd')));
  await countIs(hooks, 'crowd', BURST);
  /* The hub's tick may fall within the burst once: one count before it,
   * the last one after. */
  const seen = counts(hooks, 'crowd');
  assert.ok(seen.length <= 2, `throttled: ${seen}`);
  assert.equal(seen.at(-1), BURST);
  assertValid(sdk, hooks);
});

test('a page reload within the delay sends neither member_removed nor ' +
    'member_added; a real leave sends both after it', async () => {
  const hooks = await new Receiver().listen();
  const server = await start({ 'batch-ms': 50, 'delay-ms': 1500 },
      [`${hooks.url} ${ALL}`]);
  const sdk = sdkFor(server);
  const alice = await client(server, 'alice', sdk);
  const bob = await client(server, 'bob', sdk);
  await subscribed(alice, 'presence-room');
  await subscribed(bob, 'presence-room');
  await hooks.event((e) => e.name === 'member_added' && e.user_id === 'bob',
      'bob added');

  /* Alice reloads her page: a new socket joins again at once. */
  await disconnectAll([alice]);
  const alice2 = await client(server, 'alice', sdk);
  await subscribed(alice2, 'presence-room');
  /* Bob leaves for good after that: his member_removed, held as long,
   * comes after anything held for alice. */
  await disconnectAll([bob]);
  await hooks.event((e) => e.name === 'member_removed' && e.user_id === 'bob',
      'bob removed');
  const aliceEvents = hooks.events().filter((e) => e.user_id === 'alice');
  assert.deepEqual(aliceEvents.map((e) => e.name), ['member_added'],
      'one member_added for alice and no member_removed');

  await disconnectAll([alice2]);
  await hooks.event((e) => e.name === 'member_removed' &&
      e.user_id === 'alice', 'alice removed');
  await hooks.event(named_event('channel_vacated'), 'vacated');
  assert.equal(hooks.events().filter(named_event('channel_occupied')).length,
      1, 'one channel_occupied');
});

test('the events of a window go in one request', async () => {
  const hooks = await new Receiver().listen();
  const server = await start({ 'batch-ms': 400 },
      [`${hooks.url} client_event`]);
  const pusher = await client(server, 'alice');
  const channel = await subscribed(pusher, 'private-batch');
  for (let i = 0; i < 5; i++)
    channel.trigger('client-n', { i });
  await roundTrip(pusher);
  await hooks.until(() => hooks.events().length === 5, 'five client events');
  assert.ok(hooks.requests.length < 5,
      `batched: ${hooks.requests.length} requests for 5 events`);
  assert.deepEqual(hooks.events().map((e) => JSON.parse(e.data).i),
      [0, 1, 2, 3, 4], 'in order');
});

test('failures are retried with backoff; redirects are not followed; ' +
    'garbage and hangs are counted', async () => {
  const flaky = await new Receiver((req, res, n) => {
    res.statusCode = n < 2 ? 500 : 200;
    res.end(n < 2 ? 'try again' : 'ok');
  }).listen();
  const target = await new Receiver().listen();
  const redirect = await new Receiver((req, res) => {
    res.statusCode = 302;
    res.setHeader('Location', target.url);
    res.end();
  }).listen();
  const garbage = await tcpReceiver((socket) => socket.end('garbage\r\n\r\n'));
  const hang = await tcpReceiver(() => {});
  const server = await start({ 'batch-ms': 20, 'backoff-ms': 50,
    timeout: 1, retry: 30 }, [flaky.url, redirect.url, garbage.url, hang.url]
      .map((url) => `${url} channel_occupied`));
  const pusher = await client(server, 'alice');
  await subscribed(pusher, 'news');

  await flaky.until(() => flaky.requests.length === 3, 'two 500s, then 200');
  for (const r of flaky.requests)
    assert.equal(JSON.parse(r.rawBody).events[0].channel, 'news');
  await metricUntil(server, 'legba_webhook_events_sent_total{app="' +
      server.appId + '",webhook="0"}', (v) => v === 1, 'delivered once');
  assert.equal((await metrics(server))['legba_webhook_requests_total{app="' +
      server.appId + '",webhook="0",result="status"}'], 2);

  const label = (i, result) => `legba_webhook_requests_total{app="` +
      `${server.appId}",webhook="${i}",result="${result}"}`;
  await metricUntil(server, label(1, 'redirect'), (v) => v >= 2,
      'redirects counted and retried');
  assert.equal(target.requests.length, 0, 'the redirect is not followed');
  await metricUntil(server, label(2, 'network'), (v) => v >= 1,
      'garbage counted');
  await metricUntil(server, label(3, 'timeout'), (v) => v >= 1,
      'the hang counted as a timeout');
  /* The server still serves. */
  await roundTrip(pusher);
});

test('a receiver that never answers holds up neither the sockets nor ' +
    'another app; its queue stays bounded and what it drops is counted',
async () => {
  const hang = await tcpReceiver(() => {});
  const healthy = await new Receiver().listen();
  const server = await start({ 'batch-ms': 20, 'max-queued': 20,
    timeout: 60 }, [`${hang.url} client_event`],
  `[app other]\nid=other\nkey=other-key\nsecret=other-secret\n` +
      `webhooks=${healthy.url} channel_occupied\n`);
  const SOCKETS = 1000;
  const clients = [];
  for (let i = 0; i < SOCKETS; i += 20) {
    clients.push(...await Promise.all(Array.from({ length: 20 },
        (_, j) => client(server, `u${i + j}`))));
  }
  const channels = await Promise.all(clients.map((c, i) =>
    subscribed(c, `private-pair-${i >> 1}`)));

  /* Every socket chats with its pair: each message relayed at once. */
  for (let round = 0; round < 3; round++) {
    channels.forEach((ch, i) => ch.trigger('client-chat', { round, from: i }));
    await Promise.all(clients.map((c, i) => c.recorder.next((e) =>
      e.event === 'client-chat' && e.data.round === round &&
        e.data.from === (i ^ 1), `round ${round} relayed to socket ${i}`)));
  }

  /* Another app's webhook is delivered meanwhile. */
  const other = await connectClient({ ...server, key: 'other-key' });
  cleanups.push(() => disconnectAll([other]));
  await subscribed(other, 'lobby');
  await healthy.event((e) => e.name === 'channel_occupied' &&
      e.channel === 'lobby', 'the other app\'s webhook');

  const labels = `{app="${server.appId}",webhook="0"`;
  const dropped = await metricUntil(server,
      `legba_webhook_events_dropped_total${labels},reason="queue-full"}`,
      (v) => v > 0, 'drops counted');
  assert.ok(dropped >= SOCKETS * 3 - 20 - 100, `dropped ${dropped}`);
  const queued = (await metrics(server))[`legba_webhook_queued_events${labels}}`];
  assert.ok(queued <= 20 + 100, `queued ${queued} within the bound`);
  assert.match(server.log(), /webhook-queue-full/);
});

test('with two instances, one webhook per transition of the cluster',
    { skip: !haveRedis() && 'redis-server is not installed' }, async () => {
      const hooks = await new Receiver().listen();
      const { url: redis } = await startRedis(cleanups);
      const app = { appId: '7', key: 'cluster-key', secret: 'cluster-secret' };
      const instance = async (id) => {
        const server = await startServer({ ...app, args: ['--config',
          configFile('[webhooks]\nbatch-ms=20\ndelay-ms=300\n'), '--redis',
          redis, '--instance-id', id, '--webhook', `${hooks.url} ${ALL}`] });
        cleanups.push(() => server.stop());
        return server;
      };
      const a = await instance('instance-a');
      const b = await instance('instance-b');
      for (const s of [a, b]) {
        await metricUntil(s, 'legba_relay_instances', (v) => v === 1,
            'each instance to see the other');
      }

      const alice = await client(a, 'alice');
      const bob = await client(b, 'bob');
      await subscribed(alice, 'presence-room');
      await subscribed(bob, 'presence-room');
      await hooks.event((e) => e.name === 'member_added' &&
          e.user_id === 'bob', 'bob added');
      await disconnectAll([alice]);
      await disconnectAll([bob]);
      await hooks.event(named_event('channel_vacated'), 'vacated');
      /* A marker after everything: any duplicate would have come by now. */
      const marker = await client(b, 'carol');
      await subscribed(marker, 'marker');
      await hooks.event((e) => e.name === 'channel_occupied' &&
          e.channel === 'marker', 'the marker');

      const seen = hooks.events().filter((e) => e.channel === 'presence-room')
        .map((e) => `${e.name} ${e.user_id ?? ''}`.trim()).sort();
      assert.deepEqual(seen, ['channel_occupied', 'channel_vacated',
        'member_added alice', 'member_added bob', 'member_removed alice',
        'member_removed bob']);
      for (const r of hooks.requests) {
        assert.ok(sdkFor(a).webhook({ headers: r.headers,
          rawBody: r.rawBody }).isValid());
      }
    });

test('with two instances, one subscription_count webhook per change of ' +
    'the cluster\'s count',
{ skip: !haveRedis() && 'redis-server is not installed' }, async () => {
  const hooks = await new Receiver().listen();
  const { url: redis } = await startRedis(cleanups);
  const app = { appId: '8', key: 'count-key', secret: 'count-secret' };
  const instance = async (id) => {
    const server = await startServer({ ...app, args: ['--config',
      configFile('[webhooks]\nbatch-ms=20\n'), '--redis', redis,
      '--instance-id', id, '--subscription-count',
      '--webhook', `${hooks.url} subscription_count`] });
    cleanups.push(() => server.stop());
    return server;
  };
  const a = await instance('instance-a');
  const b = await instance('instance-b');
  for (const s of [a, b]) {
    await metricUntil(s, 'legba_relay_instances', (v) => v === 1,
        'each instance to see the other');
  }

  const alice = await client(a, 'alice');
  const bob = await client(b, 'bob');
  await subscribed(alice, 'news');
  await countIs(hooks, 'news', 1);
  await subscribed(bob, 'news');
  await countIs(hooks, 'news', 2);
  bob.unsubscribe('news');
  await roundTrip(bob);
  await hooks.until(() => counts(hooks, 'news').length === 3,
      'subscription_count 1 on news again');
  /* Markers on both instances after everything: any duplicate of the
   * news counts would have come by now. */
  await subscribed(alice, 'marker-a');
  await subscribed(bob, 'marker-b');
  await countIs(hooks, 'marker-a', 1);
  await countIs(hooks, 'marker-b', 1);
  assert.deepEqual(counts(hooks, 'news'), [1, 2, 1]);
  assert.deepEqual(counts(hooks, 'marker-a'), [1]);
  assert.deepEqual(counts(hooks, 'marker-b'), [1]);
  assertValid(sdkFor(a), hooks);
});

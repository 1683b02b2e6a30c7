// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Cache channels of legba-server with the real clients: the last event
// published with the pusher SDK (or sent as a client event) reaches a new
// pusher-js subscriber right after its subscription succeeded, or
// pusher:cache_miss comes; the TTL and the per-app bounds, counted in
// /metrics; encrypted cache channels keep the ciphertext; and with two
// instances and a redis-server, a subscriber on one instance gets what was
// published on the other, even on an instance started after the publish.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  WAIT_MS, connectClient, disconnectAll, haveRedis, metricUntil, metrics,
  named, sdkChannelAuth, sdkFor, startRedis, startServer, subscribed,
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

async function client (s, sdk = sdkFor(s), options = {})
{
  const pusher = await connectClient(s, { channelAuthorization:
      sdkChannelAuth(sdk, { user_id: 'u1', user_info: { name: 'u1' } }),
  ...options });
  cleanups.push(() => disconnectAll([pusher]));
  return pusher;
}

/* Subscribes a new client and resolves with what came right after the
 * subscription succeeded: the cached event or pusher:cache_miss, as
 * pusher-js emits it on the channel. */
async function firstAfterSubscribing (s, name, sdk, options)
{
  const pusher = await client(s, sdk, options);
  const heard = [];
  const channel = pusher.subscribe(name);
  channel.bind_global((event, data) => heard.push({ event, data }));
  await pusher.recorder.until(() => heard.some((h) =>
    !h.event.startsWith('pusher:subscription_succeeded')),
  `the cached event or pusher:cache_miss on ${name}`);
  const events = heard.map((h) => h.event);
  assert.equal(events[0], 'pusher:subscription_succeeded',
      `subscription_succeeded first: ${events}`);
  return { pusher, channel, first: heard[1] };
}

test('the last event is replayed to a new subscriber; none: ' +
    'pusher:cache_miss', async () => {
  const s = await server();
  const sdk = sdkFor(s);

  const miss = await firstAfterSubscribing(s, 'cache-news', sdk);
  assert.equal(miss.first.event, 'pusher:cache_miss');
  await sdk.trigger('cache-news', 'headline', { n: 1 });
  await miss.pusher.recorder.next(named('headline'), 'the live event');
  await sdk.trigger('cache-news', 'headline', { n: 2 });

  const hit = await firstAfterSubscribing(s, 'cache-news', sdk);
  assert.deepEqual(hit.first, { event: 'headline', data: { n: 2 } });
  const values = await metrics(s);
  assert.equal(values.legba_cache_hits_total, 1);
  assert.equal(values.legba_cache_misses_total, 1);
  assert.equal(values.legba_cache_channels, 1);

  /* A plain channel caches nothing. */
  await sdk.trigger('news', 'headline', { n: 3 });
  const plain = await client(s, sdk);
  await subscribed(plain, 'news');
  await sdk.trigger('news', 'marker', {});
  await plain.recorder.next(named('marker'), 'the marker');
  assert.equal(plain.recorder.all(named('headline')).length, 0);
});

test('client events are cached on private and presence cache channels',
    async () => {
      const s = await server();
      const sdk = sdkFor(s);
      for (const name of ['private-cache-chat', 'presence-cache-room']) {
        const sender = await client(s, sdk);
        const channel = await subscribed(sender, name);
        channel.trigger('client-typing', { who: 'sender' });
        const late = await firstAfterSubscribing(s, name, sdk);
        assert.equal(late.first.event, 'client-typing', name);
        assert.deepEqual(late.first.data, { who: 'sender' });
      }
    });

test('encrypted cache channels keep the ciphertext as published and ' +
    'refuse client events', async () => {
  const s = await server();
  const sdk = sdkFor(s, { encryptionMasterKeyBase64:
      randomBytes(32).toString('base64') });
  const name = 'private-encrypted-cache-vault';
  await sdk.trigger(name, 'secret', { text: 'the plaintext' });

  const late = await firstAfterSubscribing(s, name, sdk);
  /* pusher-js decrypted it with the channel's shared secret */
  assert.deepEqual(late.first, { event: 'secret',
    data: { text: 'the plaintext' } });
  /* the socket carried ciphertext only */
  const raw = late.pusher.recorder.all(named('secret'))[0];
  assert.ok(raw.data.ciphertext && raw.data.nonce, JSON.stringify(raw));
  assert.ok(!JSON.stringify(raw).includes('plaintext'));

  late.pusher.send_event('client-x', { text: 'no' }, name);
  const error = await late.pusher.recorder.next(named('pusher:error'),
      'client events refused on an encrypted channel');
  assert.equal(error.data.code, 4303);
});

test('an event is kept cache-ttl seconds', async () => {
  const s = await server(['--cache-ttl', '1']);
  const sdk = sdkFor(s);
  await sdk.trigger('cache-clock', 'tick', {});
  const published = Date.now();
  const hit = await firstAfterSubscribing(s, 'cache-clock', sdk);
  assert.equal(hit.first.event, 'tick');

  /* New subscribers until one misses: the event expired. */
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const next = await firstAfterSubscribing(s, 'cache-clock', sdk);
    await disconnectAll([next.pusher]);
    if (next.first.event === 'pusher:cache_miss')
      break;
    assert.ok(Date.now() < deadline, 'the cached event expires');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(Date.now() - published >= 1000, 'kept for at least the TTL');
  await metricUntil(s, 'legba_cache_expired_total', (v) => v === 1,
      'the expiry counted');
});

test('past an app\'s bounds the oldest go, counted; an event larger than ' +
    'the byte bound is not kept', async () => {
  const s = await server(['--max-cache-channels', '2',
    '--max-cache-bytes', '300']);
  const sdk = sdkFor(s);
  for (const name of ['cache-a', 'cache-b', 'cache-c'])
    await sdk.trigger(name, 'e', { name });
  assert.equal((await firstAfterSubscribing(s, 'cache-a', sdk)).first.event,
      'pusher:cache_miss', 'the oldest went');
  assert.equal((await firstAfterSubscribing(s, 'cache-c', sdk)).first.event,
      'e');
  await sdk.trigger('cache-d', 'e', { text: 'x'.repeat(400) });
  assert.equal((await firstAfterSubscribing(s, 'cache-d', sdk)).first.event,
      'pusher:cache_miss', 'too large to keep');
  const values = await metrics(s);
  assert.equal(values['legba_cache_evicted_total{bound="channels"}'], 1);
  assert.equal(values.legba_cache_refused_total, 1);
  assert.ok(values.legba_cache_bytes <= 300);
});

test('a malformed cache setting stops the server with a message',
    async () => {
      const r = spawnSync(process.env.LEGBA_SERVER, ['--port', '0',
        '--app-id', '1', '--app-key', 'k', '--app-secret', 's',
        '--cache-ttl', 'soon'], { encoding: 'utf8' });
      assert.equal(r.status, 2);
      assert.match(r.stderr, /cache-ttl/);
      const zero = spawnSync(process.env.LEGBA_SERVER, ['--port', '0',
        '--app-id', '1', '--app-key', 'k', '--app-secret', 's',
        '--cache-ttl', '0'], { encoding: 'utf8' });
      assert.equal(zero.status, 2);
      assert.match(zero.stderr, /cache-ttl/);
    });

test('with two instances the cache is the cluster\'s', { skip: !haveRedis() &&
    'redis-server is not installed' }, async () => {
  const redis = await startRedis(cleanups);
  const app = { appId: '9', key: 'cache-key', secret: 'cache-secret' };
  const instance = (id) => server(['--redis', redis.url, '--instance-id', id,
    '--cache-ttl', '60'], app);
  const a = await instance('instance-a');
  await metricUntil(a, 'legba_relay_up', (v) => v === 1, 'A on Redis');
  /* Published before B exists: B reads it from Redis. */
  await sdkFor(a).trigger('cache-early', 'e', { from: 'a' });
  const b = await instance('instance-b');
  for (const s of [a, b]) {
    await metricUntil(s, 'legba_relay_instances', (v) => v === 1,
        'each instance to see the other');
  }
  const early = await firstAfterSubscribing(b, 'cache-early', sdkFor(b));
  assert.deepEqual(early.first, { event: 'e', data: { from: 'a' } });

  /* The key expires with the TTL in Redis. */
  const pttl = spawnSync('redis-cli', ['-s', redis.socket, 'PTTL',
    'legba:cache:9:cache-early'], { encoding: 'utf8' });
  const ms = Number(pttl.stdout.trim());
  assert.ok(ms > 0 && ms <= 60000, `PTTL ${pttl.stdout}`);

  /* Published on B while both run: a subscriber on A gets it. */
  await sdkFor(b).trigger('cache-live', 'e', { from: 'b' });
  const live = await firstAfterSubscribing(a, 'cache-live', sdkFor(a));
  assert.deepEqual(live.first, { event: 'e', data: { from: 'b' } });

  /* Nothing anywhere: a miss, after B looked in Redis. */
  const none = await firstAfterSubscribing(b, 'cache-none', sdkFor(b));
  assert.equal(none.first.event, 'pusher:cache_miss');
});

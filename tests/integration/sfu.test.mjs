// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// SFU rooms (docs/room-protocol.md §8): legba-server coordinates a real
// Janus 1.1 that tests/common/start-janus.sh starts. A pusher-js client
// speaking legba-room/2 joins an SFU room and gets legba:topology; the pin
// and token it gets let it join the Janus VideoRoom as a publisher, a
// forged token, another room's token and a departed member's token do
// not; the VideoRoom goes with the last member; a legba-room/1 client is
// refused; mesh rooms are unchanged; a Janus that is down or silent is a
// named error. Two legba-servers sharing a real redis-server make one VideoRoom
// of a room joined through both at once, on the less loaded of two
// Janus instances; when that Janus dies, they make it again once, on
// the other, and each tells its members where; a placement one server
// changed is followed by the others.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { promisify } from 'node:util';
import {
  WAIT_MS, connectClient, disconnectAll, named, roundTrip, sdkChannelAuth,
  sdkFor, startServer, within,
} from './server.mjs';

const run = promisify(execFile);
const FIXTURE = new URL('../common/start-janus.sh', import.meta.url).pathname;

let janus = null;
let janusDir;
let server;
let downServer;
const clients = [];

/* A TCP port nothing listens on (taken, then released). */
function closedPort ()
{
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

before(async () => {
  janusDir = mkdtempSync(joinPath(tmpdir(), 'legba-janus-'));
  try {
    const { stdout } = await run(FIXTURE, [janusDir], { timeout: 60000 });
    janus = Object.fromEntries(stdout.trim().split('\n')
        .map((line) => line.split(/=(.*)/s).slice(0, 2)));
  } catch (e) {
    if (e.code === 77)
      return;
    throw e;
  }
  server = await startServer({ args: [
    '--janus-url', janus.JANUS_HTTP_URL, '--janus-ws-url', janus.JANUS_WS_URL,
    '--janus-api-secret', janus.JANUS_API_SECRET,
    '--janus-admin-key', janus.JANUS_ADMIN_KEY,
    '--sfu-prefixes', 'class-,stage-',
  ] });
  const port = await closedPort();
  downServer = await startServer({ args: [
    '--janus-url', `http://127.0.0.1:${port}/janus`,
    '--janus-ws-url', `ws://127.0.0.1:${port}/`, '--topology', 'sfu',
  ] });
});

after(async () => {
  await disconnectAll(clients.splice(0));
  for (const s of [server, downServer]) {
    if (!s)
      continue;
    const status = await s.stop();
    assert.deepEqual(status, { code: 0, signal: null },
        `legba-server exits 0 on SIGTERM; its log:\n${s.log()}`);
  }
  await run(FIXTURE, ['--stop', janusDir]);
  rmSync(janusDir, { recursive: true, force: true });
});

/* ---- Janus's HTTP API, as a client holding only a pin and a token ---- */

let transactions = 0;

async function janusPost (path, body)
{
  const response = await fetch(`${janus.JANUS_HTTP_URL}${path}`, {
    method: 'POST',
    body: JSON.stringify({ ...body, transaction: `t${++transactions}`,
      apisecret: janus.JANUS_API_SECRET }),
    signal: AbortSignal.timeout(WAIT_MS),
  });
  return await response.json();
}

/* A session with janus.plugin.videoroom attached. */
async function janusHandle ()
{
  const session = await janusPost('', { janus: 'create' });
  assert.equal(session.janus, 'success', JSON.stringify(session));
  const sid = session.data.id;
  const handle = await janusPost(`/${sid}`, { janus: 'attach',
    plugin: 'janus.plugin.videoroom' });
  assert.equal(handle.janus, 'success', JSON.stringify(handle));
  return { sid, hid: handle.data.id };
}

/* A VideoRoom request answered at once (exists, list...). */
async function videoroom (body)
{
  const { sid, hid } = await janusHandle();
  try {
    const answer = await janusPost(`/${sid}/${hid}`, { janus: 'message',
      body });
    return answer.plugindata.data;
  } finally {
    await janusPost(`/${sid}`, { janus: 'destroy' });
  }
}

/* join ptype publisher: the VideoRoom's event ({videoroom: "joined"} or
 * {error_code, error}). */
async function publisherJoin (sfu, overrides = {})
{
  const { sid, hid } = await janusHandle();
  try {
    const ack = await janusPost(`/${sid}/${hid}`, { janus: 'message',
      body: { request: 'join', ptype: 'publisher', room: sfu.room,
        pin: sfu.pin, token: sfu.token, display: 'probe', ...overrides } });
    assert.equal(ack.janus, 'ack', JSON.stringify(ack));
    const deadline = Date.now() + WAIT_MS;
    while (Date.now() < deadline) {
      const poll = await fetch(`${janus.JANUS_HTTP_URL}/${sid}?maxev=1&` +
          `apisecret=${janus.JANUS_API_SECRET}`,
          { signal: AbortSignal.timeout(WAIT_MS) });
      const event = await poll.json();
      if (event.transaction === ack.transaction && event.plugindata)
        return event.plugindata.data;
    }
    throw new Error('no answer to the VideoRoom join');
  } finally {
    await janusPost(`/${sid}`, { janus: 'destroy' });
  }
}

/* ---- Room members ---- */

let members = 0;

/* A pusher-js client subscribed (or refused) to presence-legba.ROOM with
 * user_info protocol `protocol` (none when null). Resolves with the
 * client and the answer to its subscription. */
async function join (s, room, protocol = 'legba-room/2')
{
  const id = `p${++members}-${Math.random().toString(36).slice(2, 10)}`;
  const userInfo = { identity: id, name: id };
  if (protocol)
    userInfo.protocol = protocol;
  const pusher = await connectClient(s, { channelAuthorization:
    sdkChannelAuth(sdkFor(s), { user_id: id, user_info: userInfo }) });
  clients.push(pusher);
  const channel = `presence-legba.${room}`;
  pusher.subscribe(channel);
  const answer = await pusher.recorder.next((e) => e.channel === channel &&
      (e.event === 'pusher_internal:subscription_succeeded' ||
          e.event === 'pusher:subscription_error'),
      `the answer to ${id}'s subscription to ${channel}`);
  return { pusher, id, channel, answer };
}

async function topologyOf (member)
{
  const event = await member.pusher.recorder.next(
      named('legba:topology', member.channel),
      `legba:topology for ${member.id}`);
  return event.data;
}

async function leave (member)
{
  member.pusher.disconnect();
  await member.pusher.recorder.until(
      () => member.pusher.connection.state === 'disconnected',
      `${member.id} to disconnect`);
}

async function roomExists (id)
{
  const data = await videoroom({ request: 'exists', room: id });
  return data.exists;
}

function skipWithoutJanus (t)
{
  if (janus)
    return false;
  t.skip('janus is not installed');
  return true;
}

test('a legba-room/2 member of an SFU room gets legba:topology, and its ' +
    'pin and token let it join the Janus VideoRoom', async (t) => {
  if (skipWithoutJanus(t))
    return;
  const a = await join(server, 'class-physics');
  assert.equal(a.answer.event, 'pusher_internal:subscription_succeeded');
  const topology = await topologyOf(a);
  assert.deepEqual(Object.keys(topology), ['topology', 'sfu']);
  assert.equal(topology.topology, 'sfu');
  assert.deepEqual(Object.keys(topology.sfu),
      ['kind', 'url', 'room', 'pin', 'token']);
  assert.equal(topology.sfu.kind, 'janus');
  assert.equal(topology.sfu.url, janus.JANUS_WS_URL);
  assert.ok(Number.isSafeInteger(topology.sfu.room) && topology.sfu.room > 0);
  /* It came just before the subscription succeeded, to this socket:
   * the member knows it is an SFU room before it sees the others. */
  const events = a.pusher.recorder.events.filter((e) =>
    e.channel === a.channel).map((e) => e.event);
  assert.deepEqual(events.slice(0, 2),
      ['legba:topology', 'pusher_internal:subscription_succeeded']);

  const joined = await publisherJoin(topology.sfu);
  assert.equal(joined.videoroom, 'joined', JSON.stringify(joined));

  /* Forged: refused by Janus. */
  const forged = await publisherJoin({ ...topology.sfu,
    token: 'f'.repeat(32) });
  assert.equal(forged.error_code, 433, JSON.stringify(forged));
  const noPin = await publisherJoin({ ...topology.sfu, pin: 'wrong' });
  assert.equal(noPin.error_code, 433, JSON.stringify(noPin));

  /* Another member gets its own token, and the topology goes to it
   * only. */
  const b = await join(server, 'class-physics');
  const other = await topologyOf(b);
  assert.equal(other.sfu.room, topology.sfu.room);
  assert.notEqual(other.sfu.token, topology.sfu.token);
  await roundTrip(a.pusher);
  assert.equal(a.pusher.recorder.all(named('legba:topology')).length, 1);

  /* A token of another room does not open this one. */
  const c = await join(server, 'stage-main');
  const stage = await topologyOf(c);
  assert.notEqual(stage.sfu.room, topology.sfu.room);
  const crossed = await publisherJoin({ ...topology.sfu,
    token: stage.sfu.token });
  assert.equal(crossed.error_code, 433, JSON.stringify(crossed));

  /* A member that left: its token is taken back. */
  await leave(a);
  await within((async () => {
    for (;;) {
      const again = await publisherJoin(topology.sfu);
      if (again.error_code === 433)
        return;
      await new Promise((r) => setTimeout(r, 100));
    }
  })(), WAIT_MS, 'Janus to refuse the departed member\'s token');
  assert.equal(await roomExists(topology.sfu.room), true,
      'the VideoRoom stays while a member is in it');

  /* The last member gone: the VideoRoom is destroyed. */
  await leave(b);
  await within((async () => {
    while (await roomExists(topology.sfu.room))
      await new Promise((r) => setTimeout(r, 100));
  })(), WAIT_MS, 'the VideoRoom to be destroyed');
  await leave(c);
});

test('a legba-room/1 client, or one that names no protocol, is refused ' +
    'from an SFU room', async (t) => {
  if (skipWithoutJanus(t))
    return;
  for (const protocol of ['legba-room/1', null]) {
    const old = await join(server, 'class-history', protocol);
    assert.equal(old.answer.event, 'pusher:subscription_error');
    assert.deepEqual(old.answer.data, { type: 'LegbaTopology',
      error: 'room class-history is an SFU room: it needs a client that ' +
        'speaks legba-room/2', status: 400 });
    await roundTrip(old.pusher);
    assert.equal(old.pusher.recorder.all(named('legba:topology')).length, 0);
    const info = await sdkFor(server).get({
      path: '/channels/presence-legba.class-history/users' });
    assert.deepEqual((await info.json()).users, [],
        'never half-joined: not a member');
  }
});

test('a mesh room is unchanged: no legba:topology, legba-room/1 welcome',
    async (t) => {
      if (skipWithoutJanus(t))
        return;
      const m1 = await join(server, 'standup', 'legba-room/1');
      const m2 = await join(server, 'standup');
      for (const m of [m1, m2]) {
        assert.equal(m.answer.event, 'pusher_internal:subscription_succeeded');
        await roundTrip(m.pusher);
        assert.equal(m.pusher.recorder.all(named('legba:topology')).length, 0);
      }
    });

test('a Janus that is down: the subscription fails with ' +
    'LegbaSfuUnavailable, at once', async (t) => {
  if (skipWithoutJanus(t))
    return;
  const m = await join(downServer, 'any-room');
  assert.equal(m.answer.event, 'pusher:subscription_error');
  assert.equal(m.answer.data.type, 'LegbaSfuUnavailable');
  assert.equal(m.answer.data.status, 503);
  assert.match(m.answer.data.error,
      /^room any-room is an SFU room and its SFU cannot be reached: /);
  /* The next member tries again (and fails again, not waits). */
  const n = await join(downServer, 'any-room');
  assert.equal(n.answer.data.type, 'LegbaSfuUnavailable');
});

test('a Janus that accepts connections and never answers: ' +
    'LegbaSfuUnavailable within the server\'s 5 s deadline', async (t) => {
  if (skipWithoutJanus(t))
    return;
  const sockets = new Set();
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const { port } = silent.address();
  const s = await startServer({ args: [
    '--janus-url', `http://127.0.0.1:${port}/janus`,
    '--janus-ws-url', `ws://127.0.0.1:${port}/`, '--topology', 'sfu'] });
  try {
    const started = Date.now();
    const m = await join(s, 'quiet');
    assert.equal(m.answer.event, 'pusher:subscription_error');
    assert.equal(m.answer.data.type, 'LegbaSfuUnavailable');
    /* Refused by its deadline, not by a refused connection. */
    assert.ok(Date.now() - started >= 4000,
        'the server waited for the silent Janus');
    await leave(m);
  } finally {
    await s.stop();
    for (const socket of sockets)
      socket.destroy();
    silent.close();
  }
});

/* ---- Join tokens ---- */

async function mint (s, room, identity)
{
  const { stdout } = await run(process.env.LEGBA_TOKEN, ['--secret', s.secret,
    '--room', room, '--identity', identity, '--name', identity],
  { timeout: WAIT_MS });
  return stdout.trim();
}

test('a join token\'s member says legba-room/2 through the auth endpoint ' +
    'and gets the topology; legba-room/1 by default, refused', async (t) => {
  if (skipWithoutJanus(t))
    return;
  const token = await mint(server, 'class-art', 'carol');
  const answers = [];
  const mine = [];
  for (const protocol of ['legba-room/2', undefined]) {
    const params = { suffix: `s${++members}abcdef` };
    if (protocol)
      params.protocol = protocol;
    const pusher = await connectClient(server, { channelAuthorization: {
      endpoint: `${server.base}/apps/${server.appId}/auth`,
      transport: 'ajax', headers: { Authorization: `Bearer ${token}` },
      params } });
    clients.push(pusher);
    mine.push(pusher);
    pusher.subscribe('presence-legba.class-art');
    answers.push(await pusher.recorder.next((e) =>
      e.channel === 'presence-legba.class-art' &&
        ['legba:topology', 'pusher:subscription_error'].includes(e.event),
    'the topology or the refusal'));
  }
  assert.equal(answers[0].event, 'legba:topology');
  assert.equal(answers[0].data.topology, 'sfu');
  assert.equal(answers[1].event, 'pusher:subscription_error');
  assert.equal(answers[1].data.type, 'LegbaTopology');

  const form = new URLSearchParams({ socket_id: '1.2',
    channel_name: 'presence-legba.class-art', suffix: 'abcdefg',
    protocol: 'legba-room/9' });
  const res = await fetch(`${server.base}/apps/${server.appId}/auth`, {
    method: 'POST', body: form, headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(res.status, 400);
  assert.match(await res.text(),
      /protocol must be legba-room\/1 or legba-room\/2/);
  await disconnectAll(mine);
});

/* ---- Two legba-servers, two Janus instances, one Redis ---- */

function hasRedis ()
{
  return process.env.PATH.split(':').some((dir) =>
    existsSync(joinPath(dir, 'redis-server')));
}

async function startRedis (dir)
{
  const socket = joinPath(dir, 'redis.sock');
  const child = spawn('redis-server', ['--port', '0', '--unixsocket', socket,
    '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  await within((async () => {
    while (!existsSync(socket))
      await new Promise((r) => setTimeout(r, 20));
  })(), WAIT_MS, 'redis-server to make its socket');
  return { url: `unix://${socket}`, stop: () => child.kill('SIGTERM') };
}

async function roomsOn (url)
{
  const saved = janus.JANUS_HTTP_URL;
  janus.JANUS_HTTP_URL = url;
  try {
    return (await videoroom({ request: 'list',
      admin_key: janus.JANUS_ADMIN_KEY })).list.map((r) => r.room);
  } finally {
    janus.JANUS_HTTP_URL = saved;
  }
}

test('two legba-servers sharing Redis make one VideoRoom of a room ' +
    'joined through both at once, on the least loaded Janus', async (t) => {
  if (skipWithoutJanus(t))
    return;
  if (!hasRedis()) {
    t.skip('redis-server is not installed');
    return;
  }
  const dir = mkdtempSync(joinPath(tmpdir(), 'legba-sfu-cluster-'));
  const redis = await startRedis(dir);
  const { stdout } = await run(FIXTURE, [joinPath(dir, 'janus2')], {
    timeout: 60000, env: { ...process.env,
      JANUS_API_SECRET: janus.JANUS_API_SECRET,
      JANUS_ADMIN_KEY: janus.JANUS_ADMIN_KEY } });
  const janus2 = Object.fromEntries(stdout.trim().split('\n')
      .map((line) => line.split(/=(.*)/s).slice(0, 2)));
  const servers = [];
  try {
    /* The first instance holds a room already: the new one goes to the
     * second. */
    const busy = await videoroom({ request: 'create',
      admin_key: janus.JANUS_ADMIN_KEY, is_private: true });
    assert.equal(busy.videoroom, 'created', JSON.stringify(busy));
    const args = (id) => [
      '--janus-url', janus.JANUS_HTTP_URL, '--janus-url', janus2.JANUS_HTTP_URL,
      '--janus-ws-url', janus.JANUS_WS_URL,
      '--janus-ws-url', janus2.JANUS_WS_URL,
      '--janus-api-secret', janus.JANUS_API_SECRET,
      '--janus-admin-key', janus.JANUS_ADMIN_KEY, '--topology', 'sfu',
      '--redis', redis.url, '--instance-id', id];
    const app = { appId: '4242', key: 'cluster-key',
      secret: 'cluster-secret' };
    servers.push(await startServer({ ...app, args: args('sfu-a') }));
    servers.push(await startServer({ ...app, args: args('sfu-b') }));

    const [a, b] = await Promise.all(servers.map((s) => join(s, 'lecture')));
    for (const m of [a, b])
      assert.equal(m.answer.event, 'pusher_internal:subscription_succeeded',
          `${JSON.stringify(m.answer.data)}; logs:\n${servers[0].log()}\n` +
          servers[1].log());
    const [ta, tb] = await Promise.all([topologyOf(a), topologyOf(b)]);
    assert.equal(ta.sfu.room, tb.sfu.room, 'one room for both');
    assert.equal(ta.sfu.pin, tb.sfu.pin);
    assert.equal(ta.sfu.url, janus2.JANUS_WS_URL, 'the less loaded Janus');
    assert.equal(tb.sfu.url, janus2.JANUS_WS_URL);
    /* The instance that lost the race destroyed the room it had made. */
    await within((async () => {
      while ((await roomsOn(janus2.JANUS_HTTP_URL)).length !== 1)
        await new Promise((r) => setTimeout(r, 100));
    })(), WAIT_MS, 'one VideoRoom on the second Janus');
    assert.deepEqual(await roomsOn(janus2.JANUS_HTTP_URL), [ta.sfu.room]);
    const first = await roomsOn(janus.JANUS_HTTP_URL);
    assert.ok(first.includes(busy.room) && !first.includes(ta.sfu.room),
        `the first Janus keeps its own rooms only: ${first}`);
    for (const [m, { sfu }] of [[a, ta], [b, tb]]) {
      const saved = janus.JANUS_HTTP_URL;
      janus.JANUS_HTTP_URL = janus2.JANUS_HTTP_URL;
      try {
        const joined = await publisherJoin(sfu);
        assert.equal(joined.videoroom, 'joined',
            `${m.id}'s token, from its own server: ${JSON.stringify(joined)}`);
      } finally {
        janus.JANUS_HTTP_URL = saved;
      }
    }

    /* Both gone: the room goes, once. */
    await leave(a);
    await leave(b);
    await within((async () => {
      while ((await roomsOn(janus2.JANUS_HTTP_URL)).length !== 0)
        await new Promise((r) => setTimeout(r, 100));
    })(), WAIT_MS, 'the VideoRoom to be destroyed');
    await videoroom({ request: 'destroy', room: busy.room,
      admin_key: janus.JANUS_ADMIN_KEY });
  } finally {
    for (const s of servers) {
      const status = await s.stop();
      assert.deepEqual(status, { code: 0, signal: null },
          `legba-server exits 0 on SIGTERM; its log:\n${s.log()}`);
    }
    await run(FIXTURE, ['--stop', joinPath(dir, 'janus2')]);
    redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('when the Janus holding a room dies, two legba-servers sharing Redis ' +
    'make the room again once, on the live Janus, and tell every member',
async (t) => {
  if (skipWithoutJanus(t))
    return;
  if (!hasRedis()) {
    t.skip('redis-server is not installed');
    return;
  }
  const dir = mkdtempSync(joinPath(tmpdir(), 'legba-sfu-move-'));
  const redis = await startRedis(dir);
  const janus2Dir = joinPath(dir, 'janus2');
  const { stdout } = await run(FIXTURE, [janus2Dir], {
    timeout: 60000, env: { ...process.env,
      JANUS_API_SECRET: janus.JANUS_API_SECRET,
      JANUS_ADMIN_KEY: janus.JANUS_ADMIN_KEY } });
  const janus2 = Object.fromEntries(stdout.trim().split('\n')
      .map((line) => line.split(/=(.*)/s).slice(0, 2)));
  const servers = [];
  try {
    /* The first instance holds a room already: the room goes to the
     * second, which then dies. */
    const busy = await videoroom({ request: 'create',
      admin_key: janus.JANUS_ADMIN_KEY, is_private: true });
    assert.equal(busy.videoroom, 'created', JSON.stringify(busy));
    const args = (id) => [
      '--janus-url', janus.JANUS_HTTP_URL, '--janus-url', janus2.JANUS_HTTP_URL,
      '--janus-ws-url', janus.JANUS_WS_URL,
      '--janus-ws-url', janus2.JANUS_WS_URL,
      '--janus-api-secret', janus.JANUS_API_SECRET,
      '--janus-admin-key', janus.JANUS_ADMIN_KEY, '--topology', 'sfu',
      '--redis', redis.url, '--instance-id', id];
    const app = { appId: '4243', key: 'move-key', secret: 'move-secret' };
    servers.push(await startServer({ ...app, args: args('move-a') }));
    servers.push(await startServer({ ...app, args: args('move-b') }));
    const a = await join(servers[0], 'seminar');
    const ta = await topologyOf(a);
    const b = await join(servers[1], 'seminar');
    const tb = await topologyOf(b);
    assert.equal(ta.sfu.url, janus2.JANUS_WS_URL);
    assert.equal(tb.sfu.room, ta.sfu.room);

    process.kill(Number(janus2.JANUS_PID), 'SIGKILL');
    /* A member joining at once, most likely before the servers' keepalive
     * notices: its token cannot be added to the dead Janus, and it waits
     * for the room made again instead of being refused. */
    const c = await join(servers[0], 'seminar');
    assert.equal(c.answer.event, 'pusher_internal:subscription_succeeded',
        `${JSON.stringify(c.answer.data)}; logs:\n${servers[0].log()}`);
    const tc = await topologyOf(c);
    const moved = await Promise.all([a, b].map((m) =>
      m.pusher.recorder.until(() => {
        const all = m.pusher.recorder.all(named('legba:topology', m.channel));
        return all.length >= 2 && all[1].data;
      }, `a second legba:topology for ${m.id}; logs:\n` +
          `${servers[0].log()}\n${servers[1].log()}`)));
    for (const [m, first, next] of [[a, ta, moved[0]], [b, tb, moved[1]]]) {
      assert.equal(next.topology, 'sfu');
      assert.equal(next.sfu.url, janus.JANUS_WS_URL, 'the live Janus');
      assert.notEqual(next.sfu.room, first.sfu.room);
      assert.equal(next.sfu.token, first.sfu.token, `${m.id} keeps its token`);
      const joined = await publisherJoin(next.sfu);
      assert.equal(joined.videoroom, 'joined',
          `${m.id}'s token in the room made again: ${JSON.stringify(joined)}`);
    }
    assert.equal(moved[0].sfu.room, moved[1].sfu.room, 'one room for both');
    assert.equal(tc.sfu.room, moved[0].sfu.room, 'the latecomer in it too');
    assert.equal(tc.sfu.url, janus.JANUS_WS_URL);
    assert.equal(moved[0].sfu.pin, moved[1].sfu.pin);
    /* Whichever server lost the race destroyed the room it had made. */
    const want = [busy.room, moved[0].sfu.room].sort();
    await within((async () => {
      while (JSON.stringify((await roomsOn(janus.JANUS_HTTP_URL)).sort()) !==
          JSON.stringify(want))
        await new Promise((r) => setTimeout(r, 100));
    })(), WAIT_MS, 'one VideoRoom made again on the live Janus');
    for (const m of [a, b]) {
      await roundTrip(m.pusher);
      assert.equal(m.pusher.recorder.all(named('legba:topology')).length, 2);
    }

    await leave(a);
    await leave(b);
    await leave(c);
    await within((async () => {
      while (await roomExists(moved[0].sfu.room))
        await new Promise((r) => setTimeout(r, 100));
    })(), WAIT_MS, 'the VideoRoom made again to go with its members');
    await videoroom({ request: 'destroy', room: busy.room,
      admin_key: janus.JANUS_ADMIN_KEY });
  } finally {
    for (const s of servers) {
      const status = await s.stop();
      assert.deepEqual(status, { code: 0, signal: null },
          `legba-server exits 0 on SIGTERM; its log:\n${s.log()}`);
    }
    await run(FIXTURE, ['--stop', janus2Dir]);
    redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a room whose placement another legba-server changed is followed: ' +
    'each server tells its members the new room and drops the old one',
async (t) => {
  if (skipWithoutJanus(t))
    return;
  if (!hasRedis()) {
    t.skip('redis-server is not installed');
    return;
  }
  const dir = mkdtempSync(joinPath(tmpdir(), 'legba-sfu-follow-'));
  const redis = await startRedis(dir);
  const socket = redis.url.replace(/^unix:\/\//, '');
  const servers = [];
  try {
    const args = (id) => [
      '--janus-url', janus.JANUS_HTTP_URL, '--janus-ws-url', janus.JANUS_WS_URL,
      '--janus-api-secret', janus.JANUS_API_SECRET,
      '--janus-admin-key', janus.JANUS_ADMIN_KEY, '--topology', 'sfu',
      '--redis', redis.url, '--instance-id', id];
    const app = { appId: '4244', key: 'follow-key', secret: 'follow-secret' };
    servers.push(await startServer({ ...app, args: args('follow-a') }));
    servers.push(await startServer({ ...app, args: args('follow-b') }));
    const a = await join(servers[0], 'workshop');
    const ta = await topologyOf(a);
    const b = await join(servers[1], 'workshop');
    const tb = await topologyOf(b);
    assert.equal(tb.sfu.room, ta.sfu.room);

    /* What a server that found the Janus dead (and the others did not)
     * does: a room made elsewhere, recorded in the placement. */
    const { stdout: keys } = await run('redis-cli', ['-s', socket, '--scan',
      '--pattern', '*sfu:4244:presence-legba.workshop']);
    const key = keys.trim();
    assert.ok(key, 'the room has a placement');
    const made = await videoroom({ request: 'create',
      admin_key: janus.JANUS_ADMIN_KEY, is_private: true, pin: 'follow-pin',
      secret: 'follow-secret-1', allowed: [] });
    assert.equal(made.videoroom, 'created', JSON.stringify(made));
    await run('redis-cli', ['-s', socket, 'SET', key, JSON.stringify({
      janus: janus.JANUS_HTTP_URL, room: made.room, pin: 'follow-pin',
      secret: 'follow-secret-1' })]);

    const next = await Promise.all([a, b].map((m) =>
      m.pusher.recorder.until(() => {
        const all = m.pusher.recorder.all(named('legba:topology', m.channel));
        return all.length >= 2 && all[1].data;
      }, `a second legba:topology for ${m.id}; logs:\n` +
          `${servers[0].log()}\n${servers[1].log()}`)));
    for (const [m, first, moved] of [[a, ta, next[0]], [b, tb, next[1]]]) {
      assert.equal(moved.sfu.room, made.room);
      assert.equal(moved.sfu.pin, 'follow-pin');
      assert.equal(moved.sfu.token, first.sfu.token);
      const joined = await publisherJoin(moved.sfu);
      assert.equal(joined.videoroom, 'joined',
          `${m.id}'s token in the room followed: ${JSON.stringify(joined)}`);
    }
    await within((async () => {
      while (await roomExists(ta.sfu.room))
        await new Promise((r) => setTimeout(r, 100));
    })(), WAIT_MS, 'the room left behind to be destroyed');

    await leave(a);
    await leave(b);
    await within((async () => {
      while (await roomExists(made.room))
        await new Promise((r) => setTimeout(r, 100));
    })(), WAIT_MS, 'the room followed to go with its members');
  } finally {
    for (const s of servers) {
      const status = await s.stop();
      assert.deepEqual(status, { code: 0, signal: null },
          `legba-server exits 0 on SIGTERM; its log:\n${s.log()}`);
    }
    redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

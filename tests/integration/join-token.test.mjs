// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Join tokens (docs/room-protocol.md §2): a participant holding a token minted
// by legba-token joins its room through the server's own auth endpoint
// with pusher-js's ajax authorizer, without the app secret. Expired,
// forged and wrong-room tokens and malformed suffixes are refused.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { promisify } from 'node:util';
import {
  WAIT_MS, connectClient, disconnectAll, named, startServer, within,
} from './server.mjs';

const run = promisify(execFile);

let server;

before(async () => {
  server = await startServer();
});

after(async () => {
  if (!server)
    return;
  const status = await server.stop();
  assert.deepEqual(status, { code: 0, signal: null },
      `legba-server exits 0 on SIGTERM; its log:\n${server.log()}`);
});

async function mint (room, identity, name, secret = server.secret)
{
  const tool = process.env.LEGBA_TOKEN;
  assert.ok(tool, 'LEGBA_TOKEN is set by meson test');
  const { stdout } = await run(tool, ['--secret', secret, '--room', room,
    '--identity', identity, '--name', name], { timeout: WAIT_MS });
  return stdout.trim();
}

const b64url = (value) => Buffer.from(value).toString('base64url');

/* An HS256 JWT made here, so that claims the tool would never mint (an
 * expiry in the past) can be presented. */
function craft (claims, { secret = server.secret, alg = 'HS256' } = {})
{
  const signing = `${b64url(JSON.stringify({ alg, typ: 'JWT' }))}.` +
      b64url(JSON.stringify(claims));
  const signature = alg === 'none' ? '' :
    createHmac('sha256', secret).update(signing).digest('base64url');
  return `${signing}.${signature}`;
}

function claims (room, identity, name, expiresIn)
{
  const now = Math.floor(Date.now() / 1000);
  return { room, sub: identity, name, iat: now, exp: now + expiresIn };
}

function authEndpoint ()
{
  return `${server.base}/apps/${server.appId}/auth`;
}

/* A pusher-js client that authorizes through the server's join-token
 * endpoint, as a browser participant would. */
async function participant (t, token, suffix)
{
  const pusher = await connectClient(server, {
    channelAuthorization: {
      endpoint: authEndpoint(),
      transport: 'ajax',
      headers: { Authorization: `Bearer ${token}` },
      params: { suffix },
    },
  });
  t.after(() => disconnectAll([pusher]));
  return pusher;
}

/* Subscribes and resolves with {channel, ok, error}: pusher-js reports a
 * refused authorization as pusher:subscription_error {type, error,
 * status}. */
async function join (pusher, channelName)
{
  const channel = pusher.subscribe(channelName);
  const outcome = await within(new Promise((resolve) => {
    channel.bind('pusher:subscription_succeeded',
        () => resolve({ channel, ok: true }));
    channel.bind('pusher:subscription_error',
        (error) => resolve({ channel, ok: false, error }));
  }), WAIT_MS, `the subscription to ${channelName} to succeed or fail`);
  return outcome;
}

/* The auth endpoint called directly, as pusher-js's ajax transport does. */
async function postAuth (token, socketId, channelName, suffix)
{
  const form = new URLSearchParams({ socket_id: socketId,
    channel_name: channelName });
  if (suffix !== undefined)
    form.set('suffix', suffix);
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  if (token !== undefined)
    headers.authorization = `Bearer ${token}`;
  const res = await fetch(authEndpoint(), { method: 'POST', body: form,
    headers, signal: AbortSignal.timeout(WAIT_MS) });
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, body };
}

/* ---- join tokens ---- */
test('legba-token mints an HS256 JWT with the room claims', async () => {
  const token = await mint('studio', 'alice', 'Alice');
  const parts = token.split('.');
  assert.equal(parts.length, 3);
  const header = JSON.parse(Buffer.from(parts[0], 'base64url'));
  assert.equal(header.alg, 'HS256');
  const body = JSON.parse(Buffer.from(parts[1], 'base64url'));
  assert.equal(body.room, 'studio');
  assert.equal(body.sub, 'alice');
  assert.equal(body.name, 'Alice');
  assert.ok(body.exp > Date.now() / 1000, 'expires in the future');
  const expected = createHmac('sha256', server.secret)
      .update(`${parts[0]}.${parts[1]}`).digest('base64url');
  assert.equal(parts[2], expected, 'signed with the app secret');
});

test('pusher-js joins the room with a minted token', async (t) => {
  const channelName = 'presence-legba.studio';
  const alice = await participant(t, await mint('studio', 'alice', 'Alice'),
      'abc123');
  const joined = await join(alice, channelName);
  assert.ok(joined.ok, JSON.stringify(joined.error));
  const aliceInfo = { identity: 'alice', name: 'Alice',
    protocol: 'legba-room/1' };
  assert.deepEqual(joined.channel.members.me,
      { id: 'alice-abc123', info: aliceInfo });
  assert.equal(joined.channel.members.count, 1);

  const bob = await participant(t, await mint('studio', 'bob', 'Bob'),
      'def456ghi');
  const bobJoined = await join(bob, channelName);
  assert.ok(bobJoined.ok, JSON.stringify(bobJoined.error));
  assert.deepEqual(bobJoined.channel.members.get('alice-abc123'),
      { id: 'alice-abc123', info: aliceInfo });
  const added = await alice.recorder.next(
      named('pusher_internal:member_added', channelName),
      'member_added for bob');
  assert.deepEqual(added.data, { user_id: 'bob-def456ghi', user_info: {
    identity: 'bob', name: 'Bob', protocol: 'legba-room/1' } });

  /* Signals flow between token holders with the server-added user_id. */
  joined.channel.trigger('client-legba-signal', { to: 'bob-def456ghi',
    from: 'alice-abc123', pc: 'pc1', type: 'bye' });
  const signal = await bob.recorder.next(
      named('client-legba-signal', channelName), 'the signal at bob');
  assert.equal(signal.user_id, 'alice-abc123');
});

test('the endpoint signs exactly what it returns', async (t) => {
  const pusher = await connectClient(server);
  t.after(() => disconnectAll([pusher]));
  const socketId = pusher.connection.socket_id;
  const channelName = 'presence-legba.signed';
  const { status, body } = await postAuth(
      await mint('signed', 'carol', 'Carol'), socketId, channelName,
      'zz99zz');
  assert.equal(status, 200, JSON.stringify(body));
  const data = JSON.parse(body.channel_data);
  assert.equal(data.user_id, 'carol-zz99zz');
  assert.deepEqual(data.user_info, { identity: 'carol', name: 'Carol',
    protocol: 'legba-room/1' });
  const signature = createHmac('sha256', server.secret)
      .update(`${socketId}:${channelName}:${body.channel_data}`)
      .digest('hex');
  assert.equal(body.auth, `${server.key}:${signature}`);
});

test('a token crafted here with the app secret is accepted', async (t) => {
  const token = craft(claims('crafted', 'dave', 'Dave', 300));
  const pusher = await participant(t, token, 'abcdef');
  const joined = await join(pusher, 'presence-legba.crafted');
  assert.ok(joined.ok, JSON.stringify(joined.error));
  assert.equal(joined.channel.members.me.id, 'dave-abcdef');
});

const refusals = [
  { what: 'an expired token', status: 401, room: 'late',
    token: () => craft(claims('late', 'erin', 'Erin', -60)) },
  { what: 'a token signed with another secret', status: 401, room: 'forged',
    token: () => mint('forged', 'mallory', 'Mallory', 'another-secret') },
  { what: 'an unsigned (alg none) token', status: 401, room: 'unsigned',
    token: () => craft(claims('unsigned', 'mallory', 'M', 300),
        { alg: 'none' }) },
  { what: 'a token with a tampered payload', status: 401, room: 'tampered',
    token: async () => {
      const [h, , s] = (await mint('other', 'mallory', 'M')).split('.');
      return `${h}.${b64url(JSON.stringify(
          claims('tampered', 'mallory', 'M', 300)))}.${s}`;
    } },
  { what: 'a token for another room', status: 403, room: 'elsewhere',
    token: () => mint('studio', 'frank', 'Frank') },
];

for (const r of refusals) {
  test(`${r.what} is refused (${r.status})`, async (t) => {
    const token = await r.token();
    const channelName = `presence-legba.${r.room}`;
    const pusher = await participant(t, token, 'abc123');
    const joined = await join(pusher, channelName);
    assert.equal(joined.ok, false, 'pusher-js reports a subscription error');
    assert.equal(joined.error.type, 'AuthError');
    assert.equal(joined.error.status, r.status);
    assert.equal(joined.channel.subscribed, false);

    const direct = await postAuth(token, pusher.connection.socket_id,
        channelName, 'abc123');
    assert.equal(direct.status, r.status);
    assert.equal(typeof direct.body.error, 'string',
        `a JSON error: ${JSON.stringify(direct.body)}`);
  });
}

test('malformed suffixes are refused (400)', async (t) => {
  const token = await mint('suffixes', 'gina', 'Gina');
  const pusher = await participant(t, token, 'ABC123');
  const joined = await join(pusher, 'presence-legba.suffixes');
  assert.equal(joined.ok, false);
  assert.equal(joined.error.status, 400);

  const socketId = pusher.connection.socket_id;
  for (const suffix of ['abc12', 'a'.repeat(17), 'abc-123', 'abc 123',
    'ABCDEF', '', undefined]) {
    const res = await postAuth(token, socketId, 'presence-legba.suffixes',
        suffix);
    assert.equal(res.status, 400, `suffix ${JSON.stringify(suffix)}`);
    assert.equal(typeof res.body.error, 'string');
  }
  for (const suffix of ['abc123', 'a'.repeat(16)]) {
    const res = await postAuth(token, socketId, 'presence-legba.suffixes',
        suffix);
    assert.equal(res.status, 200, `suffix ${suffix}: ` +
        JSON.stringify(res.body));
  }
});

test('no bearer token, or a channel that is no room, is refused',
    async (t) => {
  const pusher = await connectClient(server);
  t.after(() => disconnectAll([pusher]));
  const socketId = pusher.connection.socket_id;
  const token = await mint('hall', 'hank', 'Hank');
  const none = await postAuth(undefined, socketId, 'presence-legba.hall',
      'abc123');
  assert.equal(none.status, 401);
  for (const channelName of ['private-legba.hall', 'presence-hall',
    'presence-legba.hall2']) {
    const res = await postAuth(token, socketId, channelName, 'abc123');
    assert.equal(res.status, 403, channelName);
  }
});

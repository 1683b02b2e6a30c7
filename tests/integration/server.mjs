// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Shared helpers of the Node integration tests: start the built legba-server
// on 127.0.0.1 port 0, make real pusher-js clients and pusher SDK instances
// for it, and wait for events with a timeout and a stated reason.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import PusherClient from 'pusher-js';
import PusherServer from 'pusher';

/* Long enough for a sanitizer build on a loaded 2-core machine. */
export const WAIT_MS = 10000;
const START_MS = 20000;
const STOP_MS = 10000;
const LISTENING = /^legba-server listening on (.+):(\d+)$/;

/* Resolves with the promise's value, or rejects naming what was awaited. */
export function within (promise, ms, reason)
{
  let timer;
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(
        `timed out after ${ms} ms waiting for ${reason}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function requireEnv (name)
{
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: run these tests through meson test`);
  return value;
}

/* Starts legba-server with one app (fresh random credentials unless given)
 * and `args` appended to its command line. Resolves once it prints its
 * listening line. */
export async function startServer ({ args = [], appId, key, secret } = {})
{
  const app = {
    appId: appId ?? String(100000 + randomBytes(2).readUInt16BE()),
    key: key ?? `key-${randomBytes(6).toString('hex')}`,
    secret: secret ?? randomBytes(16).toString('hex'),
  };
  const binary = requireEnv('LEGBA_SERVER');
  const child = spawn(binary, ['--port', '0', '--bind', '127.0.0.1',
    '--app-id', app.appId, '--app-key', app.key, '--app-secret', app.secret,
    ...args], { stdio: ['ignore', 'pipe', 'pipe'] });

  let log = '';
  const keepLog = (chunk) => {
    log = (log + chunk).slice(-65536);
  };
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', keepLog);

  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  let exitStatus = null;
  exited.then((status) => {
    exitStatus = status;
  });

  const lines = createInterface({ input: child.stdout });
  const listening = new Promise((resolve, reject) => {
    lines.on('line', (line) => {
      keepLog(line + '\n');
      const m = LISTENING.exec(line);
      if (m)
        resolve({ host: m[1], port: Number(m[2]) });
    });
    child.on('error', reject);
    exited.then(({ code, signal }) => reject(new Error(
        `legba-server exited (code ${code}, signal ${signal}) before ` +
        `listening:\n${log}`)));
  });

  let address;
  try {
    address = await within(listening, START_MS,
        'legba-server to print its listening line');
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }

  return {
    ...app,
    host: address.host,
    port: address.port,
    pid: child.pid,
    base: `http://${address.host}:${address.port}`,
    log: () => log,
    exitStatus: () => exitStatus,
    /* SIGTERM, then resolves with {code, signal} once the process exits. */
    async stop () {
      if (exitStatus)
        return exitStatus;
      child.kill('SIGTERM');
      try {
        return await within(exited, STOP_MS, 'legba-server to exit on SIGTERM');
      } catch (e) {
        child.kill('SIGKILL');
        await exited;
        throw new Error(`${e.message}\n${log}`);
      }
    },
  };
}

/* The official pusher server SDK pointed at the server over plain HTTP. */
export function sdkFor (server, overrides = {})
{
  return new PusherServer({
    appId: server.appId,
    key: server.key,
    secret: server.secret,
    host: server.host,
    port: server.port,
    useTLS: false,
    timeout: WAIT_MS,
    ...overrides,
  });
}

/* Everything a pusher-js client receives, as decoded by pusher-js
 * ({event, channel, data, user_id}), plus its connection state changes,
 * with waits on a predicate. */
export class Recorder
{
  constructor ()
  {
    this.events = [];
    this.states = [];
    this.waiters = new Set();
  }

  push (event)
  {
    this.events.push(event);
    for (const w of this.waiters)
      w.check();
  }

  pushState (change)
  {
    this.states.push(change.current);
    for (const w of this.waiters)
      w.check();
  }

  /* Resolves with the first recorded event matching `match` (already seen
   * or still to come). */
  next (match, reason, ms = WAIT_MS)
  {
    return this.until(() => this.events.find(match), reason, ms);
  }

  /* Resolves once `get` returns a truthy value, re-evaluated on every
   * event and state change. */
  until (get, reason, ms = WAIT_MS)
  {
    let waiter;
    const p = new Promise((resolve) => {
      waiter = {
        check: () => {
          const v = get();
          if (v) {
            this.waiters.delete(waiter);
            resolve(v);
          }
        },
      };
      this.waiters.add(waiter);
      waiter.check();
    });
    return within(p, ms, reason).finally(() => this.waiters.delete(waiter));
  }

  all (match)
  {
    return this.events.filter(match);
  }
}

/* Matches an event by name and, when given, channel. */
export function named (event, channel)
{
  return (e) => e.event === event && (channel === undefined ||
      e.channel === channel);
}

/* When the server closes a socket with a code that pusher-js does not
 * retry (4000-4099, e.g. terminate_connections), pusher-js closes the
 * already closed faye-websocket client again, which arms a 30 s close
 * timer that nothing clears and that would hold the test process open.
 * That timer must not keep Node alive: it guards nothing the tests check. */
const createWebSocket = PusherClient.Runtime.createWebSocket;
PusherClient.Runtime.createWebSocket = function (url) {
  const socket = createWebSocket.call(this, url);
  const close = socket.close;
  socket.close = function (...args) {
    const result = close.apply(this, args);
    this._closeTimer?.unref?.();
    return result;
  };
  return socket;
};

/* A pusher-js client (Node build, ws transport only) for the server.
 * `options` are merged into the pusher-js options. Resolves once it is
 * connected; `recorder` holds what it received. */
export async function connectClient (server, options = {})
{
  const pusher = new PusherClient(server.key, {
    cluster: 'legba',
    wsHost: server.host,
    wsPort: server.port,
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    ...options,
  });
  const recorder = new Recorder();
  pusher.connection.bind('message', (event) => recorder.push(event));
  pusher.connection.bind('state_change',
      (change) => recorder.pushState(change));
  pusher.connection.bind('error', (error) => recorder.push({
    event: 'connection:error', data: error }));
  pusher.recorder = recorder;
  try {
    await recorder.until(() => pusher.connection.state === 'connected' ||
        ['failed', 'unavailable'].includes(pusher.connection.state) ||
        recorder.states.includes('disconnected'),
        `pusher-js to connect to ws://${server.host}:${server.port}`);
  } catch (e) {
    pusher.disconnect();
    throw e;
  }
  if (pusher.connection.state !== 'connected') {
    pusher.disconnect();
    throw new Error(`pusher-js did not connect: state ` +
        `${pusher.connection.state}, errors ${JSON.stringify(
            recorder.all(named('connection:error')))}`);
  }
  return pusher;
}

/* pusher-js channelAuthorization that signs with the SDK, as an app's
 * auth endpoint would. presence: the {user_id, user_info} signed for
 * presence channels (private channels sign no channel data). */
export function sdkChannelAuth (sdk, presence)
{
  return {
    customHandler: ({ socketId, channelName }, callback) => {
      const data = channelName.startsWith('presence-') ? presence : undefined;
      try {
        callback(null, sdk.authorizeChannel(socketId, channelName, data));
      } catch (e) {
        callback(e, null);
      }
    },
  };
}

/* Subscribes and resolves with the channel once the server confirmed it;
 * rejects on pusher:subscription_error. */
export async function subscribed (pusher, name)
{
  const channel = pusher.subscribe(name);
  const outcome = await pusher.recorder.next((e) => e.channel === name &&
      (e.event === 'pusher_internal:subscription_succeeded' ||
          e.event === 'pusher:subscription_error'),
      `the server to answer the subscription to ${name}`);
  if (outcome.event !== 'pusher_internal:subscription_succeeded')
    throw new Error(`subscription to ${name} refused: ` +
        JSON.stringify(outcome.data));
  return channel;
}

/* A round trip on the client's socket: every frame the client sent before
 * has been handled by the server once the pong arrives. */
export async function roundTrip (pusher)
{
  const seen = pusher.recorder.all(named('pusher:pong')).length;
  pusher.send_event('pusher:ping', {});
  await pusher.recorder.until(
      () => pusher.recorder.all(named('pusher:pong')).length > seen,
      'pusher:pong after pusher:ping');
}

/* Disconnects pusher-js clients and resolves once their sockets closed. */
export async function disconnectAll (clients)
{
  await Promise.all(clients.map(async (pusher) => {
    if (pusher.connection.state === 'disconnected')
      return;
    pusher.disconnect();
    await pusher.recorder.until(
        () => pusher.connection.state === 'disconnected',
        'pusher-js to disconnect');
  }));
}

/* A redis-server of the test's own on a Unix socket in a fresh folder, as
 * test-cluster starts it; `cleanups` gets what stops it. Resolves with
 * {url, socket}. */
export async function startRedis (cleanups)
{
  const dir = mkdtempSync(join(tmpdir(), 'legba-node-redis-'));
  const socket = join(dir, 'redis.sock');
  const child = spawn('redis-server', ['--port', '0', '--unixsocket', socket,
    '--unixsocketperm', '700', '--save', '', '--appendonly', 'no',
    '--dir', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  cleanups.push(async () => {
    child.kill('SIGTERM');
    await exited;
  });
  const lines = createInterface({ input: child.stdout });
  await within(new Promise((resolve) => lines.on('line', (line) => {
    if (line.includes('ready to accept connections'))
      resolve();
  })), WAIT_MS, 'redis-server to be ready');
  return { url: `unix://${socket}`, socket };
}

export function haveRedis ()
{
  return spawnSync('redis-server', ['--version']).status === 0;
}

/* legba-server's /metrics as {"name{labels}": value}. */
export async function metrics (server)
{
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const values = {};
  for (const line of text.split('\n')) {
    const m = /^(legba_\S+) (\d+)$/.exec(line);
    if (m)
      values[m[1]] = Number(m[2]);
  }
  return values;
}

/* Polls /metrics until `name` satisfies predicate; resolves with it. */
export async function metricUntil (server, name, predicate, reason)
{
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = (await metrics(server))[name] ?? 0;
    if (predicate(value))
      return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${reason}: ${name} is ${value}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

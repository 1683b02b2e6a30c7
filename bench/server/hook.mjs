// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The round trip of a client event answered by an application's C handler
// (LegbaServer's client-event signal, bench/server/hook-server.c), beside
// the plain relay of a client event by legba-server and by soketi 1.6.1,
// all on loopback, from Node clients on the `ws` package speaking Pusher
// protocol 7 (docs/benchmarks.md, "Server hooks").
//
//   hook:  A sends client-ask on a private channel; the handler answers A
//          alone; timed from A's send to A's receipt of the answer.
//   relay: A sends client-chat; the server relays it to B, in the same
//          process; timed from A's send to B's receipt.
//
// Each is one server pass and two loopback hops. One event in flight at a
// time; 500 warm-up events, then COUNT timed ones per run; each run on a
// fresh server process; ROUNDS rounds, the peers' order swapped every
// round (A B C, C B A, ...). Prints a table and writes
// bench/results/server-hook-STAMP.json (every sample, the conditions).
//
// Usage (release build and bench/setup.sh's soketi; see docs/benchmarks.md):
//   HOOK_SERVER=build-release/bench/hook-server \
//   LEGBA_SERVER=build-release/tools/legba-server \
//   node bench/server/hook.mjs [ROUNDS] [COUNT]

import { spawn, execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const require = createRequire(join(root, 'tests', 'integration', 'x.js'));
const WebSocket = require('ws');

const ROUNDS = Number(process.argv[2] ?? 3);
const COUNT = Number(process.argv[3] ?? 5000);
const WARMUP = 500;
const APP = { id: '1', key: 'bench-key', secret: 'bench-secret' };
const CHANNEL = 'private-bench';
const WAIT_MS = 30000;

function within (promise, ms, reason)
{
  let timer;
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${reason}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function freePort ()
{
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/* A child that prints "legba-server listening on HOST:PORT". */
async function startLegba (argv)
{
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe',
    'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const port = await within(new Promise((resolve, reject) => {
    lines.on('line', (line) => {
      const m = /listening on .+:(\d+)$/.exec(line);
      if (m)
        resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`${argv[0]} exited ${code}`)));
  }), WAIT_MS, `${argv[0]} to listen`);
  return { child, port };
}

async function startSoketi (workdir)
{
  const port = await freePort();
  const cluster = await freePort();
  const config = {
    host: '127.0.0.1', port,
    'appManager.array.apps': [{ id: APP.id, key: APP.key,
      secret: APP.secret, maxConnections: -1, enableClientMessages: true,
      enabled: true, maxBackendEventsPerSecond: -1,
      maxClientEventsPerSecond: -1, maxReadRequestsPerSecond: -1,
      webhooks: [] }],
    'metrics.enabled': false, 'metrics.host': '127.0.0.1',
    'metrics.port': await freePort(),
    'cluster.address': '127.0.0.1', 'cluster.hostname': '127.0.0.1',
    'cluster.port': cluster, 'cluster.unicast': `127.0.0.1:${cluster}`,
  };
  const path = join(workdir, 'soketi.json');
  writeFileSync(path, JSON.stringify(config));
  const server = join(root, 'bench', 'peers', 'soketi', 'node_modules',
      '@soketi', 'soketi', 'bin', 'server.js');
  const child = spawn(process.execPath, [server, 'start', `--config=${path}`],
      { stdio: ['ignore', 'ignore', 'inherit'], cwd: workdir });
  /* listening once a WebSocket connects */
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      const c = await connect(port);
      c.ws.close();
      return { child, port };
    } catch (e) {
      if (Date.now() > deadline)
        throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function stop (child)
{
  return new Promise((resolve) => {
    child.on('exit', resolve);
    child.kill('SIGTERM');
  });
}

/* A Pusher protocol 7 client: resolves once connection_established. */
function connect (port)
{
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}` +
        '?protocol=7&client=bench&version=1');
    const client = { ws, handlers: new Map() };
    ws.on('error', reject);
    ws.on('message', (text) => {
      const frame = JSON.parse(text);
      if (frame.event === 'pusher:connection_established') {
        client.socketId = JSON.parse(frame.data).socket_id;
        resolve(client);
        return;
      }
      const handler = client.handlers.get(frame.event);
      if (handler)
        handler(frame);
    });
  });
}

function subscribe (client)
{
  const sig = createHmac('sha256', APP.secret)
      .update(`${client.socketId}:${CHANNEL}`).digest('hex');
  return within(new Promise((resolve) => {
    client.handlers.set('pusher_internal:subscription_succeeded', resolve);
    client.ws.send(JSON.stringify({ event: 'pusher:subscribe',
      data: { channel: CHANNEL, auth: `${APP.key}:${sig}` } }));
  }), WAIT_MS, 'the subscription');
}

/* Sends `event` from a, COUNT + WARMUP times, one at a time, each timed
 * until `receiver` gets `reply`; the timed samples, in ms. */
async function series (a, event, receiver, reply)
{
  const samples = [];
  for (let i = 0; i < WARMUP + COUNT; i++) {
    const text = JSON.stringify({ event, channel: CHANNEL,
      data: JSON.stringify({ seq: i }) });
    const got = new Promise((resolve) => {
      receiver.handlers.set(reply, (frame) => {
        if (JSON.parse(frame.data).seq === i)
          resolve(performance.now());
      });
    });
    const t0 = performance.now();
    a.ws.send(text);
    const t1 = await within(got, WAIT_MS, `${reply} ${i}`);
    if (i >= WARMUP)
      samples.push(t1 - t0);
  }
  return samples;
}

function percentile (sorted, p)
{
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

function median (xs)
{
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const PEERS = {
  'legba-hook': {
    start: () => startLegba([process.env.HOOK_SERVER, APP.id, APP.key,
      APP.secret]),
    event: 'client-ask', reply: 'answer', toSelf: true,
  },
  'legba-relay': {
    start: () => startLegba([process.env.LEGBA_SERVER, '--port', '0',
      '--app-id', APP.id, '--app-key', APP.key, '--app-secret', APP.secret,
      '--client-events-per-second', '0']),
    event: 'client-chat', reply: 'client-chat', toSelf: false,
  },
  'soketi-relay': {
    start: () => startSoketi(workdir),
    event: 'client-chat', reply: 'client-chat', toSelf: false,
  },
};

async function run (name)
{
  const peer = PEERS[name];
  const { child, port } = await peer.start();
  try {
    const a = await connect(port);
    const b = await connect(port);
    await subscribe(a);
    await subscribe(b);
    const samples = await series(a, peer.event, peer.toSelf ? a : b,
        peer.reply);
    a.ws.close();
    b.ws.close();
    return samples;
  } finally {
    await stop(child);
  }
}

function gitHead ()
{
  try {
    return execFileSync('git', ['-C', root, 'describe', '--always',
      '--dirty'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

const stamp = new Date().toISOString().replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
const workdir = join(root, 'bench', 'results', 'tmp', `hook-${stamp}`);
mkdirSync(workdir, { recursive: true });

const conditions = {
  cpu_model: cpus()[0].model, cpus: cpus().length, kernel: release(),
  memory: `${Math.round(totalmem() / 2 ** 30)} GiB`,
  node: process.version, legba: gitHead(),
  soketi: JSON.parse(readFileSync(join(root, 'bench', 'peers', 'soketi',
      'node_modules', '@soketi', 'soketi', 'package.json'))).version,
  ws: require('ws/package.json').version,
  loadavg_start: loadavg().map((x) => x.toFixed(2)).join(' '),
  command: `node bench/server/hook.mjs ${ROUNDS} ${COUNT}`,
  machine: 'shared with other builds and tests',
};
const names = Object.keys(PEERS);
const runs = Object.fromEntries(names.map((n) => [n, []]));
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? [...names].reverse() : names;
  for (const name of order) {
    const samples = await run(name);
    const sorted = [...samples].sort((x, y) => x - y);
    runs[name].push({ round: r, p50: percentile(sorted, 0.5),
      p95: percentile(sorted, 0.95), samples });
    console.error(`round ${r} ${name}: p50 ${percentile(sorted, 0.5)
        .toFixed(4)} ms, p95 ${percentile(sorted, 0.95).toFixed(4)} ms`);
  }
}
conditions.loadavg_end = loadavg().map((x) => x.toFixed(2)).join(' ');

const summary = {};
console.log('| round trip | runs | p50 ms (median of runs) | p95 ms (median of ' +
    'runs) | p50 of each run |');
console.log('|---|---|---|---|---|');
for (const name of names) {
  const p50s = runs[name].map((x) => x.p50);
  const p95s = runs[name].map((x) => x.p95);
  summary[name] = { p50: median(p50s), p95: median(p95s) };
  console.log(`| ${name} | ${p50s.length} | ${median(p50s).toFixed(3)} | ` +
      `${median(p95s).toFixed(3)} | ${p50s.map((x) => x.toFixed(3))
      .join(', ')} |`);
}
const out = join(root, 'bench', 'results', `server-hook-${stamp}.json`);
writeFileSync(out, JSON.stringify({ suite: 'server-hook', stamp, conditions,
  warmup: WARMUP, count: COUNT, rounds: ROUNDS, summary, runs }) + '\n');
console.log(`\nconditions: ${JSON.stringify(conditions)}`);
console.log(`wrote ${out}`);

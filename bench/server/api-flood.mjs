// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// What one app's flood of the HTTP API does to another app's publishing
// (docs/server.md, "Limits per app"): legba-server with two apps; app B
// publishes events one at a time (signed POST /apps/B/events, Node's http
// with a kept-alive connection) and times each from its request to its
// 200; app A floods the API from another process (64 kept-alive
// connections, as fast as they are answered). Phases, each on a fresh
// server: quiet (no flood), flood (A's own api-requests-per-second 100:
// this flooder does not reach the default 1000 on a small machine),
// flood-unlimited (A's api-requests-per-second 0). ROUNDS rounds, the phases' order swapped
// every round. Prints B's p50/p95 per phase and A's answers, and writes
// bench/results/server-api-flood-STAMP.json (every sample, conditions).
//
// Placement, as bench/server/soak.py does it: on a machine with two CPUs
// or more, the server and B's client (this process, all its threads) run
// on one CPU, the last this process may use, and the flooder on the
// others, each pinned with taskset, so that the flood takes a CPU of its
// own rather than the server's and B's; --unpinned leaves them all to the
// scheduler.
//
//   LEGBA_SERVER=build-release/tools/legba-server \
//   node bench/server/api-flood.mjs [--unpinned] [ROUNDS] [COUNT]

import { spawn, execFileSync } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, loadavg, release } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const UNPINNED = process.argv.includes('--unpinned');
const positional = process.argv.slice(2).filter((a) => a !== '--unpinned');
const ROUNDS = Number(positional[0] ?? 3);
const COUNT = Number(positional[1] ?? 1000);
const FLOOD_CONNECTIONS = 64;
const APPS = {
  a: { id: 'a', key: 'key-a', secret: 'secret-a' },
  b: { id: 'b', key: 'key-b', secret: 'secret-b' },
};

/* A signed Pusher HTTP API publish (auth_version 1.0). */
function signedPublish (app, channel)
{
  const body = JSON.stringify({ name: 'story', channels: [channel],
    data: '{"n":1}' });
  const path = `/apps/${app.id}/events`;
  const query = `auth_key=${app.key}&auth_timestamp=` +
      `${Math.floor(Date.now() / 1000)}&auth_version=1.0&body_md5=` +
      createHash('md5').update(body).digest('hex');
  const sig = createHmac('sha256', app.secret)
      .update(`POST\n${path}\n${query}`).digest('hex');
  return { path: `${path}?${query}&auth_signature=${sig}`, body };
}

function post (agent, port, app)
{
  const { path, body } = signedPublish(app, 'news');
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent,
      method: 'POST', headers: { 'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/* The flooder, in a child process: A's requests until told to stop;
 * reports its status counts on stdout. */
async function flooder (port)
{
  const agent = new http.Agent({ keepAlive: true,
    maxSockets: FLOOD_CONNECTIONS });
  const counts = {};
  let stopping = false;
  process.stdin.on('data', () => {
    stopping = true;
  });
  const worker = async () => {
    while (!stopping) {
      const status = await post(agent, port, APPS.a).catch(() => 'error');
      counts[status] = (counts[status] ?? 0) + 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: FLOOD_CONNECTIONS }, worker));
  process.stdout.write(JSON.stringify({ counts,
    seconds: (performance.now() - started) / 1000 }) + '\n');
  process.exit(0);
}

/* The CPUs this process may use ("0-3,6" as taskset lists them). */
function allowedCpus ()
{
  const out = execFileSync('taskset', ['-cp', String(process.pid)],
      { encoding: 'utf8' });
  const list = out.slice(out.lastIndexOf(':') + 1).trim();
  return list.split(',').flatMap((part) => {
    const [from, to] = part.split('-').map(Number);
    return Array.from({ length: (to ?? from) - from + 1 }, (_, i) => from + i);
  });
}

/* {server: [cpu], flooder: [cpus]}, or null when not pinned. */
function placement ()
{
  if (UNPINNED)
    return null;
  const allowed = allowedCpus();
  if (allowed.length < 2)
    return null;
  return { allowed, server: [allowed.at(-1)], b: [allowed.at(-1)],
    flooder: allowed.slice(0, -1) };
}

/* command and args, run on cpus when given. */
function pinnedSpawn (cpus, command, args, options)
{
  return cpus ? spawn('taskset', ['-c', cpus.join(','), command, ...args],
      options) : spawn(command, args, options);
}

async function startServer (config)
{
  const path = join(workdir, `legba-${Date.now()}.conf`);
  writeFileSync(path, config);
  const child = pinnedSpawn(placed?.server, process.env.LEGBA_SERVER,
      ['--config', path, '--port', '0'],
      { stdio: ['ignore', 'pipe', 'ignore'] });
  const lines = createInterface({ input: child.stdout });
  const port = await new Promise((resolve, reject) => {
    lines.on('line', (line) => {
      const m = /listening on .+:(\d+)$/.exec(line);
      if (m)
        resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}`)));
  });
  return { child, port };
}

function appsConfig ()
{
  return Object.values(APPS).map((app) => `[app ${app.id}]\nid = ${app.id}\n` +
      `key = ${app.key}\nsecret = ${app.secret}\n`).join('');
}

async function phase (name)
{
  const limit = { quiet: 100, flood: 100, 'flood-unlimited': 0 }[name];
  const config = appsConfig().replace('secret = secret-a\n',
      `secret = secret-a\napi-requests-per-second = ${limit}\n`);
  const { child, port } = await startServer(config);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let flood = null;
  let floodReport = null;
  try {
    if (name !== 'quiet') {
      flood = pinnedSpawn(placed?.flooder, process.execPath,
          [fileURLToPath(import.meta.url), '--flood', String(port)],
          { stdio: ['pipe', 'pipe', 'inherit'] });
      floodReport = new Promise((resolve) => {
        let out = '';
        flood.stdout.on('data', (d) => {
          out += d;
        });
        flood.on('exit', () => resolve(JSON.parse(out)));
      });
      /* the flood under way before B starts */
      await new Promise((r) => setTimeout(r, 1000));
    }
    const samples = [];
    const statuses = {};
    for (let i = 0; i < 100 + COUNT; i++) {
      const t0 = performance.now();
      const status = await post(agent, port, APPS.b);
      const t1 = performance.now();
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (i >= 100)
        samples.push(t1 - t0);
    }
    if (flood)
      flood.stdin.end('stop\n');
    return { samples, statuses, flood: floodReport ? await floodReport :
      null };
  } finally {
    agent.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => child.on('exit', r));
  }
}

function pct (xs, p)
{
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

function median (xs)
{
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

if (process.argv[2] === '--flood') {
  await flooder(Number(process.argv[3]));
}

const placed = placement();
if (placed) {
  /* every thread of this process: B's client on the server's CPU */
  execFileSync('taskset', ['-a', '-cp', placed.b.join(','),
    String(process.pid)], { stdio: 'ignore' });
}
const stamp = new Date().toISOString().replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
const workdir = join(root, 'bench', 'results', 'tmp', `api-flood-${stamp}`);
mkdirSync(workdir, { recursive: true });
const conditions = {
  cpu_model: cpus()[0].model, cpus: cpus().length, kernel: release(),
  node: process.version,
  legba: execFileSync('git', ['-C', root, 'describe', '--always', '--dirty'],
      { encoding: 'utf8' }).trim(),
  loadavg_start: loadavg().map((x) => x.toFixed(2)).join(' '),
  command: `node bench/server/api-flood.mjs ${UNPINNED ? '--unpinned ' : ''}` +
      `${ROUNDS} ${COUNT}`,
  placement: placed ? `server and B's client on CPU ${placed.server}, the ` +
      `flooder on CPU ${placed.flooder.join(',')} (taskset)` :
      'unpinned: the scheduler\'s',
  machine: 'shared with other builds and tests',
};
const names = ['quiet', 'flood', 'flood-unlimited'];
const runs = Object.fromEntries(names.map((n) => [n, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const name of r % 2 ? [...names].reverse() : names) {
    const result = await phase(name);
    const run = { round: r, p50: pct(result.samples, 0.5),
      p95: pct(result.samples, 0.95), statuses: result.statuses,
      flood: result.flood, samples: result.samples };
    runs[name].push(run);
    console.error(`round ${r} ${name}: B p50 ${run.p50.toFixed(3)} ms, ` +
        `p95 ${run.p95.toFixed(3)} ms, B ${JSON.stringify(run.statuses)}, ` +
        `A ${JSON.stringify(run.flood)}`);
  }
}
conditions.loadavg_end = loadavg().map((x) => x.toFixed(2)).join(' ');
const summary = {};
console.log('| phase | runs | B publish p50 ms | B publish p95 ms | B answers |' +
    ' A requests/s (200 / 429) |');
console.log('|---|---|---|---|---|---|');
for (const name of names) {
  const rs = runs[name];
  const b = {};
  for (const x of rs)
    for (const [k, v] of Object.entries(x.statuses))
      b[k] = (b[k] ?? 0) + v;
  const a = rs.filter((x) => x.flood).map((x) => x.flood);
  const rate = (code) => a.length ? median(a.map((f) => (f.counts[code] ?? 0) /
      f.seconds)).toFixed(0) : '–';
  summary[name] = { p50: median(rs.map((x) => x.p50)),
    p95: median(rs.map((x) => x.p95)), b_statuses: b };
  console.log(`| ${name} | ${rs.length} | ${summary[name].p50.toFixed(3)} | ` +
      `${summary[name].p95.toFixed(3)} | ${JSON.stringify(b)} | ` +
      `${a.length ? `${rate(200)} / ${rate(429)}` : '–'} |`);
}
const out = join(root, 'bench', 'results', `server-api-flood-${stamp}.json`);
writeFileSync(out, JSON.stringify({ suite: 'server-api-flood', stamp,
  conditions, count: COUNT, rounds: ROUNDS, summary, runs }) + '\n');
console.log(`\nconditions: ${JSON.stringify(conditions)}`);
console.log(`wrote ${out}`);

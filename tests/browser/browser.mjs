// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Drives headless Chromium (Debian's chromium through playwright-core) for
// the browser interop tests: serves room.html, room-peer.js, room-sfu.js
// and pusher-js's browser build on 127.0.0.1, opens one page per browser
// participant and reads what it decoded from getStats.

import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { WAIT_MS } from '../integration/server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = join(here, '..', 'integration', 'node_modules');
const { chromium } = await import(pathToFileURL(
    join(nodeModules, 'playwright-core', 'index.mjs')).href);

export const CHROMIUM = process.env.LEGBA_CHROMIUM ?? '/usr/bin/chromium';

/* The whole command line of the browser, besides the profile and the
 * DevTools pipe playwright needs: fake capture devices that need no
 * permission prompt, loopback ICE candidates, and nothing that reaches
 * out of the machine. */
export const CHROMIUM_FLAGS = Object.freeze([
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--use-fake-device-for-media-stream',
  '--use-fake-ui-for-media-stream',
  '--allow-loopback-in-peer-connection',
]);

/* Resolves once `get` (sync or async) returns a truthy value, polled every
 * `every` ms; rejects after `ms` naming the reason and, when given, what
 * `detail()` says about the state at that moment. */
export async function until (get, reason, { ms = WAIT_MS, every = 100,
  detail } = {})
{
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await get();
    if (value)
      return value;
    if (Date.now() >= deadline) {
      const extra = detail ? `\n${await detail()}` : '';
      throw new Error(`timed out after ${ms} ms waiting for ${reason}${extra}`);
    }
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}

/* Teardown in reverse order of setup (peers before the server they use):
 * returns `defer(fn)`; every deferred function runs after the test, the
 * first failure is rethrown once all ran. */
export function teardown (t)
{
  const stack = [];
  t.after(async () => {
    let failure = null;
    while (stack.length) {
      try {
        await stack.pop()();
      } catch (e) {
        failure ??= e;
      }
    }
    if (failure)
      throw failure;
  });
  return (fn) => stack.push(fn);
}

/* Headless Chromium with a fresh profile; close() removes the profile. */
export async function launchChromium ()
{
  const profile = await mkdtemp(join(tmpdir(), 'legba-chromium-'));
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      ignoreDefaultArgs: true,
      args: [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`,
        '--remote-debugging-pipe'],
      timeout: 30000,
    });
  } catch (e) {
    await rm(profile, { recursive: true, force: true });
    throw e;
  }
  return {
    browser,
    version: browser.version(),
    async close () {
      await browser.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

const FILES = {
  '/room.html': [join(here, 'room.html'), 'text/html; charset=utf-8'],
  '/room-peer.js': [join(here, 'room-peer.js'), 'text/javascript'],
  '/room-sfu.js': [join(here, 'room-sfu.js'), 'text/javascript'],
  '/pusher.min.js': [join(nodeModules, 'pusher-js', 'dist', 'web',
      'pusher.min.js'), 'text/javascript'],
};

/* Serves the test page on 127.0.0.1 (a secure context for
 * getUserMedia). */
export async function servePage ()
{
  const http = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const file = FILES[path];
    if (path === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file[0]);
      res.writeHead(200, { 'Content-Type': file[1],
        'Cache-Control': 'no-store' }).end(body);
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address();
  return {
    url: `http://127.0.0.1:${port}/room.html`,
    close: () => new Promise((resolve) => {
      http.closeAllConnections();
      http.close(resolve);
    }),
  };
}

const run = promisify(execFile);

/* A join token from legba-token (the real tool, as a backend would). */
export async function mintToken (server, room, identity, name = identity)
{
  const tool = process.env.LEGBA_TOKEN;
  if (!tool)
    throw new Error('LEGBA_TOKEN is not set: run these tests through meson test');
  const { stdout } = await run(tool, ['--secret', server.secret, '--room',
    room, '--identity', identity, '--name', name], { timeout: WAIT_MS });
  return stdout.trim();
}

/* One browser participant: a page of its own (its own browser context,
 * so its own fake devices), not yet joined. Opening pages is the slow part
 * (a renderer each): tests open theirs together, then join in order. */
export async function openParticipant (chrome, page, identity)
{
  const context = await chrome.browser.newContext();
  /* Content-Security-Policy violations, recorded from before the page's
   * first script (cspViolations()) */
  await context.addInitScript(() => {
    window.legbaCspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.legbaCspViolations.push(`${e.effectiveDirective} blocked ` +
          `${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}`));
  });
  const tab = await context.newPage();
  const output = [];
  tab.on('console', (m) => output.push(`[${m.type()}] ${m.text()}`));
  tab.on('pageerror', (e) => output.push(`[pageerror] ${e.message}`));
  await tab.goto(page.url);
  const participant = {
    tab,
    identity,
    id: null,
    /* Joins `room` on `server` with a join token for the identity;
     * resolves with the participant id once subscribed. */
    async join (server, room, options = {}) {
      const token = await mintToken(server, room, identity);
      participant.id = await tab.evaluate((o) => window.legba.join(o),
          { host: server.host, port: server.port, key: server.key,
            appId: server.appId, token, room, ...options })
        .catch(async (e) => {
          throw new Error(`${identity} could not join: ${e.message}\n` +
              await participant.describe());
        });
      return participant.id;
    },
    async record () {
      return tab.evaluate(() => window.legba.record);
    },
    async stats () {
      return tab.evaluate(() => window.legba.stats());
    },
    /* The end of the page's log and console, for failure messages. */
    async describe () {
      const r = await tab.evaluate(() => ({ log: window.legba.record.log,
        events: window.legba.record.events,
        signals: window.legba.record.signals.map((e) =>
          `${e.at.toFixed(0)} ${e.direction}${e.whole ? ' (whole)' : ''} ` +
          `${e.message.type} ${e.direction === 'in' ? 'from ' +
            e.message.from : 'to ' + e.message.to} pc=${e.message.pc} ` +
          `${e.bytes} bytes` + (e.message.type === 'candidates' ?
            ` ${e.message.candidates?.length} end=${e.message.end}` : '')),
      })).catch(() => ({ log: [], events: [], signals: [] }));
      return [`--- ${identity} (${participant.id}) log:`, ...r.log.slice(-40),
        '--- events:', ...r.events.slice(-30).map((e) => JSON.stringify(e)),
        '--- signals:', ...r.signals.slice(-40),
        '--- console:', ...output.slice(-20)].join('\n');
    },
    /* What the page's Content-Security-Policy blocked: the events and
     * the console's reports of them. */
    async cspViolations () {
      return [...await tab.evaluate(() => window.legbaCspViolations),
        ...output.filter((line) => /Content Security Policy/i.test(line))];
    },
    async leave () {
      await tab.evaluate(() => window.legba.leave());
    },
    async close () {
      await context.close();
    },
  };
  return participant;
}

/* Resolves with the participant's stats once it decoded more than
 * `frames` video frames from `remote` (a participant id). */
export async function decodedFrom (participant, remote, frames, ms = WAIT_MS)
{
  let last = null;
  await until(async () => {
    last = await participant.stats();
    return (last[remote]?.inbound.video?.frames ?? 0) > frames;
  }, `${participant.identity} to decode over ${frames} video frames from ` +
      `${remote}`, { ms, every: 200,
    detail: async () => `stats: ${JSON.stringify(last)}\n` +
        await participant.describe() });
  return last;
}

/* gst-launch-1.0 with a legbaroom `identity` in `room` and `tail`; killed
 * with the test. */
export function gstLaunch (server, room, identity, tail)
{
  const line = ['legbaroom', 'name=r',
    `server-url=ws://${server.host}:${server.port}`,
    `app-key=${server.key}`, `app-secret=${server.secret}`, `room=${room}`,
    `identity=${identity}`, ...tail];
  /* the data elements say what they wait for and send, for the failure
   * report */
  const env = { ...process.env,
    GST_DEBUG: `${process.env.GST_DEBUG ?? '*:1'},legbadata*:5` };
  const child = spawn('gst-launch-1.0', line,
      { stdio: ['ignore', 'pipe', 'pipe'], env });
  const p = { output: '', exit: null };
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk) => {
      p.output = (p.output + chunk).slice(-65536);
    });
  }
  p.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    p.exit = { code, signal };
    resolve(p.exit);
  }));
  p.stop = async () => {
    if (!p.exit)
      child.kill('SIGINT');
    return p.exited;
  };
  return p;
}

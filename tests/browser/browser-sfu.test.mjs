// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// An SFU room (docs/room-protocol.md §8) with the /demo page in headless
// Chromium and a legba-call participant: legba-server coordinates a real
// Janus 1.1 of the test's own (tests/common/start-janus.sh, open as a
// coordinated Janus runs: no API secret), the page gets legba:topology
// and joins the VideoRoom from its own Janus session. Each decodes the
// other's video through Janus, chat goes both ways over the publishers'
// data channels, a message to a named participant is refused, and the
// page works under the Content-Security-Policy the server sends with it
// (which names Janus's WebSocket API). A gst-launch-1.0 pipeline
// (legbaroom, legbadatasrc, legbadatasink) and the page do the same:
// video and JSON both ways through Janus. Then, with two Janus, the one
// holding the room is killed mid-call: the server makes the room again on
// the other, and the page and legba-call decode each other again through
// it. And an `auto:2` room (docs/room-protocol.md §8, "A mesh room that
// moves to its SFU"): the page and legba-call in a mesh, sending each
// other a reliable message every 20 ms; a third participant (legba-call)
// joins and the room moves to Janus, make before break on both sides: the
// three decode each other through Janus, every message of the first two
// arrived exactly once, each side had the other's probes
// (`legba.sfu-probe`) through Janus before it said `sfu-ready`,
// legba-call's LegbaRoom had the page's `sfu-ready` instead of waiting out
// its 5 s, and the page reported no message on a reserved topic. Last, the
// page's own connection to a healthy Janus is cut (a TCP relay of the
// test's own between the participants and Janus): the page opens a
// session on the same Janus again and both decode each other again; the
// same when Janus destroys the page's session behind its open WebSocket
// (its admin API), which the page learns from its next keepalive. And a
// page whose signalling connection drops keeps its Janus session, and
// another page keeps it (away, §3's grace period) and receives it. Without
// janus installed, the tests are skipped.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import {
  mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { startServer } from '../integration/server.mjs';
import {
  decodedFrom, gstLaunch, launchChromium, openParticipant, teardown, until,
} from './browser.mjs';

const run = promisify(execFile);
const FIXTURE = new URL('../common/start-janus.sh', import.meta.url).pathname;
/* a sanitizer build on a loaded 2-core machine sets up a call in ~15 s */
const SETUP_MS = 60000;
const FRAMES = 15;
const ROOM = 'demo';

function requireEnv (name)
{
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: run this test through meson test`);
  return value;
}

/* as browser-demo.test.mjs: GStreamer 1.22's rtpsession race is the one
 * CRITICAL tolerated from legba-call */
const RTPSESSION_RACE =
    "g_hash_table_foreach: assertion 'version == hash_table->version' failed";

function lenientEnv ()
{
  const debug = (process.env.G_DEBUG ?? '').split(',')
    .filter((f) => f && f !== 'fatal-criticals');
  return { ...process.env, G_DEBUG: debug.join(',') };
}

/* A Janus of the test's own, without an API secret (and with adminKey
 * when given, and its admin API with adminSecret when given); null when
 * janus is not installed. */
async function startJanus (defer, adminKey, adminSecret)
{
  const dir = mkdtempSync(join(tmpdir(), 'legba-janus-'));
  defer(() => rmSync(dir, { recursive: true, force: true }));
  try {
    const { stdout } = await run(FIXTURE, [dir], { timeout: 60000,
      env: { ...process.env, JANUS_API_SECRET: '',
        ...(adminKey ? { JANUS_ADMIN_KEY: adminKey } : {}),
        ...(adminSecret ? { JANUS_ADMIN_SECRET: adminSecret } : {}) } });
    defer(() => run(FIXTURE, ['--stop', dir]));
    return { ...Object.fromEntries(stdout.trim().split('\n')
        .map((line) => line.split(/=(.*)/s).slice(0, 2))), dir };
  } catch (e) {
    if (e.code === 77)
      return null;
    throw e;
  }
}

/* legba-server serving the /demo page (and pusher-js for it), with
 * args; stopped with the test. */
async function startDemoServer (defer, args)
{
  const server = await startServer({ args: ['--web-dir',
    requireEnv('LEGBA_WEB_DIR'), '--pusher-js-dir',
    join(requireEnv('LEGBA_SOURCE_ROOT'), 'tests', 'integration',
        'node_modules', 'pusher-js', 'dist', 'web'), ...args] });
  defer(() => server.stop());
  return server;
}

/* The server's arguments for rooms of topology on janus, which the
 * participants reach at wsUrl. */
function janusArgs (janus, { topology = 'sfu', wsUrl } = {})
{
  wsUrl ??= janus.JANUS_WS_URL;
  return ['--janus-url', janus.JANUS_HTTP_URL, '--janus-ws-url', wsUrl,
    '--janus-admin-key', janus.JANUS_ADMIN_KEY, '--topology', topology];
}

/* legba-call with --chat and --json: its human-readable lines come on
 * standard error, the report on standard output at exit. */
function startCall (server, identity, env = {})
{
  const child = spawn(requireEnv('LEGBA_CALL'), ['--server',
    `ws://${server.host}:${server.port}`, '--room', ROOM, '--identity',
    identity, '--key', server.key, '--secret', server.secret, '--width',
    '320', '--height', '240', '--fps', '15', '--bitrate', '300', '--chat',
    '--stats', '--json', '--duration', '300'],
  { stdio: ['pipe', 'pipe', 'pipe'], env: { ...lenientEnv(), ...env } });
  const call = { child, lines: [], out: '', id: null };
  createInterface({ input: child.stderr }).on('line', (line) => {
    call.lines.push(line);
    const m = new RegExp(`^joined room ${ROOM} as (\\S+)$`).exec(line);
    if (m)
      call.id = m[1];
  });
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    call.out += chunk;
  });
  call.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  call.describe = () => `--- legba-call:\n${call.lines.slice(-30).join('\n')}`;
  return call;
}

test('an SFU room: the /demo page and legba-call decode each other and ' +
    'chat through Janus', async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const server = await startDemoServer(defer, janusArgs(janus));
  const served = await fetch(`${server.base}/demo/`);
  const origin = new URL(janus.JANUS_WS_URL);
  assert.match(served.headers.get('content-security-policy') ?? '',
      new RegExp(`connect-src 'self' ws://${origin.host};`),
      'the page may reach the Janus of SFU rooms');
  const chrome = await launchChromium();
  defer(() => chrome.close());
  const page = await openParticipant(chrome, { url: `${server.base}/demo/` },
      'ada');
  defer(() => page.close());
  const call = startCall(server, 'gst');
  defer(async () => {
    if (!call.child.exitCode && !call.child.signalCode)
      call.child.kill('SIGKILL');
    await call.exited;
  });
  const detail = async () => [call.describe(), '--- ada log:',
    ...await page.tab.evaluate(() => window.legba.record.log.slice(-40))
        .catch(() => []), await page.describe(),
    `--- legba-server:\n${server.log().slice(-3000)}`].join('\n');

  const adaId = await page.join(server, ROOM, { source: 'test',
    identity: 'ada' });
  await until(() => call.id, 'legba-call to join', { ms: SETUP_MS, detail });

  /* video: the browser decodes legba-call's, through Janus, in legba-call's
   * tile, and plays it */
  const seen = await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  assert.equal(seen[call.id].inbound.video.width, 320);
  assert.match(await page.tab.textContent(`#tile-${call.id} figcaption`),
      /gst/);
  await until(() => page.tab.evaluate(({ id, frames }) => {
    const video = document.querySelector(`#tile-${id} video`);
    return video && video.videoWidth > 0 &&
      video.getVideoPlaybackQuality().totalVideoFrames > frames;
  }, { id: call.id, frames: FRAMES }), 'the tile to play legba-call\'s video',
  { ms: SETUP_MS, detail });
  /* no peer connection of the mesh: the SFU's two connections only */
  assert.equal(await page.tab.evaluate(() =>
    [...window.legba.peer().participants.values()]
        .filter((p) => p.conn).length), 0, 'no mesh peer connection');

  /* legba-call decodes the page's video: its stats lines count frames */
  await until(() => call.lines.some((line) => {
    const m = / \| ada (\d+) frames /.exec(line);
    return m && Number(m[1]) > FRAMES;
  }), 'legba-call to decode the page\'s video', { ms: SETUP_MS, detail });

  /* chat, both ways: over each publisher's data channel, relayed by Janus
   * to the other's subscriber connection. Janus relays only to a
   * subscriber whose own channel is open (docs/rooms.md, SFU rooms): a
   * message sent before is lost, so each side sends again, once a second,
   * until the other shows it. */
  await until(async () => {
    if (await page.tab.evaluate(() => window.legba.record.chat
        .some((c) => c.who === 'gst' && c.text === 'hello from gstreamer')))
      return true;
    call.child.stdin.write('hello from gstreamer\n');
    return false;
  }, 'the page to show legba-call\'s chat message', { ms: SETUP_MS,
    every: 1000, detail });
  const chat = await page.tab.evaluate(() => window.legba.record.events
      .find((e) => e.type === 'data' && e.topic === 'chat'));
  assert.equal(chat.participant, call.id, 'reported from legba-call');
  await until(async () => {
    if (call.lines.includes('<ada> hello from chromium'))
      return true;
    await page.tab.evaluate(() => window.legba.sendChat('hello from chromium'));
    return false;
  }, 'legba-call to print the page\'s chat message', { ms: SETUP_MS,
    every: 1000, detail });

  /* a named recipient is refused, and nothing goes */
  assert.match(await page.tab.evaluate((to) => {
    try {
      window.legba.send({ text: 'only you' }, { topic: 'chat', to });
      return 'sent';
    } catch (e) {
      return e.message;
    }
  }, call.id), /named participants are refused/);

  /* legba-call leaves: it reports the page's video, audio and chat; the
   * page removes its tile */
  call.child.stdin.end();
  call.child.kill('SIGTERM');
  assert.deepEqual(await call.exited, { code: 0, signal: null },
      call.describe());
  assert.deepEqual(call.lines.filter((l) => l.includes('-CRITICAL **') &&
      !l.includes(RTPSESSION_RACE)), [], 'no CRITICAL from legba-call');
  assert.ok(!call.lines.includes('<ada> only you'), 'the refused message ' +
      'did not go');
  const report = JSON.parse(call.out);
  const ada = report.participants.find((p) => p.id === adaId);
  assert.ok(ada, `legba-call saw ada: ${call.out}`);
  assert.ok(ada.video_frames > FRAMES, `legba-call decoded ada: ${call.out}`);
  assert.ok(ada.audio_buffers > 0, `legba-call got ada's audio: ${call.out}`);
  assert.ok(ada.data_messages >= 1, `legba-call got ada's chat: ${call.out}`);
  await until(() => page.tab.evaluate((id) =>
    document.getElementById(`tile-${id}`) === null, call.id),
  'the page to remove legba-call\'s tile', { ms: SETUP_MS, detail });
  assert.deepEqual(await page.cspViolations(), [],
      'nothing the page did was blocked by its Content-Security-Policy');
  await page.leave();
});

/* Files in dir whose names are prefix, digits and suffix, sorted. */
function filesLike (dir, prefix, suffix)
{
  const re = new RegExp(`^${prefix}\\d+\\${suffix}$`);
  return readdirSync(dir).filter((n) => re.test(n)).sort();
}

test('an SFU room: gst-launch-1.0 (legbaroom, legbadatasrc, ' +
    'legbadatasink) and the page receive each other\'s video and JSON ' +
    'through Janus', async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const server = await startDemoServer(defer, janusArgs(janus));
  const dir = mkdtempSync(join(tmpdir(), 'legba-sfu-gst-'));
  defer(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'hello.json'), JSON.stringify({ from: 'gst' }));
  const chrome = await launchChromium();
  defer(() => chrome.close());
  const page = await openParticipant(chrome, { url: `${server.base}/demo/` },
      'ada');
  defer(() => page.close());
  await page.join(server, ROOM, { source: 'test', identity: 'ada' });
  /* gst-launch-1.0 publishes H.264, writes what it decodes of the first
   * participant's video as JPEG files and the page's messages on topic
   * from-web as JSON files, and sends hello.json on topic from-gst five
   * times a second (Janus relays a message only to subscribers already
   * listening: the first ones may be lost) */
  const g = gstLaunch(server, ROOM, 'gst', ['videotestsrc', 'is-live=true',
    '!', 'video/x-raw,width=320,height=240,framerate=15/1', '!', 'x264enc',
    'tune=zerolatency', 'key-int-max=30', '!', 'r.',
    'r.recv_video_0', '!', 'decodebin', '!', 'videoconvert', '!', 'jpegenc',
    '!', 'multifilesink', `location=${join(dir, 'frame-%05d.jpg')}`,
    'legbadatasrc', 'room-element=r', 'topic=from-web', '!', 'multifilesink',
    `location=${join(dir, 'got-%05d.json')}`,
    'multifilesrc', `location=${join(dir, 'hello.json')}`, '!',
    'application/json', '!', 'identity', 'sleep-time=200000', '!',
    'legbadatasink', 'room-element=r', 'topic=from-gst']);
  defer(async () => {
    const exit = await g.stop();
    assert.equal(exit.code, 0, `gst-launch-1.0 exits 0\n${g.output}`);
  });
  const detail = async () => [`--- gst-launch-1.0:\n${g.output.slice(-4000)}`,
    await page.describe(), `--- legba-server:\n${server.log().slice(-3000)}`]
      .join('\n');

  /* the page decodes the pipeline's video through Janus */
  const gstId = await until(() => page.tab.evaluate(() =>
    [...window.legba.peer().participants.keys()]
        .find((id) => id.startsWith('gst-'))), 'gst-launch-1.0 to join',
  { ms: SETUP_MS, detail });
  await decodedFrom(page, gstId, FRAMES, SETUP_MS);
  /* and the pipeline decodes the page's */
  await until(() => filesLike(dir, 'frame-', '.jpg').length > FRAMES,
      'gst-launch-1.0 to decode the page\'s video', { ms: SETUP_MS, detail });

  /* JSON both ways: the pipeline's reach the page from it, on its topic */
  const fromGst = await until(async () => (await page.record()).events
      .find((e) => e.type === 'data' && e.topic === 'from-gst'),
  'the page to receive the pipeline\'s JSON', { ms: SETUP_MS, detail });
  assert.equal(fromGst.participant, gstId);
  assert.deepEqual(fromGst.data, { from: 'gst' });
  /* the page's reach the pipeline's legbadatasrc, as sent */
  await until(async () => {
    if (filesLike(dir, 'got-', '.json').length > 0)
      return true;
    await page.tab.evaluate(() => window.legba.send({ from: 'web' },
        { topic: 'from-web' }));
    return false;
  }, 'gst-launch-1.0 to write the page\'s JSON', { ms: SETUP_MS,
    every: 200, detail });
  const [first] = filesLike(dir, 'got-', '.json');
  assert.deepEqual(JSON.parse(readFileSync(join(dir, first), 'utf8')),
      { from: 'web' });
  /* nothing but the SFU's connections on the page */
  assert.equal(await page.tab.evaluate(() =>
    [...window.legba.peer().participants.values()]
        .filter((p) => p.conn).length), 0, 'no mesh peer connection');
  assert.ok(!/CRITICAL/.test(g.output), `no CRITICAL from gst-launch-1.0\n` +
      g.output.slice(-4000));
  await page.leave();
});

test('an SFU room whose page\'s signalling connection drops, twice: the ' +
    'page keeps its SFU session, and the other page keeps it, away, and ' +
    'receives it throughout', async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const server = await startDemoServer(defer, janusArgs(janus));
  const chrome = await launchChromium();
  defer(() => chrome.close());
  const url = { url: `${server.base}/demo/` };
  const [ada, bea] = await Promise.all([openParticipant(chrome, url, 'ada'),
    openParticipant(chrome, url, 'bea')]);
  defer(() => ada.close());
  defer(() => bea.close());
  const adaId = await ada.join(server, ROOM, { source: 'test',
    identity: 'ada' });
  const beaId = await bea.join(server, ROOM, { source: 'test',
    identity: 'bea' });
  const detail = async () => [await ada.describe(), await bea.describe(),
    `--- legba-server:\n${server.log().slice(-3000)}`].join('\n');
  await decodedFrom(ada, beaId, FRAMES, SETUP_MS);
  await decodedFrom(bea, adaId, FRAMES, SETUP_MS);
  await ada.tab.evaluate(() => {
    window.keptSfu = window.legba.peer()._sfu;
  });
  await bea.tab.evaluate(() => {
    window.seenStates = [];
    window.legba.peer().addEventListener('participant-state',
        (e) => window.seenStates.push(e.detail));
  });

  for (let i = 1; i <= 2; i++) {
    const before = await ada.tab.evaluate(() => {
      const peer = window.legba.peer();
      return { socket: peer._pusher.connection.socket_id,
        token: peer._sfu.sfu.token };
    });
    /* the WebSocket closes under pusher-js, which connects again and
     * subscribes again: the server takes ada's token back, then gives
     * her a new one with the same room */
    await ada.tab.evaluate(() => window.legba.peer()._pusher.connection
        .connection.transport.socket.close());
    await until(() => ada.tab.evaluate((b) => {
      const peer = window.legba.peer();
      return peer.state === 'connected' &&
        peer._pusher.connection.socket_id !== b.socket &&
        peer._sfu?.sfu.token !== b.token;
    }, before), `ada's signalling to come back (${i})`, { ms: SETUP_MS,
      detail });
    /* the server takes ada's old connection out of the channel (bea sees
     * her away) before her new one can subscribe: the page's socket
     * closes once the server has answered its close frame, and the new
     * one needs a connection, an authorisation request and a subscription
     * more */
    await until(() => bea.tab.evaluate(({ id, n }) =>
      window.legba.peer().participants.get(id)?.state === 'connected' &&
      window.seenStates.filter((s) => s.participant === id &&
        s.state === 'away').length >= n, { id: adaId, n: i }),
    `bea to have seen ada away and back (${i})`, { ms: SETUP_MS, detail });
  }
  assert.ok(await ada.tab.evaluate(() =>
    window.legba.peer()._sfu === window.keptSfu), 'ada kept her SFU session');
  assert.equal((await ada.record()).log
      .filter((l) => l.includes('SFU room: Janus')).length, 1,
  'ada joined the VideoRoom once');
  assert.deepEqual((await bea.record()).events
      .filter((e) => e.type === 'participant-left'), [],
  'bea never saw ada leave');
  const frames = (await bea.stats())[adaId].inbound.video.frames;
  await decodedFrom(bea, adaId, frames + FRAMES, SETUP_MS);
  const back = (await ada.stats())[beaId].inbound.video.frames;
  await decodedFrom(ada, beaId, back + FRAMES, SETUP_MS);
  await ada.leave();
  await bea.leave();
});

/* legba-call's latest count of video frames decoded from participant id
 * (its --stats lines), 0 before any. */
function callFrames (call, id)
{
  for (let i = call.lines.length - 1; i >= 0; i--) {
    const m = new RegExp(` \\| ${id} (\\d+) frames `).exec(call.lines[i]);
    if (m)
      return Number(m[1]);
  }
  return 0;
}

test('an SFU room whose Janus dies: the page and legba-call decode each ' +
    'other again through the room made again on the other Janus',
async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const spare = await startJanus(defer, janus.JANUS_ADMIN_KEY);
  const server = await startDemoServer(defer, [...janusArgs(janus),
    '--janus-url', spare.JANUS_HTTP_URL, '--janus-ws-url', spare.JANUS_WS_URL]);
  const chrome = await launchChromium();
  defer(() => chrome.close());
  const page = await openParticipant(chrome, { url: `${server.base}/demo/` },
      'ada');
  defer(() => page.close());
  const call = startCall(server, 'gst');
  defer(async () => {
    if (!call.child.exitCode && !call.child.signalCode)
      call.child.kill('SIGKILL');
    await call.exited;
  });
  const detail = async () => [call.describe(), '--- ada log:',
    ...await page.tab.evaluate(() => window.legba.record.log.slice(-40))
        .catch(() => []), await page.describe(),
    `--- legba-server:\n${server.log().slice(-3000)}`].join('\n');
  const sfuUrl = () => page.tab.evaluate(() =>
    window.legba.peer()._sfu?.sfu.url ?? null);

  const adaId = await page.join(server, ROOM, { source: 'test',
    identity: 'ada' });
  await until(() => call.id, 'legba-call to join', { ms: SETUP_MS, detail });
  await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  await until(() => callFrames(call, 'ada') > FRAMES,
      'legba-call to decode the page\'s video', { ms: SETUP_MS, detail });

  const url = await sfuUrl();
  const [holder, other] = url === janus.JANUS_WS_URL ? [janus, spare] :
    [spare, janus];
  assert.equal(url, holder.JANUS_WS_URL);
  const before = callFrames(call, 'ada');
  process.kill(Number(holder.JANUS_PID), 'SIGKILL');
  await until(async () => await sfuUrl() === other.JANUS_WS_URL,
      'the page to join the room made again on the other Janus',
      { ms: SETUP_MS, detail });
  /* the page's stats are those of its new subscriber connection */
  await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  await until(() => callFrames(call, 'ada') > before + FRAMES,
      'legba-call to decode the page\'s video again', { ms: SETUP_MS,
        detail });
  assert.deepEqual(await page.tab.evaluate(() => window.legba.record.events
      .filter((e) => e.type === 'error').map((e) => e.message)), [],
  'the page reported no error');
  assert.ok(!call.lines.some((l) => / left$/.test(l) && l.includes(adaId)),
      'legba-call never saw the page leave');
  await page.leave();
});

/* A message every SEND_MS each way across the move, as
 * test-room-sfu-auto.c */
const SEND_MS = 20;

/* How many times each of `prefix 0` to `prefix sent - 1` is in texts:
 * those missing and those seen more than once. */
function tally (texts, prefix, sent)
{
  const seen = new Map();
  for (const text of texts) {
    const m = new RegExp(`^${prefix} (\\d+)$`).exec(text);
    if (m)
      seen.set(Number(m[1]), (seen.get(Number(m[1])) ?? 0) + 1);
  }
  const missing = [];
  for (let n = 0; n < sent; n++) {
    if (!seen.has(n))
      missing.push(n);
  }
  return { missing, twice: [...seen].filter(([, k]) => k > 1)
      .map(([n]) => n), count: seen.size };
}

test('an auto room that moves from mesh to SFU: the page and legba-call ' +
    'move make before break, no message lost, sfu-ready both ways',
async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const server = await startDemoServer(defer,
      janusArgs(janus, { topology: 'auto:2' }));
  const chrome = await launchChromium();
  defer(() => chrome.close());
  const page = await openParticipant(chrome, { url: `${server.base}/demo/` },
      'ada');
  defer(() => page.close());
  /* the room's GST_INFO lines (GST_DEBUG legba*:4, from the test
   * environment) say how its move went */
  const gst = startCall(server, 'gst', { GST_DEBUG_NO_COLOR: '1' });
  const calls = [gst];
  defer(async () => {
    for (const call of calls) {
      if (!call.child.exitCode && !call.child.signalCode)
        call.child.kill('SIGKILL');
      await call.exited;
    }
  });
  const detail = async () => [...calls.map((c) => c.describe()),
    '--- legba-call\'s move:', ...gst.lines.filter((l) =>
      / legbaroom .*(SFU|mesh connection)/.test(l)),
    '--- ada log:', ...await page.tab.evaluate(() =>
      window.legba.record.log.slice(-60)).catch(() => []),
    await page.describe(),
    `--- legba-server:\n${server.log().slice(-3000)}`].join('\n');

  const adaId = await page.join(server, ROOM, { source: 'test',
    identity: 'ada' });
  await until(() => gst.id, 'legba-call to join', { ms: SETUP_MS, detail });
  await decodedFrom(page, gst.id, FRAMES, SETUP_MS);
  await until(() => callFrames(gst, 'ada') > FRAMES,
      'legba-call to decode the page\'s video in the mesh',
      { ms: SETUP_MS, detail });
  assert.deepEqual(await page.tab.evaluate(() => ({
    sfu: window.legba.peer()._sfu !== null,
    mesh: [...window.legba.peer().participants.values()]
        .filter((p) => p.conn?.pc.connectionState === 'connected').length,
  })), { sfu: false, mesh: 1 }, 'a mesh of two');

  /* each sends the other a message every SEND_MS, in the mesh, across
   * the move and after */
  let gstSent = 0;
  const gstSender = setInterval(() => {
    gst.child.stdin.write(`gst ${gstSent++}\n`);
  }, SEND_MS);
  defer(() => clearInterval(gstSender));
  await page.tab.evaluate((ms) => {
    window.adaSent = 0;
    window.adaSender = setInterval(() => {
      window.legba.send({ text: `ada ${window.adaSent}` }, { topic: 'chat' });
      window.adaSent++;
    }, ms);
  }, SEND_MS);
  const pageGot = () => page.tab.evaluate(() => window.legba.record.chat
      .filter((c) => c.who === 'gst').map((c) => c.text));
  const gstGot = () => gst.lines.filter((l) => l.startsWith('<ada> '))
      .map((l) => l.slice('<ada> '.length));
  await until(async () => tally(await pageGot(), 'gst', 10).count >= 10 &&
      tally(gstGot(), 'ada', 10).count >= 10,
  'the mesh to carry the first messages each way', { ms: SETUP_MS, detail });

  /* the third: the server moves the room to Janus */
  const carol = startCall(server, 'carol');
  calls.push(carol);
  await until(() => carol.id, 'carol to join', { ms: SETUP_MS, detail });
  await until(() => server.log().includes('sfu-auto-switch'),
      'the server to move the room to its SFU', { ms: SETUP_MS, detail });

  /* everyone decodes everyone through Janus: the page's stats are its
   * subscriber connections' once it has no mesh connection left;
   * legba-call's room logs the end of its move once its mesh
   * connections are closed */
  await until(() => page.tab.evaluate(() => {
    const peer = window.legba.peer();
    return peer._sfu !== null && !peer._sfu.move &&
      [...peer.participants.values()].every((p) => !p.conn);
  }), 'the page to close its mesh connection', { ms: SETUP_MS, detail });
  await until(() => gst.lines.some((l) => / moved to the SFU in \d+ ms/
      .test(l)), 'legba-call to close its mesh connection',
  { ms: SETUP_MS, detail });
  /* its count of the page's frames from a stats line written once its
   * mesh connection was closed */
  const moved = gst.lines.findIndex((l) => / moved to the SFU in \d+ ms/
      .test(l));
  const stats = await until(() => gst.lines.slice(moved + 1)
      .find((l) => / \| ada \d+ frames /.test(l)),
  'a stats line of legba-call after its move', { ms: SETUP_MS, detail });
  const before = { ada: Number(/ \| ada (\d+) frames /.exec(stats)[1]) };
  await decodedFrom(page, gst.id, FRAMES, SETUP_MS);
  await decodedFrom(page, carol.id, FRAMES, SETUP_MS);
  await until(() => callFrames(gst, 'ada') > before.ada + FRAMES &&
      callFrames(gst, 'carol') > FRAMES && callFrames(carol, 'ada') > FRAMES &&
      callFrames(carol, 'gst') > FRAMES,
  'legba-call and carol to decode the others through Janus',
  { ms: SETUP_MS, detail });

  /* legba-call's room heard the page's sfu-ready (it would otherwise
   * have finished its move after 5 s, without it) */
  const ready = `${adaId} receives the local participant through the SFU`;
  assert.ok(gst.lines.some((l) => l.includes(ready)),
      `legba-call's room logged "${ready}"\n${await detail()}`);
  assert.ok(!gst.lines.some((l) => l.includes('the move to the SFU is not ' +
      'done after')), 'legba-call\'s room did not wait out its move');
  assert.match(await page.tab.evaluate(() => window.legba.record.log
      .join('\n')), new RegExp(`${gst.id} receives this participant ` +
      'through the SFU'), 'the page heard legba-call\'s sfu-ready');
  /* each said sfu-ready once a probe of the other's came through Janus */
  const probed = `${adaId}'s messages come through the SFU`;
  assert.ok(gst.lines.some((l) => l.includes(probed)),
      `legba-call's room logged "${probed}"\n${await detail()}`);
  const pageLog = await page.tab.evaluate(() => window.legba.record.log);
  const probedAt = pageLog.findIndex((l) =>
    l.includes(`${gst.id}'s messages come through the SFU`));
  const toldAt = pageLog.findIndex((l) =>
    l.includes(`telling ${gst.id} it is received through the SFU`));
  assert.ok(probedAt >= 0 && toldAt > probedAt,
      'the page had legba-call\'s probe before it said sfu-ready');

  /* ten more each through Janus, then every message is checked */
  const gstUntil = gstSent + 10;
  const adaUntil = await page.tab.evaluate(() => window.adaSent) + 10;
  await until(async () => gstSent >= gstUntil &&
      await page.tab.evaluate(() => window.adaSent) >= adaUntil,
  'ten more messages each', { ms: SETUP_MS, detail });
  clearInterval(gstSender);
  const adaSent = await page.tab.evaluate(() => {
    clearInterval(window.adaSender);
    return window.adaSent;
  });
  await until(async () => tally(await pageGot(), 'gst', gstSent).count >=
      gstSent && tally(gstGot(), 'ada', adaSent).count >= adaSent,
  'every message to arrive', { ms: SETUP_MS, detail: async () => {
    const a = tally(await pageGot(), 'gst', gstSent);
    const b = tally(gstGot(), 'ada', adaSent);
    return `the page misses ${a.missing.length} of legba-call's ` +
      `${gstSent}: ${a.missing.join(' ')}\nlegba-call misses ` +
      `${b.missing.length} of the page's ${adaSent}: ` +
      `${b.missing.join(' ')}\n${await detail()}`;
  } });
  /* what each side's move took, for the record */
  t.diagnostic(`messages: ${adaSent} from the page, ${gstSent} from ` +
      'legba-call');
  for (const line of await page.tab.evaluate(() => window.legba.record.log
      .filter((l) => / into the move\)$/.test(l))))
    t.diagnostic(`page: ${line}`);
  for (const line of gst.lines.filter((l) => /the SFU|mesh connection/
      .test(l) && / legbaroom /.test(l)))
    t.diagnostic(`legba-call: ${line.replace(/^.* legbaroom /, '')}`);
  assert.deepEqual(tally(await pageGot(), 'gst', gstSent).twice, [],
      'the page got each of legba-call\'s messages once');
  assert.deepEqual(tally(gstGot(), 'ada', adaSent).twice, [],
      'legba-call got each of the page\'s messages once');
  assert.deepEqual(await page.tab.evaluate(() => window.legba.record.events
      .filter((e) => e.type === 'error').map((e) => e.message)), [],
  'the page reported no error');
  assert.deepEqual(await page.tab.evaluate(() => window.legba.record.events
      .filter((e) => e.type === 'data' && e.topic?.startsWith('legba.'))
      .map((e) => e.topic)), [],
  'no message on a reserved topic (the probes) reached the application');
  assert.deepEqual(await page.cspViolations(), [],
      'nothing the page did was blocked by its Content-Security-Policy');
  await page.leave();
});

/* A TCP relay in front of Janus's WebSocket port, given to the
 * participants as their Janus: each link remembers whether Chromium
 * opened it (its WebSocket handshake's User-Agent), and cut() closes the
 * page's, both ends, while Janus stays up. */
async function startRelay (defer, target)
{
  const links = [];
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    const link = { client, upstream, chromium: null };
    links.push(link);
    client.once('data', (chunk) => {
      link.chromium = /Chrome/.test(chunk.toString('latin1'));
    });
    client.pipe(upstream);
    upstream.pipe(client);
    for (const socket of [client, upstream]) {
      socket.on('error', () => {});
      socket.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => {
    for (const { client, upstream } of links) {
      client.destroy();
      upstream.destroy();
    }
    server.close();
  });
  return {
    url: `ws://127.0.0.1:${server.address().port}/`,
    pageLinks: () => links.filter((l) => l.chromium),
    cutPage: () => {
      for (const { client, upstream, chromium } of links) {
        if (chromium) {
          client.destroy();
          upstream.destroy();
        }
      }
    },
  };
}

/* legba-server (topology sfu, its participants given wsUrl as their
 * Janus), the demo page "ada" in headless Chromium and a legba-call
 * "gst" in one SFU room, once each decodes the other. */
async function pageAndCall (defer, janus, wsUrl)
{
  const server = await startDemoServer(defer, janusArgs(janus, { wsUrl }));
  const chrome = await launchChromium();
  defer(() => chrome.close());
  const page = await openParticipant(chrome, { url: `${server.base}/demo/` },
      'ada');
  defer(() => page.close());
  const call = startCall(server, 'gst');
  defer(async () => {
    if (!call.child.exitCode && !call.child.signalCode)
      call.child.kill('SIGKILL');
    await call.exited;
  });
  const detail = async () => [call.describe(), '--- ada log:',
    ...await page.tab.evaluate(() => window.legba.record.log.slice(-40))
        .catch(() => []), await page.describe(),
    `--- legba-server:\n${server.log().slice(-3000)}`].join('\n');
  const logged = (text) => page.tab.evaluate((t) =>
    window.legba.record.log.some((line) => line.includes(t)), text);

  const adaId = await page.join(server, ROOM, { source: 'test',
    identity: 'ada' });
  await until(() => call.id, 'legba-call to join', { ms: SETUP_MS, detail });
  await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  await until(() => callFrames(call, 'ada') > FRAMES,
      'legba-call to decode the page\'s video', { ms: SETUP_MS, detail });
  return { server, page, call, adaId, detail, logged };
}

test('an SFU room whose page loses its own connection to a healthy Janus: ' +
    'the page opens a session again and it and legba-call decode each ' +
    'other again', async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const relay = await startRelay(defer, new URL(janus.JANUS_WS_URL));
  const { page, call, adaId, detail, logged } = await pageAndCall(defer,
      janus, relay.url);
  assert.equal(relay.pageLinks().length, 1, 'the page reached Janus once');

  const before = callFrames(call, 'ada');
  relay.cutPage();
  await until(() => logged('the SFU session is back'), 'the page to open ' +
      'its session again', { ms: SETUP_MS, detail });
  assert.equal(relay.pageLinks().length, 2, 'the page reached the same ' +
      'Janus again');
  await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  await until(() => callFrames(call, 'ada') > before + FRAMES,
      'legba-call to decode the page\'s video again', { ms: SETUP_MS,
        detail });
  /* reliable data after it: the page's chat reaches legba-call */
  await until(async () => {
    if (call.lines.includes('<ada> back again'))
      return true;
    await page.tab.evaluate(() => window.legba.sendChat('back again'));
    return false;
  }, 'legba-call to print the page\'s chat message sent after',
  { ms: SETUP_MS, every: 1000, detail });
  assert.deepEqual(await page.tab.evaluate(() => window.legba.record.events
      .filter((e) => e.type === 'error').map((e) => e.message)), [],
  'the page reported no error');
  assert.ok(!call.lines.some((l) => / left$/.test(l) && l.includes(adaId)),
      'legba-call never saw the page leave');
  await page.leave();
});

const ADMIN_SECRET = 'legba-test-admin-secret';

async function adminCall (janus, path, verb)
{
  const answer = await (await fetch(`${janus.JANUS_ADMIN_URL}${path}`, {
    method: 'POST', body: JSON.stringify({ janus: verb, transaction: 't',
      admin_secret: ADMIN_SECRET }) })).json();
  assert.equal(answer.janus, 'success', JSON.stringify(answer));
  return answer;
}

/* Destroys, through Janus's admin API, the session holding a VideoRoom
 * handle of that display; false when none does. */
async function destroySessionOf (janus, display)
{
  const { sessions } = await adminCall(janus, '', 'list_sessions');
  for (const session of sessions) {
    const { handles } = await adminCall(janus, `/${session}`, 'list_handles');
    for (const handle of handles) {
      const { info } = await adminCall(janus, `/${session}/${handle}`,
          'handle_info');
      if (info?.plugin_specific?.display === display) {
        await adminCall(janus, `/${session}`, 'destroy_session');
        return true;
      }
    }
  }
  return false;
}

test('an SFU room whose page\'s session Janus destroys: the page learns it ' +
    'from its next keepalive, opens a session again, and it and legba-call ' +
    'decode each other again', async (t) => {
  const defer = teardown(t);
  const janus = await startJanus(defer, undefined, ADMIN_SECRET);
  if (!janus) {
    t.skip('janus is not installed');
    return;
  }
  const { page, call, adaId, detail, logged } = await pageAndCall(defer,
      janus, janus.JANUS_WS_URL);

  assert.ok(await destroySessionOf(janus, adaId), 'Janus held the page\'s ' +
      'session');
  const before = callFrames(call, 'ada');
  /* a keepalive every 25 s: the page learns it within that */
  await until(() => logged('the SFU session is back'), 'the page to open ' +
      'its session again', { ms: SETUP_MS, detail });
  assert.ok(await logged('Janus answered a keepalive'), 'from a keepalive');
  await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  await until(() => callFrames(call, 'ada') > before + FRAMES,
      'legba-call to decode the page\'s video again', { ms: SETUP_MS,
        detail });
  assert.deepEqual(await page.tab.evaluate(() => window.legba.record.events
      .filter((e) => e.type === 'error').map((e) => e.message)), [],
  'the page reported no error');
  assert.ok(!call.lines.some((l) => / left$/.test(l) && l.includes(adaId)),
      'legba-call never saw the page leave');
  await page.leave();
});

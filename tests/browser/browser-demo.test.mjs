// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The demo page legba-server serves at /demo/ (its files from --web-dir,
// pusher-js from --pusher-js-dir), in headless Chromium with a generated
// test pattern, and a legba-call participant: each decodes the other's
// video, chat goes both ways, and the call's leaving removes its tile. The
// page works under the Content-Security-Policy the server sends with it:
// any violation fails the test.
// With LEGBA_SCREENSHOT=FILE it saves a screenshot of the page in the call.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startServer } from '../integration/server.mjs';
import {
  decodedFrom, launchChromium, openParticipant, teardown, until,
} from './browser.mjs';

/* a sanitizer build on a loaded 2-core machine sets up a call in ~15 s */
const SETUP_MS = 60000;
const FRAMES = 15;

function requireEnv (name)
{
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: run this test through meson test`);
  return value;
}

/* GStreamer 1.22's rtpsession releases its lock inside
 * g_hash_table_foreach() when it schedules pending NACKs, and a source
 * added meanwhile fails GLib's check (tests/common/legba-test.c tolerates
 * it in the test processes). legba-call runs without fatal criticals and
 * its output is checked for any other CRITICAL. */
const RTPSESSION_RACE =
    "g_hash_table_foreach: assertion 'version == hash_table->version' failed";

function lenientEnv ()
{
  const debug = (process.env.G_DEBUG ?? '').split(',')
    .filter((f) => f && f !== 'fatal-criticals');
  return { ...process.env, G_DEBUG: debug.join(',') };
}

/* legba-call with --chat and --json: its human-readable lines come on
 * standard error, the report on standard output at exit. */
function startCall (server, identity)
{
  const child = spawn(requireEnv('LEGBA_CALL'), ['--server',
    `ws://${server.host}:${server.port}`, '--room', 'demo', '--identity',
    identity, '--key', server.key, '--secret', server.secret, '--width',
    '320', '--height', '240', '--fps', '15', '--bitrate', '300', '--chat',
    '--stats', '--json', '--duration', '300'],
  { stdio: ['pipe', 'pipe', 'pipe'], env: lenientEnv() });
  const call = { child, lines: [], out: '', id: null };
  createInterface({ input: child.stderr }).on('line', (line) => {
    call.lines.push(line);
    const m = /^joined room demo as (\S+)$/.exec(line);
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

test('the /demo page and legba-call: video and chat both ways, leaving ' +
    'removes the tile', async (t) => {
  const defer = teardown(t);
  const server = await startServer({ args: ['--web-dir',
    requireEnv('LEGBA_WEB_DIR'), '--pusher-js-dir',
    join(requireEnv('LEGBA_SOURCE_ROOT'), 'tests', 'integration',
        'node_modules', 'pusher-js', 'dist', 'web')] });
  defer(() => server.stop());
  const served = await fetch(`${server.base}/demo/`);
  assert.equal(served.headers.get('x-content-type-options'), 'nosniff');
  assert.match(served.headers.get('content-security-policy') ?? '',
      /default-src 'none'/, 'the page comes with its policy');
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

  const adaId = await page.join(server, 'demo', { source: 'test',
    identity: 'ada' });
  await until(() => call.id, 'legba-call to join', { ms: SETUP_MS,
    detail: call.describe });

  /* video: the browser decodes legba-call's, in legba-call's tile */
  const seen = await decodedFrom(page, call.id, FRAMES, SETUP_MS);
  assert.equal(seen[call.id].inbound.video.width, 320);
  assert.match(await page.tab.textContent(`#tile-${call.id} figcaption`),
      /gst/);

  /* chat, both ways */
  call.child.stdin.write('hello from gstreamer\n');
  await until(() => page.tab.evaluate(() => window.legba.record.chat
      .some((c) => c.who === 'gst' && c.text === 'hello from gstreamer')),
  'the page to show legba-call\'s chat message', { ms: SETUP_MS,
    detail: call.describe });
  await page.tab.evaluate(() => window.legba.sendChat('hello from chromium'));
  await until(() => call.lines.includes('<ada> hello from chromium'),
      'legba-call to print the page\'s chat message', { ms: SETUP_MS,
        detail: call.describe });
  assert.match(await page.tab.textContent('#chat-log'),
      /gst: hello from gstreamer/);
  assert.match(await page.tab.textContent('#participants'), /gst/);

  /* and plays it in the tile: frames rendered, not only decoded (a stream
   * sent under an SSRC its description does not announce is decoded but
   * reaches no track) */
  await until(() => page.tab.evaluate(({ id, frames }) => {
    const video = document.querySelector(`#tile-${id} video`);
    return video && video.videoWidth > 0 &&
      video.getVideoPlaybackQuality().totalVideoFrames > frames;
  }, { id: call.id, frames: FRAMES }), 'the tile to play legba-call\'s video',
  { ms: SETUP_MS, detail: async () => `${call.describe()}\n` +
      JSON.stringify(await page.tab.evaluate((id) => {
        const video = document.querySelector(`#tile-${id} video`);
        return video && { readyState: video.readyState,
          width: video.videoWidth,
          rendered: video.getVideoPlaybackQuality().totalVideoFrames };
      }, call.id)) });

  if (process.env.LEGBA_SCREENSHOT)
    await page.tab.screenshot({ path: process.env.LEGBA_SCREENSHOT });

  /* legba-call decodes the page's video: its stats lines count frames */
  await until(() => call.lines.some((line) => {
    const m = / \| ada (\d+) frames /.exec(line);
    return m && Number(m[1]) > FRAMES;
  }), 'legba-call to decode the page\'s video', { ms: SETUP_MS,
    detail: call.describe });

  /* legba-call leaves: it reports the page's video, audio and chat; the
   * page removes its tile */
  call.child.stdin.end();
  call.child.kill('SIGTERM');
  assert.deepEqual(await call.exited, { code: 0, signal: null },
      call.describe());
  assert.deepEqual(call.lines.filter((l) => l.includes('-CRITICAL **') &&
      !l.includes(RTPSESSION_RACE)), [], 'no CRITICAL from legba-call');
  const report = JSON.parse(call.out);
  const ada = report.participants.find((p) => p.id === adaId);
  assert.ok(ada, `legba-call saw ada: ${call.out}`);
  assert.ok(ada.video_frames > FRAMES, `legba-call decoded ada: ${call.out}`);
  assert.ok(ada.audio_buffers > 0, `legba-call got ada's audio: ${call.out}`);
  assert.ok(ada.data_messages >= 1, `legba-call got ada's chat: ${call.out}`);
  await until(() => page.tab.evaluate((id) =>
    document.getElementById(`tile-${id}`) === null, call.id),
  'the page to remove legba-call\'s tile', { ms: SETUP_MS });
  assert.deepEqual(await page.cspViolations(), [],
      'nothing the page did was blocked by its Content-Security-Policy');
});

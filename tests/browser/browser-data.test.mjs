// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Data-channel interop (docs/room-protocol.md §6): headless Chromium
// (room-peer.js) and a GStreamer participant (gst-launch-1.0 with
// legbaroom, legbadatasink and legbadatasrc) in one room through
// legba-server exchange JSON both ways, in order, up to the 65,536-byte
// limit; one byte more is refused on the sending side in both; a malformed
// message from the browser is reported by the GStreamer side, whose
// channel stays open; lossy JSON goes both ways on the lossy channel,
// opened by whichever side sends first.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../integration/server.mjs';
import {
  gstLaunch, launchChromium, openParticipant, servePage, teardown, until,
} from './browser.mjs';

/* a sanitizer build on a loaded 2-core machine sets up a call in ~15 s */
const SETUP_MS = 60000;
const LIMIT = 65536;
/* {"topic":"from-gst","data":""} and {"topic":"from-web","data":""} */
const ENVELOPE = 30;
let chrome;
let page;

before(async () => {
  [chrome, page] = await Promise.all([launchChromium(), servePage()]);
});

after(async () => {
  await chrome?.close();
  await page?.close();
});

async function filesIn (dir, prefix)
{
  /* multifilesink writes each file under a temporary name and renames it:
   * only the final names count */
  const final = new RegExp(`^${prefix}\\d+\\.json$`);
  const names = (await readdir(dir)).filter((n) => final.test(n)).sort();
  const out = [];
  for (const n of names)
    out.push(await readFile(join(dir, n), 'utf8'));
  return out;
}

function dataFrom (events, prefix)
{
  return events.filter((e) => e.type === 'data' &&
    e.participant.startsWith(prefix));
}

/* A server, a fresh directory `dir` (`prepare(dir)` writes what the
 * pipeline reads), the browser participant `web` in `room` and then
 * gst-launch-1.0's `gst` with the elements `tail(dir)`; all of it undone
 * after the test, gst-launch-1.0 expected to exit 0. */
async function browserAndGst (t, room, tail, prepare = async () => {})
{
  const defer = teardown(t);
  const server = await startServer();
  defer(() => server.stop());
  const dir = await mkdtemp(join(tmpdir(), 'legba-browser-data-'));
  defer(() => rm(dir, { recursive: true, force: true }));
  await prepare(dir);
  const b = await openParticipant(chrome, page, 'web');
  defer(() => b.close());
  await b.join(server, room, { publish: false });
  const g = gstLaunch(server, room, 'gst', tail(dir));
  defer(async () => {
    const exit = await g.stop();
    assert.equal(exit.code, 0, `gst-launch-1.0 exits 0\n${g.output}`);
  });
  return { dir, b, g };
}

/* The data events the browser `b` had from gst-launch-1.0's `g`, once
 * there are `n`. */
function browserGot (b, g, n, reason)
{
  return until(async () => {
    const got = dataFrom((await b.record()).events, 'gst-');
    return got.length >= n && got;
  }, reason, { ms: SETUP_MS,
    detail: async () => `${g.output}\n${await b.describe()}` });
}

async function writeReadings (dir, values)
{
  for (const [i, v] of values.entries())
    await writeFile(join(dir, `out-${String(i).padStart(5, '0')}.json`),
        JSON.stringify(v));
}

test('JSON both ways between Chromium and gst-launch-1.0, in order, up to ' +
    '65,536 bytes', async (t) => {
  /* what the GStreamer side sends: three readings and one message of
   * exactly the limit, envelope included */
  const big = 'g'.repeat(LIMIT - ENVELOPE);
  const { dir, b, g } = await browserAndGst(t, 'data', (d) => [
    'multifilesrc', `location=${d}/out-%05d.json`, '!', 'application/json',
    '!', 'legbadatasink', 'room-element=r', 'topic=from-gst',
    'min-recipients=1',
    'legbadatasrc', 'room-element=r', 'topic=from-web', '!',
    'multifilesink', `location=${d}/in-%05d.json`,
  ], (d) => writeReadings(d, [{ n: 0 }, { n: 1 }, { n: 2 }, big]));

  /* GStreamer → Chromium */
  const fromGst = await browserGot(b, g, 4,
      'the browser to receive the four messages');
  assert.equal(fromGst.length, 4);
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(fromGst[i].data, { n: i });
    assert.equal(fromGst[i].topic, 'from-gst');
    assert.equal(fromGst[i].lossy, false);
  }
  assert.equal(fromGst[3].data, big, 'the 65,536-byte message, whole');

  /* Chromium → GStreamer: a malformed message first, then the readings
   * and one message of exactly the limit */
  const sent = await b.tab.evaluate(({ limit, envelope }) => {
    const peer = window.legba.peer();
    const [[, channel]] = peer._openChannels('legba');
    channel.send('not json');
    const out = { counts: [] };
    for (let i = 0; i < 3; i++)
      out.counts.push(window.legba.send({ n: i }, { topic: 'from-web' }));
    out.counts.push(window.legba.send('w'.repeat(limit - envelope),
        { topic: 'from-web' }));
    /* one byte over: room-peer.js refuses it, and Chromium itself too */
    try {
      window.legba.send('w'.repeat(limit - envelope + 1),
          { topic: 'from-web' });
      out.over = 'sent';
    } catch (e) {
      out.over = e.name;
    }
    try {
      channel.send(JSON.stringify({ topic: 'from-web',
        data: 'w'.repeat(limit - envelope + 1) }));
      out.raw = 'sent';
    } catch (e) {
      out.raw = e.name;
    }
    out.state = channel.readyState;
    return out;
  }, { limit: LIMIT, envelope: ENVELOPE });
  assert.deepEqual(sent.counts, [1, 1, 1, 1]);
  assert.equal(sent.over, 'RangeError');
  assert.notEqual(sent.raw, 'sent', 'Chromium refuses 65,537 bytes itself');
  const got = await until(async () => {
    const files = await filesIn(dir, 'in-');
    return files.length >= 4 && files;
  }, 'gst-launch-1.0 to write the four messages', { ms: SETUP_MS,
    detail: () => g.output });
  assert.equal(got.length, 4);
  for (let i = 0; i < 3; i++)
    assert.deepEqual(JSON.parse(got[i]), { n: i });
  assert.equal(JSON.parse(got[3]), 'w'.repeat(LIMIT - ENVELOPE));
  /* the malformed one was reported, naming the browser, and dropped */
  await until(() => g.output.includes(`Participant ${b.id} sent`),
      'the GStreamer side to report the malformed message',
      { detail: () => g.output });
  assert.match(g.output, /WARNING: from element .*r.*Participant \S+ sent a text message that is not JSON/);
  const state = await b.tab.evaluate(() =>
    window.legba.peer()._openChannels('legba').length);
  assert.equal(state, 1, 'the channel stays open');
});

/* §6: the lossy channel is opened by the side that first sends on it;
 * each test has one side send, so that side opens it. Lossy messages are
 * unordered: compared as a set. */
test('lossy JSON from Chromium to gst-launch-1.0, on the channel the ' +
    'browser opens', async (t) => {
  const { dir, b, g } = await browserAndGst(t, 'lossy-web', (d) => [
    'legbadatasrc', 'room-element=r', 'topic=pos', '!',
    'multifilesink', `location=${d}/in-%05d.json`,
  ]);

  /* the first message goes once the participant is connected, and waits
   * for the channel it opens */
  await until(() => b.tab.evaluate(() =>
    window.legba.send({ n: 0 }, { topic: 'pos', lossy: true })),
  'the GStreamer participant to be connected', { ms: SETUP_MS,
    detail: async () => `${g.output}\n${await b.describe()}` });
  const sent = await b.tab.evaluate(() => [1, 2].map((n) =>
    window.legba.send({ n }, { topic: 'pos', lossy: true })));
  assert.deepEqual(sent, [1, 1]);
  const got = await until(async () => {
    const files = await filesIn(dir, 'in-');
    return files.length >= 3 && files;
  }, 'gst-launch-1.0 to write the three lossy messages', { ms: SETUP_MS,
    detail: () => g.output });
  assert.deepEqual(got.map((f) => JSON.parse(f).n).sort(), [0, 1, 2]);
});

test('lossy JSON from gst-launch-1.0 to Chromium, on the channel ' +
    'GStreamer opens', async (t) => {
  const { b, g } = await browserAndGst(t, 'lossy-gst', (d) => [
    'multifilesrc', `location=${d}/out-%05d.json`, '!', 'application/json',
    '!', 'legbadatasink', 'room-element=r', 'topic=pos', 'reliable=false',
    'min-recipients=1',
  ], (d) => writeReadings(d, [{ n: 0 }, { n: 1 }, { n: 2 }]));

  const got = await browserGot(b, g, 3,
      'the browser to receive the three lossy messages');
  assert.equal(got.length, 3);
  for (const e of got) {
    assert.equal(e.topic, 'pos');
    assert.equal(e.lossy, true);
  }
  assert.deepEqual(got.map((e) => e.data.n).sort(), [0, 1, 2]);
});

// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The network lab's reference participant (docs/benchmarks.md, "Network
// lab"): headless Chromium (Debian's, through playwright-core, as the
// browser tests drive it: tests/browser/browser.mjs) on the room page of
// tests/browser/, in the namespace it is started in.
//
//   node chromium-peer.mjs --role send|recv --url ws://HOST:PORT --app-id ID
//        --key KEY --token TOKEN --room ROOM --identity ID --seconds S
//        [--video-file CLIP.y4m] [--codec H264] [--fec true]
//
// send: publishes its fake camera (playing CLIP.y4m in a loop, at the
// clip's size and rate) and microphone; recv: publishes nothing. Prints
// one JSON line when joined, receiving one when the first frame is
// decoded (getStats read every 50 ms until then), then one a second
// until S seconds have passed: getStats' video RTP counters of every peer connection
// (outbound-rtp and inbound-rtp, with remote-inbound-rtp's round trip,
// and the negotiated payload type) and the nominated candidate pair's
// availableOutgoingBitrate, as Chromium gives them.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CHROMIUM, CHROMIUM_FLAGS, servePage } from
  '../../tests/browser/browser.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { chromium } = await import(pathToFileURL(join(here, '..', '..',
    'tests', 'integration', 'node_modules', 'playwright-core',
    'index.mjs')).href);

function parseArgs (argv)
{
  const opts = { codec: 'H264' };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '').replace(/-(.)/g,
        (_, c) => c.toUpperCase());
    opts[name] = argv[i + 1];
  }
  for (const need of ['role', 'url', 'appId', 'key', 'token', 'room',
    'identity', 'seconds']) {
    if (opts[need] === undefined)
      throw new Error(`--${need} is required`);
  }
  return opts;
}

/* The video counters Chromium's getStats gives, per peer connection. */
function pageStats ()
{
  const keep = ['bytesSent', 'bytesReceived', 'packetsSent',
    'packetsReceived', 'packetsLost', 'retransmittedPacketsSent',
    'retransmittedBytesSent', 'nackCount', 'pliCount', 'firCount',
    'framesEncoded', 'framesDecoded', 'framesDropped', 'keyFramesEncoded',
    'keyFramesDecoded', 'framesPerSecond', 'frameWidth', 'frameHeight',
    'targetBitrate', 'qualityLimitationReason', 'freezeCount',
    'totalFreezesDuration', 'jitterBufferDelay',
    'jitterBufferEmittedCount', 'roundTripTime', 'fractionLost',
    'fecPacketsReceived', 'fecPacketsDiscarded',
    'roundTripTimeMeasurements', 'totalRoundTripTime'];
  const peer = window.legba.peer();
  return Promise.all([...peer.participants.values()]
    .filter((p) => p.conn)
    .map(async (p) => {
      const out = { participant: p.id, outbound: null, inbound: null,
        remoteInbound: null, remoteOutbound: null,
        availableOutgoingBitrate: null };
      const report = await p.conn.pc.getStats();
      for (const r of report.values()) {
        /* the congestion controller's estimate of the link (from the
         * transport feedback the remote side sends), on the pair in use */
        const pair = r.type === 'transport' && r.selectedCandidatePairId ?
          report.get(r.selectedCandidatePairId) : null;
        if (pair?.availableOutgoingBitrate !== undefined)
          out.availableOutgoingBitrate = pair.availableOutgoingBitrate;
        if (r.kind !== 'video')
          continue;
        /* remote-outbound-rtp: the round trip a receiver times from the
         * sender's answers to its extended reports */
        const side = { 'outbound-rtp': 'outbound', 'inbound-rtp': 'inbound',
          'remote-inbound-rtp': 'remoteInbound',
          'remote-outbound-rtp': 'remoteOutbound' }[r.type];
        if (!side)
          continue;
        out[side] = {};
        for (const k of keep) {
          if (r[k] !== undefined)
            out[side][k] = r[k];
        }
        /* the negotiated payload type, so that the lab can tell media
         * from retransmissions on the wire */
        const codec = r.codecId ? report.get(r.codecId) : null;
        if (codec) {
          out[side].payloadType = codec.payloadType;
          out[side].mimeType = codec.mimeType;
        }
      }
      return out;
    }));
}

const opts = parseArgs(process.argv.slice(2));
const url = new URL(opts.url);
const profile = await mkdtemp(join(tmpdir(), 'legba-netlab-chromium-'));
const page = await servePage();
let browser = null;
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
try {
  const args = [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`,
    '--remote-debugging-pipe'];
  if (opts.videoFile)
    args.push(`--use-file-for-fake-video-capture=${opts.videoFile}`);
  browser = await chromium.launch({ executablePath: CHROMIUM,
    ignoreDefaultArgs: true, args, timeout: 30000 });
  const tab = await (await browser.newContext()).newPage();
  tab.on('pageerror', (e) => process.stderr.write(`pageerror ${e}\n`));
  await tab.goto(page.url);
  const send = opts.role === 'send';
  const id = await tab.evaluate((o) => window.legba.join(o), {
    host: url.hostname, port: Number(url.port), key: opts.key,
    appId: opts.appId, token: opts.token, room: opts.room,
    videoCodec: opts.codec, publish: send, videoFec: opts.fec === 'true',
    video: { width: 640, height: 360, frameRate: 30 }, audio: true,
  });
  print({ joined: id, version: browser.version() });
  const end = Date.now() + Number(opts.seconds) * 1000;
  let next = Date.now();
  let awaitingFirst = !send;
  while (Date.now() < end) {
    next += 1000;
    /* receiving, until a frame is decoded: every 50 ms, for its time */
    while (awaitingFirst && Date.now() < next) {
      const stats = await tab.evaluate(pageStats);
      if (stats.some((pc) => pc.inbound?.framesDecoded > 0)) {
        print({ firstFrame: true });
        awaitingFirst = false;
      } else {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    await new Promise((resolve) => setTimeout(resolve,
        Math.max(0, next - Date.now())));
    print({ stats: await tab.evaluate(pageStats) });
  }
  await tab.evaluate(() => window.legba.leave()).catch(() => {});
} finally {
  await browser?.close();
  await page.close();
  await rm(profile, { recursive: true, force: true });
}

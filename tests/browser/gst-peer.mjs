// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Runs gst-peer (a legbaroom pipeline in a process of its own, see
// gst-peer.c) and follows what it reports: received pads, decoded frames
// per participant, the room's element messages, errors.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { WAIT_MS } from '../integration/server.mjs';
import { mintToken, until } from './browser.mjs';

const STOP_MS = 15000;

/* Whatever happens to a test, no gst-peer outlives the test process (the
 * processes are unreferenced so that they never keep it up). */
const running = new Set();
process.on('exit', () => {
  for (const child of running)
    child.kill('SIGKILL');
});

/* Starts a legbaroom participant `identity` in `room` on `server`, with a
 * join token unless `secret` is set (then it signs with the app secret).
 * video: 'h264', 'vp8' or 'none'; roomProps: more legbaroom properties. */
export async function startGstPeer (server, { room, identity, video = 'h264',
  audio = true, secret = false, roomProps = '' })
{
  const binary = process.env.LEGBA_GST_PEER;
  if (!binary)
    throw new Error('LEGBA_GST_PEER is not set: run these tests through meson test');
  const args = ['--server-url', `ws://${server.host}:${server.port}`,
    '--app-key', server.key, '--room', room, '--identity', identity,
    '--video', video, '--room-props', roomProps];
  if (secret)
    args.push('--app-secret', server.secret);
  else
    args.push('--token', await mintToken(server, room, identity),
        '--auth-url', `${server.base}/apps/${server.appId}/auth`);
  if (!audio)
    args.push('--no-audio');
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  /* a peer a failed test left behind must not keep the test process up */
  child.unref();
  child.stdout.unref();
  child.stderr.unref();
  const peer = {
    identity,
    pid: child.pid,
    events: [],
    counts: null,
    stderr: '',
    exit: null,
  };
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    peer.stderr = (peer.stderr + chunk).slice(-32768);
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    running.delete(child);
    peer.exit = { code, signal };
    resolve(peer.exit);
  }));
  createInterface({ input: child.stdout }).on('line', (line) => {
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      peer.stderr += `[stdout] ${line}\n`;
      return;
    }
    e.at = Date.now();
    if (e.event === 'counts')
      peer.counts = e;
    else
      peer.events.push(e);
  });

  Object.assign(peer, {
    /* What it said last, for failure messages. */
    describe () {
      return [`--- gst-peer ${identity} (pid ${child.pid}, exit ` +
          `${JSON.stringify(peer.exit)})`, ...peer.events.slice(-30).map((e) =>
        JSON.stringify(e)), `counts: ${JSON.stringify(peer.counts)}`,
      '--- stderr:', peer.stderr.slice(-6000)].join('\n');
    },
    /* Waits for a condition on this peer; fails early if it exits. */
    until (get, reason, ms = WAIT_MS) {
      return until(() => {
        if (peer.exit)
          throw new Error(`gst-peer ${identity} exited while waiting for ` +
              `${reason}\n${peer.describe()}`);
        return get();
      }, reason, { ms, detail: () => peer.describe() });
    },
    /* The decoded frames (video) or buffers (audio) from a participant,
     * summed over its pads that are still there. */
    decoded (participant, kind = 'video') {
      const pads = Object.values(peer.counts?.pads ?? {});
      return pads.filter((p) => p.participant === participant &&
          p.kind === kind && !p.removed)
        .reduce((n, p) => n + p.buffers, 0);
    },
    decodedFrom (participant, frames, kind = 'video', ms = WAIT_MS) {
      return peer.until(() => peer.decoded(participant, kind) > frames,
          `${identity} to decode over ${frames} ${kind} frames from ` +
          `${participant}`, ms);
    },
    /* The participant ids it receives from (pads present now). */
    senders () {
      return [...new Set(Object.values(peer.counts?.pads ?? {})
        .filter((p) => !p.removed).map((p) => p.participant))];
    },
    errors () {
      return peer.events.filter((e) => e.event === 'error');
    },
    messages (name) {
      return peer.events.filter((e) => e.event === 'message' &&
          (name === undefined || e.name === name));
    },
    signal (name) {
      child.kill(name);
    },
    /* SIGTERM (SIGCONT first, should it be stopped) and the exit status. */
    async stop () {
      if (peer.exit)
        return peer.exit;
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      try {
        return await until(() => peer.exit, `gst-peer ${identity} to exit on ` +
            'SIGTERM', { ms: STOP_MS });
      } catch (e) {
        child.kill('SIGKILL');
        await exited;
        throw new Error(`${e.message}\n${peer.describe()}`);
      }
    },
    exited,
  });
  return peer;
}

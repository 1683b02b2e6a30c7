// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// What a restart of legba-server costs its clients, as `systemctl restart`
// does it: SIGTERM, wait for the process to exit, start it again on the
// same port. N pusher-js clients (ws transport, each subscribed to a
// channel) are connected before; prints, from the SIGTERM, when the last
// client saw its close (4200), when the old server exited, when the new
// one listened, and when the last client was connected and subscribed
// again. docs/server.md cites the figures.
//
// Usage (after meson test has built the server; node_modules from
// scripts/setup.sh):
//   LEGBA_SERVER=build/tools/legba-server node bench/server/restart.mjs [N] [RUNS]

import { connectClient, startServer, within } from
  '../../tests/integration/server.mjs';

const CLIENTS = Number(process.argv[2] ?? 100);
const RUNS = Number(process.argv[3] ?? 5);
const WAIT_MS = 30000;

function subscribed (pusher, name)
{
  return new Promise((resolve) => {
    pusher.subscribe(name).bind('pusher:subscription_succeeded', resolve);
  });
}

async function run (first)
{
  const clients = [];
  for (let i = 0; i < CLIENTS; i++) {
    const pusher = await connectClient(first);
    await within(subscribed(pusher, `room-${i % 10}`), WAIT_MS, 'subscribed');
    clients.push(pusher);
  }

  const closed = clients.map((pusher) => new Promise((resolve) => {
    pusher.connection.bind('state_change', (change) => {
      if (change.previous === 'connected')
        resolve(performance.now());
    });
  }));
  const back = clients.map((pusher) => new Promise((resolve) => {
    pusher.connection.bind('message', (event) => {
      if (event.event === 'pusher_internal:subscription_succeeded')
        resolve(performance.now());
    });
  }));

  const t0 = performance.now();
  await first.stop();
  const exited = performance.now();
  const second = await startServer({ args: ['--port', String(first.port)],
    appId: first.appId, key: first.key, secret: first.secret });
  const listening = performance.now();
  const lastClose = Math.max(...await within(Promise.all(closed), WAIT_MS,
      'every client to see its close'));
  const lastBack = Math.max(...await within(Promise.all(back), WAIT_MS,
      'every client to be subscribed again'));

  for (const pusher of clients)
    pusher.disconnect();
  return { second, figures: {
    closed: lastClose - t0, exited: exited - t0,
    listening: listening - t0, reconnected: lastBack - t0 } };
}

let server = await startServer();
const rows = [];
for (let r = 0; r < RUNS; r++) {
  const { second, figures } = await run(server);
  rows.push(figures);
  server = second;
  console.log(Object.entries(figures).map(([k, v]) =>
      `${k} ${v.toFixed(0)} ms`).join(', '));
}
await server.stop();
const median = (k) => rows.map((f) => f[k]).sort((a, b) => a - b)[
    Math.floor(rows.length / 2)];
console.log(`median of ${RUNS} with ${CLIENTS} clients: ` +
    ['closed', 'exited', 'listening', 'reconnected'].map(
        (k) => `${k} ${median(k).toFixed(0)} ms`).join(', '));

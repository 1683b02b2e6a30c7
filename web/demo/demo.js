// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The demo page's script (index.html), a module of its own so that the
// page works under legba-server's Content-Security-Policy, which allows no
// inline script: the form, the tiles, the participants and the chat, on
// LegbaRoomPeer (room-peer.js); window.legba for programs and tests.

import { LegbaRoomPeer } from './room-peer.js';

const $ = (id) => document.getElementById(id);
const record = { events: [], chat: [], log: [] };
const names = new Map();        /* participant id -> display name */
let peer = null;
let media = null;

function nameOf (participant)
{
  return names.get(participant) ?? participant;
}

/* A moving test pattern and a tone, for machines without a camera. */
function testMedia ()
{
  const canvas = document.createElement('canvas');
  canvas.width = 320;
  canvas.height = 240;
  const g = canvas.getContext('2d');
  let frame = 0;
  setInterval(() => {
    g.fillStyle = `hsl(${(frame * 3) % 360}, 60%, 35%)`;
    g.fillRect(0, 0, 320, 240);
    g.fillStyle = '#fff';
    g.beginPath();
    g.arc(160 + 120 * Math.sin(frame / 15), 120, 30, 0, 2 * Math.PI);
    g.fill();
    g.font = '20px sans-serif';
    g.fillText(`frame ${frame++}`, 10, 230);
  }, 1000 / 15);
  const stream = canvas.captureStream(15);
  const audio = new AudioContext();
  const tone = audio.createOscillator();
  const out = audio.createMediaStreamDestination();
  const gain = audio.createGain();
  gain.gain.value = 0.05;
  tone.connect(gain).connect(out);
  tone.start();
  stream.addTrack(out.stream.getAudioTracks()[0]);
  return stream;
}

function tileFor (participant, label)
{
  const id = `tile-${participant}`;
  let figure = $(id);
  if (!figure) {
    figure = document.createElement('figure');
    figure.id = id;
    /* muted video plays without a user gesture; the sound goes through
     * an audio element of its own */
    const video = document.createElement('video');
    video.autoplay = true;
    video.muted = true;
    video.playsInline = true;
    video.srcObject = new MediaStream();
    const audio = document.createElement('audio');
    audio.autoplay = true;
    audio.srcObject = new MediaStream();
    const caption = document.createElement('figcaption');
    figure.append(video, audio, caption);
    $('tiles').append(figure);
  }
  figure.querySelector('figcaption').textContent = label ?? nameOf(participant);
  return figure;
}

function showParticipants ()
{
  const list = $('participants');
  list.replaceChildren();
  const me = document.createElement('li');
  me.textContent = `${nameOf(peer?.id)} (you)`;
  list.append(me);
  for (const id of peer?.participants.keys() ?? []) {
    const li = document.createElement('li');
    li.textContent = nameOf(id);
    li.id = `li-${id}`;
    list.append(li);
  }
}

function chatLine (who, text)
{
  record.chat.push({ who, text });
  const line = document.createElement('div');
  const b = document.createElement('b');
  b.textContent = `${who}: `;
  line.append(b, document.createTextNode(text));
  $('chat-log').append(line);
  $('chat-log').scrollTop = $('chat-log').scrollHeight;
}

function note (type, detail)
{
  const entry = { type, at: performance.now() };
  for (const [k, v] of Object.entries(detail ?? {}))
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v))
      entry[k] = v;
  if (type === 'data')
    entry.data = detail.data;
  record.events.push(entry);
}

async function join (options)
{
  if (peer)
    throw new Error('already joined');
  media = options.publish === false ? null : options.source === 'test' ?
    testMedia() : await navigator.mediaDevices.getUserMedia({
      video: { width: 320, height: 240, frameRate: 15 }, audio: true });
  peer = new LegbaRoomPeer({ Pusher: window.Pusher, media,
    log: (line) => record.log.push(`${performance.now().toFixed(0)} ${line}`),
    ...options });
  if (media) {
    const mine = tileFor('me', `${options.identity ?? 'me'} (you)`);
    mine.querySelector('video').srcObject =
        new MediaStream(media.getVideoTracks());
  }
  for (const type of ['state', 'participant-joined', 'participant-left',
    'data', 'mute', 'error'])
    peer.addEventListener(type, (e) => note(type, e.detail));
  peer.addEventListener('state', (e) => {
    $('state').textContent = e.detail.state;
  });
  peer.addEventListener('participant-joined', ({ detail }) => {
    names.set(detail.participant, detail.info?.name ??
        detail.info?.identity ?? detail.participant);
    showParticipants();
    chatLine('*', `${nameOf(detail.participant)} joined`);
  });
  peer.addEventListener('participant-left', ({ detail }) => {
    $(`tile-${detail.participant}`)?.remove();
    chatLine('*', `${nameOf(detail.participant)} left`);
    showParticipants();
  });
  /* a new stream each time: an element does not always pick up a track
   * added to the stream it already plays */
  peer.addEventListener('track', ({ detail }) => {
    const element = tileFor(detail.participant).querySelector(detail.kind);
    element.srcObject = new MediaStream([...element.srcObject.getTracks(),
      detail.track]);
    element.play().catch(() => {});
  });
  peer.addEventListener('track-removed', ({ detail }) => {
    const element = $(`tile-${detail.participant}`)
        ?.querySelector(detail.kind);
    if (element)
      element.srcObject = new MediaStream(element.srcObject.getTracks()
          .filter((t) => t !== detail.track));
  });
  peer.addEventListener('mute', ({ detail }) => {
    const figure = tileFor(detail.participant);
    const flags = [detail.audio ? 'mic muted' : '',
      detail.video ? 'camera muted' : ''].filter(Boolean).join(', ');
    figure.querySelector('figcaption').textContent = nameOf(detail.participant);
    figure.querySelector('figcaption').classList.toggle('muted', !!flags);
    if (flags)
      figure.querySelector('figcaption').textContent += ` (${flags})`;
  });
  peer.addEventListener('data', ({ detail }) => {
    if (detail.topic === 'chat' && typeof detail.data?.text === 'string')
      chatLine(nameOf(detail.participant), detail.data.text);
  });
  const id = await peer.join();
  names.set(id, options.identity ?? id);
  showParticipants();
  for (const b of ['mute-audio', 'mute-video', 'leave', 'chat-input',
    'chat-send'])
    $(b).disabled = false;
  $('join').disabled = true;
  return id;
}

function sendChat (text)
{
  peer.send({ text }, { topic: 'chat' });
  chatLine(`${nameOf(peer.id)} (you)`, text);
}

async function leave ()
{
  await peer?.leave();
  for (const track of media?.getTracks() ?? [])
    track.stop();
  $('tiles').replaceChildren();
  for (const b of ['mute-audio', 'mute-video', 'leave', 'chat-input',
    'chat-send'])
    $(b).disabled = true;
}

window.legba = {
  join,
  record,
  peer: () => peer,
  stats: () => peer.stats(),
  send: (data, options) => peer.send(data, options),
  sendChat,
  setMuted: (muted) => peer.setMuted(muted),
  leave,
};

$('join-form').addEventListener('submit', (e) => {
  e.preventDefault();
  join({ host: location.hostname, port: Number(location.port || 80),
    tls: location.protocol === 'https:', key: $('f-key').value,
    appId: $('f-app').value, token: $('f-token').value,
    room: $('f-room').value, identity: $('f-identity').value,
    source: $('f-source').value })
    .catch((err) => { $('state').textContent = `failed: ${err.message}`; });
});
$('chat-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('chat-input').value.trim();
  if (text)
    sendChat(text);
  $('chat-input').value = '';
});
$('mute-audio').addEventListener('click', () => {
  const audio = !peer.muted.audio;
  peer.setMuted({ audio });
  for (const t of media?.getAudioTracks() ?? [])
    t.enabled = !audio;
  $('mute-audio').textContent = audio ? 'Unmute mic' : 'Mute mic';
});
$('mute-video').addEventListener('click', () => {
  const video = !peer.muted.video;
  peer.setMuted({ video });
  for (const t of media?.getVideoTracks() ?? [])
    t.enabled = !video;
  $('mute-video').textContent = video ? 'Unmute camera' : 'Mute camera';
});
$('leave').addEventListener('click', () => leave());

const query = new URLSearchParams(location.search);
for (const [param, field] of [['room', 'f-room'], ['identity', 'f-identity'],
  ['key', 'f-key'], ['app', 'f-app'], ['token', 'f-token'],
  ['source', 'f-source']])
  if (query.has(param))
    $(field).value = query.get(param);
if (query.get('join') === '1')
  $('join').click();

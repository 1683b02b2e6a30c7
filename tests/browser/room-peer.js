// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// A browser participant of a Legba room, speaking docs/room-protocol.md
// (legba-room/2) with pusher-js for signalling and RTCPeerConnection for
// media and data: peer to peer in a mesh room, through the room's Janus
// in an SFU room (§8, room-sfu.js). One instance is one participant:
//
//   const peer = new LegbaRoomPeer({ Pusher, key, host, port, appId, token,
//     room: 'demo', media: await navigator.mediaDevices.getUserMedia(...) });
//   peer.addEventListener('track', (e) => show(e.detail.participant, e.detail.track));
//   await peer.join();
//
// Events (CustomEvent, in `detail`):
//   state               {state}: disconnected, connecting, connected,
//                       reconnecting, failed
//   participant-joined  {participant, info}
//   participant-left    {participant}
//   participant-state   {participant, state}: new, connecting, connected,
//                       reconnecting, away, failed, closed
//   track               {participant, track, kind, streams}
//   track-removed       {participant, track, kind}
//   data                {participant, topic, data, lossy} (participant
//                       'server' for HTTP API events, §7)
//   mute                {participant, audio, video}
//   signal              {direction, message, bytes, at, whole}: every
//                       signal sent or received, for tracing; a signal
//                       sent or received as parts comes once more whole
//                       (whole: true), before its parts go or once they
//                       are reassembled
//   error               {participant, message}
// The pure helpers (splitSignal, compareIds, ...) run in Node too.

import { LegbaSfu, parseTopology } from './room-sfu.js';

export const PROTOCOL = 'legba-room/2';

/* §4: the strictest common limits, unless the server advertises its own. */
export const DEFAULT_LIMITS = Object.freeze({ bytes: 10000, rate: 10 });
export const RATE_WINDOW_MS = 1100;
const BATCH_MS = 50;
const OFFER_WAIT_MS = 3000;
const GRACE_MS = 10000;
const EARLY_MS = 10000;
const PARTS_MS = 10000;
const MAX_PARTS = 1000;
const DEFAULT_MAX_MESSAGE = 65536;
const LEAVE_DRAIN_MS = 2000;
/* lossy messages that wait for a lossy channel to open, at most */
const LOSSY_WAITING = 64;

export const ROOM_PATTERN = /^[A-Za-z0-9_\-=@,.;]{1,149}$/;
export const SUFFIX_PATTERN = /^[a-z0-9]{6,16}$/;
const SIGNAL_EVENT = 'client-legba-signal';
const TOPOLOGY_EVENT = 'legba:topology';
const TYPES = new Set(['offer', 'answer', 'candidates', 'bye', 'part',
  'sfu-ready']);

const encoder = new TextEncoder();

/* §4: sizes are the UTF-8 length of compact JSON, as JSON.stringify
 * writes it. */
export function jsonBytes (value)
{
  return encoder.encode(JSON.stringify(value)).length;
}

/* §3: participant ids compare byte-wise (UTF-8). */
export function compareIds (a, b)
{
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) {
    if (x[i] !== y[i])
      return x[i] < y[i] ? -1 : 1;
  }
  return x.length === y.length ? 0 : (x.length < y.length ? -1 : 1);
}

function randomString (length)
{
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join('');
}

/* §2: the suffix of the participant id, picked once per participant. */
export function randomSuffix ()
{
  return randomString(12);
}

/* Bytes one character takes inside a JSON string literal. */
function escapedBytes (ch)
{
  if (ch === '"' || ch === '\\' || ch === '\b' || ch === '\f' ||
      ch === '\n' || ch === '\r' || ch === '\t')
    return 2;
  const c = ch.codePointAt(0);
  if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff))
    return 6;
  return encoder.encode(ch).length;
}

/* §4: splits a signal into `part` messages, each within `limit` bytes
 * serialized; their chunks concatenated are the signal's JSON text. */
export function splitSignal (signal, id, limit)
{
  const text = JSON.stringify(signal);
  const envelope = (part, parts, chunk) => ({
    to: signal.to, from: signal.from, pc: signal.pc, type: 'part',
    id, part, parts, chunk,
  });
  /* the numbers at their widest: there are never more parts than chars */
  const room = limit - jsonBytes(envelope(text.length, text.length, ''));
  if (room < 6)
    throw new RangeError(`client events of ${limit} bytes cannot carry parts`);
  const chunks = [];
  let chunk = '';
  let used = 0;
  for (const ch of text) {
    const n = escapedBytes(ch);
    if (used + n > room) {
      chunks.push(chunk);
      chunk = '';
      used = 0;
    }
    chunk += ch;
    used += n;
  }
  if (chunk)
    chunks.push(chunk);
  return chunks.map((c, i) => envelope(i, chunks.length, c));
}

/* The rate rule of §4: at most `rate` sends in any window of 1.1 s. Returns
 * how long to wait before the next send may go (0: now). */
export function paceDelay (sentTimes, rate, now)
{
  while (sentTimes.length && now - sentTimes[0] >= RATE_WINDOW_MS)
    sentTimes.shift();
  if (sentTimes.length < rate)
    return 0;
  return sentTimes[sentTimes.length - rate] + RATE_WINDOW_MS - now;
}

/* §6: a text message is {"topic": T, "data": D}; returns it checked, or
 * null when it is not such an object. */
export function parseDataMessage (text)
{
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) ||
      !('data' in value))
    return null;
  if (value.topic !== undefined && value.topic !== null &&
      typeof value.topic !== 'string')
    return null;
  return { topic: value.topic ?? undefined, data: value.data };
}

/* The peer's SDP max-message-size (§6: 65,536 when absent; 0: no limit). */
export function maxMessageSize (sdp)
{
  const m = /^a=max-message-size:(\d+)\s*$/m.exec(sdp ?? '');
  if (!m)
    return DEFAULT_MAX_MESSAGE;
  const n = Number(m[1]);
  return n === 0 ? Infinity : n;
}

/* §5: the codecs a transceiver of `kind` offers or accepts. `publish` is
 * the video codec sent ('H264' or 'VP8'), or null for a receive-only side
 * (H.264 and VP8). RTX rides along on video; with `fec`, RED and ULPFEC
 * too (outside §5: the network lab's measure of FEC,
 * docs/congestion-control.md). */
export function codecPreferences (capabilities, kind, publish, fec = false)
{
  const codecs = capabilities?.codecs ?? [];
  const mime = (c) => c.mimeType.toLowerCase();
  if (kind === 'audio')
    return codecs.filter((c) => mime(c) === 'audio/opus');
  const h264 = codecs.filter((c) => mime(c) === 'video/h264' &&
      /(^|;)packetization-mode=1(;|$)/.test(c.sdpFmtpLine ?? '') &&
      /(^|;)profile-level-id=42e01f(;|$)/i.test(c.sdpFmtpLine ?? ''));
  const vp8 = codecs.filter((c) => mime(c) === 'video/vp8');
  const rtx = codecs.filter((c) => mime(c) === 'video/rtx');
  const red = fec ? codecs.filter((c) =>
    ['video/red', 'video/ulpfec'].includes(mime(c))) : [];
  const chosen = publish === 'VP8' ? vp8 :
    publish === 'H264' ? h264 : [...h264, ...vp8];
  return [...chosen, ...red, ...rtx];
}

/* Installs, once per Pusher class, a watch on its WebSockets that keeps the
 * limits servers advertise in pusher:connection_established (§4): pusher-js
 * reads only the socket id and activity timeout from that frame. */
const advertised = new Map();
/* The TURN servers legba-server hands a room member in the data of
 * pusher_internal:subscription_succeeded ("ice_servers", RTCIceServer
 * dictionaries), by socket id and channel: pusher-js passes on only the
 * presence part of that frame. The socket's listener runs before
 * pusher-js's own, so they are known when the subscription is reported. */
const iceServersHandedOut = new Map();
function watchLimits (Pusher)
{
  const runtime = Pusher.Runtime;
  if (!runtime || runtime.legbaWatchesLimits)
    return;
  const create = runtime.createWebSocket;
  runtime.createWebSocket = function (url) {
    const socket = create.call(this, url);
    let socketId = null;
    const watch = (event) => {
      try {
        const frame = JSON.parse(event.data);
        if (frame.event !== 'pusher:connection_established' &&
            frame.event !== 'pusher_internal:subscription_succeeded')
          return;
        const data = typeof frame.data === 'string' ?
          JSON.parse(frame.data) : frame.data;
        if (frame.event === 'pusher:connection_established') {
          socketId = data?.socket_id ?? null;
          if (socketId && data.limits)
            advertised.set(socketId, data.limits);
        } else if (socketId && Array.isArray(data?.ice_servers)) {
          iceServersHandedOut.set(`${socketId}\n${frame.channel}`,
              data.ice_servers);
        }
      } catch {
        /* pusher-js reports frames it cannot read */
      }
    };
    socket.addEventListener?.('message', watch);
    return socket;
  };
  runtime.legbaWatchesLimits = true;
}

/* The inbound and outbound RTP counters of a getStats report, by kind,
 * into entry.inbound and (when `outbound`) entry.outbound. */
function rtpCounters (report, entry, outbound)
{
  for (const r of report.values()) {
    if (r.type !== 'inbound-rtp' && (r.type !== 'outbound-rtp' || !outbound))
      continue;
    const codec = r.codecId ? report.get(r.codecId) : null;
    const side = r.type === 'inbound-rtp' ? entry.inbound : entry.outbound;
    side[r.kind] = {
      codec: codec ? codec.mimeType : null,
      fmtp: codec?.sdpFmtpLine ?? null,
      packets: r.packetsReceived ?? r.packetsSent ?? 0,
      bytes: r.bytesReceived ?? r.bytesSent ?? 0,
      frames: r.framesDecoded ?? r.framesEncoded ?? 0,
      width: r.frameWidth ?? null,
      height: r.frameHeight ?? null,
      samples: r.totalSamplesReceived ?? null,
      nacks: r.nackCount ?? 0,
      plis: r.pliCount ?? 0,
    };
  }
}

function positiveInt (value, fallback)
{
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

export class LegbaRoomPeer extends EventTarget
{
  /* options: Pusher (the pusher-js class), key, host, port, tls (wss),
   * room; authorization through either token + appId (legba-server join
   * tokens, asked for legba-room/2) or channelAuthorization (pusher-js's
   * own option, for an app's auth endpoint, whose user_info says
   * "protocol": "legba-room/2" for SFU rooms, §8); media (a MediaStream
   * with at most one video and one audio track), videoCodec ('H264' or 'VP8'),
   * videoFec (offer and accept RED and ULPFEC beside it), iceServers (when
   * empty: the TURN servers the signalling server hands out, if any),
   * iceTransportPolicy, suffix, log (a function). */
  constructor (options)
  {
    super();
    const { Pusher, key, room } = options;
    if (!Pusher || !key)
      throw new TypeError('Pusher and key are required');
    if (!ROOM_PATTERN.test(room ?? ''))
      throw new TypeError(`invalid room name ${JSON.stringify(room)}`);
    this.suffix = options.suffix ?? randomSuffix();
    if (!SUFFIX_PATTERN.test(this.suffix))
      throw new TypeError(`invalid suffix ${JSON.stringify(this.suffix)}`);
    if (!['H264', 'VP8'].includes(options.videoCodec ?? 'H264'))
      throw new TypeError('videoCodec is H264 or VP8');
    this.options = { videoCodec: 'H264', iceServers: [],
      iceTransportPolicy: 'all', ...options };
    this.room = room;
    this.channelName = `presence-legba.${room}`;
    this.id = null;
    this.serverIceServers = [];
    this.state = 'disconnected';
    this.participants = new Map();
    this.muted = { audio: false, video: false };
    this.limits = { ...DEFAULT_LIMITS };
    this._conns = new Map();
    this._queue = [];
    this._sentTimes = [];
    this._pumpTimer = null;
    this._early = new Map();
    this._parts = new Map();
    this._partIds = 0;
    this._sfu = null;
    this._topologyTaken = false;
    this._pendingTopology = null;
    this._log = options.log ?? (() => {});
  }

  _emit (type, detail)
  {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  _setState (state)
  {
    if (this.state === state)
      return;
    this.state = state;
    this._emit('state', { state });
  }

  _error (participant, message)
  {
    this._log(`error: ${participant ?? 'room'}: ${message}`);
    this._emit('error', { participant, message });
  }

  /* Connects and subscribes; resolves once joined (subscription
   * succeeded), rejects when the server refuses. */
  join ()
  {
    if (this._pusher)
      throw new Error('already joined');
    const { Pusher, key, host, port, tls, token, appId } = this.options;
    watchLimits(Pusher);
    const scheme = tls ? 'https' : 'http';
    const channelAuthorization = this.options.channelAuthorization ?? {
      endpoint: `${scheme}://${host}:${port}/apps/${appId}/auth`,
      transport: 'ajax',
      headers: { Authorization: `Bearer ${token}` },
      params: { suffix: this.suffix, protocol: PROTOCOL },
    };
    this._setState('connecting');
    const pusher = new Pusher(key, {
      cluster: 'legba', wsHost: host, wsPort: port, wssPort: port,
      forceTLS: !!tls, enabledTransports: [tls ? 'wss' : 'ws'],
      disableStats: true,
      channelAuthorization,
    });
    this._pusher = pusher;
    pusher.connection.bind('state_change', ({ current }) =>
      this._onConnectionState(current));
    pusher.connection.bind('connected', () => {
      const limits = advertised.get(pusher.connection.socket_id);
      advertised.delete(pusher.connection.socket_id);
      this.limits = {
        bytes: positiveInt(limits?.client_event_bytes, DEFAULT_LIMITS.bytes),
        rate: positiveInt(limits?.client_events_per_second,
            DEFAULT_LIMITS.rate),
      };
    });
    const channel = pusher.subscribe(this.channelName);
    this._channel = channel;
    const joined = new Promise((resolve, reject) => {
      this._joined = { resolve, reject };
    });
    channel.bind('pusher:subscription_succeeded',
        (members) => this._onSubscribed(members));
    channel.bind('pusher:subscription_error', (status) => {
      const message = `subscription refused: ${JSON.stringify(status)}`;
      this._error(null, message);
      this._setState('failed');
      this._joined?.reject(new Error(message));
      this._joined = null;
    });
    channel.bind('pusher:member_added',
        (member) => this._onMemberAdded(member.id, member.info));
    channel.bind('pusher:member_removed',
        (member) => this._onMemberRemoved(member.id));
    channel.bind(SIGNAL_EVENT, (data, metadata) =>
      this._onSignal(data, metadata));
    channel.bind_global((event, data) => this._onServerEvent(event, data));
    return joined;
  }

  _onConnectionState (current)
  {
    if (current === 'connected' || current === 'initialized')
      return;
    if (current === 'failed') {
      this._setState('failed');
      this._joined?.reject(new Error('the connection failed'));
      this._joined = null;
    } else if (current === 'disconnected') {
      this._setState('disconnected');
    } else if (this.state === 'connected') {
      /* §3: peer connections stay up while signalling reconnects */
      this._setState('reconnecting');
    }
  }

  /* §3: offer to every listed member without a live peer connection;
   * members gone while signalling was down count as removed. */
  _onSubscribed (members)
  {
    this.id = members.myID;
    this._topologyTaken = false;
    /* §8: an SFU room is known before any offer goes */
    const topology = this._pendingTopology;
    this._pendingTopology = null;
    if (topology !== null)
      this._onTopology(topology);
    const handedOut = `${this._pusher.connection.socket_id}\n` +
      this.channelName;
    if (iceServersHandedOut.has(handedOut)) {
      this.serverIceServers = iceServersHandedOut.get(handedOut);
      iceServersHandedOut.delete(handedOut);
    }
    const listed = new Set();
    members.each((member) => {
      if (member.id === this.id)
        return;
      listed.add(member.id);
      const p = this._participant(member.id, member.info);
      this._present(p);
      if (!this._sfu && !this._live(p))
        this._offer(p);
    });
    for (const p of [...this.participants.values()]) {
      if (!listed.has(p.id) && p.present)
        this._onMemberRemoved(p.id);
    }
    this._setState('connected');
    this._joined?.resolve(this.id);
    this._joined = null;
    this._pump();
  }

  _participant (id, info)
  {
    let p = this.participants.get(id);
    if (!p) {
      p = { id, info: info ?? null, conn: null, present: false,
        state: 'new', offerTimer: null, graceTimer: null,
        muted: { audio: false, video: false } };
      this.participants.set(id, p);
      this._emit('participant-joined', { participant: id, info: p.info });
    } else if (info) {
      p.info = info;
    }
    return p;
  }

  _present (p)
  {
    p.present = true;
    if (p.graceTimer) {
      clearTimeout(p.graceTimer);
      p.graceTimer = null;
      this._setParticipantState(p, this._connState(p));
    }
  }

  _connState (p)
  {
    if (p.conn?.pc.connectionState === 'connected' ||
        (!p.conn && this._sfu?.receives(p.id)))
      return 'connected';
    return p.conn ? 'connecting' : 'new';
  }

  _setParticipantState (p, state)
  {
    if (p.state === state)
      return;
    p.state = state;
    this._emit('participant-state', { participant: p.id, state });
  }

  _live (p)
  {
    return !!p.conn && !['failed', 'closed'].includes(p.conn.pc.connectionState);
  }

  /* §3: the newcomer offers; after 3 s without its offer, the greater id
   * offers instead. */
  _onMemberAdded (id, info)
  {
    if (id === this.id)
      return;
    const p = this._participant(id, info);
    const returning = !!p.graceTimer;
    this._present(p);
    if (returning || this._sfu || this._live(p))
      return;
    clearTimeout(p.offerTimer);
    p.offerTimer = setTimeout(() => {
      p.offerTimer = null;
      if (p.present && !this._live(p) && compareIds(this.id, p.id) > 0) {
        this._log(`no offer from ${p.id} within 3 s: offering`);
        this._offer(p);
      }
    }, OFFER_WAIT_MS);
  }

  /* §3: a still-connected peer connection is kept for the grace period. */
  _onMemberRemoved (id)
  {
    const p = this.participants.get(id);
    if (!p || !p.present)
      return;
    p.present = false;
    clearTimeout(p.offerTimer);
    p.offerTimer = null;
    if (p.conn?.pc.connectionState === 'connected' ||
        this._sfu?.receives(p.id)) {
      this._setParticipantState(p, 'away');
      p.graceTimer = setTimeout(() => this._drop(p), GRACE_MS);
    } else {
      this._drop(p);
    }
  }

  _drop (p)
  {
    clearTimeout(p.graceTimer);
    clearTimeout(p.offerTimer);
    this._sfu?.dropParticipant(p.id);
    if (p.conn)
      this._closeConn(p.conn);
    if (this.participants.get(p.id) !== p)
      return;
    this.participants.delete(p.id);
    this._emit('participant-left', { participant: p.id });
  }

  _connKey (participant, pc)
  {
    return `${participant}\n${pc}`;
  }

  _newConn (p, pcId, offerer)
  {
    /* iceServers given to the page win over those the server handed
     * out, as turn-server does in LegbaRoom */
    const pc = new RTCPeerConnection({
      iceServers: this.options.iceServers.length > 0 ?
        this.options.iceServers : this.serverIceServers,
      iceTransportPolicy: this.options.iceTransportPolicy,
      bundlePolicy: 'max-bundle',
      rtcpMuxPolicy: 'require',
    });
    const conn = { id: pcId, participant: p, pc, offerer, remoteSet: false,
      batch: [], batchTimer: null, channels: {}, lossyWaiting: [],
      tracks: [], replacement: false, closed: false };
    pc.onicecandidate = (e) => this._onLocalCandidate(conn, e.candidate);
    pc.ontrack = (e) => {
      conn.tracks.push(e.track);
      this._emit('track', { participant: p.id, track: e.track,
        kind: e.track.kind, streams: e.streams });
    };
    pc.onconnectionstatechange = () => this._onPcState(conn);
    pc.ondatachannel = (e) => this._adoptChannel(conn, e.channel);
    if (p.conn && p.conn !== conn)
      this._closeConn(p.conn);
    p.conn = conn;
    this._conns.set(this._connKey(p.id, pcId), conn);
    this._setParticipantState(p, 'connecting');
    return conn;
  }

  _closeConn (conn)
  {
    if (conn.closed)
      return;
    conn.closed = true;
    clearTimeout(conn.batchTimer);
    this._conns.delete(this._connKey(conn.participant.id, conn.id));
    /* signals still queued for it are void, except a goodbye */
    this._queue = this._queue.filter((s) => s.pc !== conn.id ||
        s.to !== conn.participant.id || s.type === 'bye');
    conn.pc.close();
    if (conn.participant.conn === conn)
      conn.participant.conn = null;
    for (const track of conn.tracks) {
      this._emit('track-removed', { participant: conn.participant.id,
        track, kind: track.kind });
    }
    conn.tracks = [];
  }

  _localTracks ()
  {
    const media = this.options.media;
    return { stream: media ?? null, video: media?.getVideoTracks()[0] ?? null,
      audio: media?.getAudioTracks()[0] ?? null };
  }

  /* §5: the codecs of a transceiver of `kind`, sending or receiving. */
  _codecs (kind, publishing)
  {
    return codecPreferences(RTCRtpReceiver.getCapabilities(kind), kind,
        publishing && kind === 'video' ? this.options.videoCodec : null,
        this.options.videoFec);
  }

  /* §5: exactly one video and one audio transceiver; §6: the two data
   * channels. */
  async _offer (p, { replacement = false } = {})
  {
    clearTimeout(p.offerTimer);
    p.offerTimer = null;
    const conn = this._newConn(p, randomString(10), true);
    conn.replacement = replacement;
    const { pc } = conn;
    try {
      const local = this._localTracks();
      for (const kind of ['video', 'audio']) {
        const track = local[kind];
        const t = track ?
          pc.addTransceiver(track, { direction: 'sendrecv',
            streams: [local.stream] }) :
          pc.addTransceiver(kind, { direction: 'recvonly' });
        t.setCodecPreferences(codecPreferences(
            RTCRtpReceiver.getCapabilities(kind), kind,
            track && kind === 'video' ? this.options.videoCodec : null,
            this.options.videoFec));
      }
      /* §6: the lossy channel comes later, from the side that first
       * sends on it */
      this._adoptChannel(conn, pc.createDataChannel('legba',
          { ordered: true }));
      const offer = await pc.createOffer();
      if (conn.closed)
        return;
      /* §4: the description goes before any of its candidates; the
       * answer may then come back before setLocalDescription is done,
       * and waits for it (_onAnswer) */
      this._signal(conn, { type: 'offer', sdp: offer.sdp });
      conn.localSet = pc.setLocalDescription(offer);
      await conn.localSet;
    } catch (e) {
      this._error(p.id, `offer: ${e.message ?? e}`);
    }
  }

  async _answer (p, s)
  {
    const existing = p.conn;
    if (existing?.id === s.pc) {
      this._log(`duplicate offer ${s.pc} from ${p.id} dropped`);
      return;
    }
    if (existing && existing.offerer &&
        existing.pc.signalingState === 'have-local-offer') {
      /* §3 glare: the greater id's offer wins */
      if (compareIds(this.id, p.id) > 0) {
        this._log(`glare with ${p.id}: keeping own offer ${existing.id}`);
        return;
      }
      this._log(`glare with ${p.id}: answering ${s.pc}`);
    }
    clearTimeout(p.offerTimer);
    p.offerTimer = null;
    const replacing = p.state === 'reconnecting';
    const conn = this._newConn(p, s.pc, false);
    conn.replacement = replacing;
    const { pc } = conn;
    try {
      await pc.setRemoteDescription({ type: 'offer', sdp: s.sdp });
      if (conn.closed)
        return;
      conn.remoteSet = true;
      await this._publishOn(conn);
      const answer = await pc.createAnswer();
      if (conn.closed)
        return;
      this._signal(conn, { type: 'answer', sdp: answer.sdp });
      await pc.setLocalDescription(answer);
      await this._applyEarly(conn);
    } catch (e) {
      this._error(p.id, `answer: ${e.message ?? e}`);
    }
  }

  /* §5: the answerer sends what it publishes on the one transceiver of
   * each kind; a second one of a kind (against the protocol) stays idle. */
  async _publishOn (conn)
  {
    const local = this._localTracks();
    const used = new Set();
    for (const t of conn.pc.getTransceivers()) {
      const kind = t.receiver.track.kind;
      if (used.has(kind)) {
        this._error(conn.participant.id, `offer has a second ${kind} section`);
        t.direction = 'inactive';
        continue;
      }
      used.add(kind);
      const track = local[kind];
      t.setCodecPreferences(codecPreferences(
          RTCRtpReceiver.getCapabilities(kind), kind,
          track && kind === 'video' ? this.options.videoCodec : null,
          this.options.videoFec));
      if (track) {
        await t.sender.replaceTrack(track);
        t.sender.setStreams(local.stream);
        t.direction = 'sendrecv';
      } else {
        t.direction = 'recvonly';
      }
    }
  }

  _onPcState (conn)
  {
    const p = conn.participant;
    const state = conn.pc.connectionState;
    if (conn.closed || p.conn !== conn)
      return;
    if (state === 'connected') {
      if (!p.graceTimer)
        this._setParticipantState(p, 'connected');
      return;
    }
    if (state !== 'failed')
      return;
    /* a broken connection is not kept for the grace period */
    if (p.graceTimer) {
      this._drop(p);
      return;
    }
    this._closeConn(conn);
    if (conn.replacement) {
      this._setParticipantState(p, 'failed');
      this._error(p.id, 'the replacement peer connection failed too');
      return;
    }
    /* §3: a fresh connection, offered by the greater id */
    this._setParticipantState(p, 'reconnecting');
    if (compareIds(this.id, p.id) > 0)
      this._offer(p, { replacement: true });
  }

  /* §4: candidates gathered for up to 50 ms go in one message; the end of
   * gathering flushes with "end": true. */
  _onLocalCandidate (conn, candidate)
  {
    if (conn.closed)
      return;
    if (!candidate) {
      this._flushCandidates(conn, true);
      return;
    }
    if (!candidate.candidate)
      return;
    conn.batch.push({ candidate: candidate.candidate, sdpMid: candidate.sdpMid,
      sdpMLineIndex: candidate.sdpMLineIndex });
    if (!conn.batchTimer) {
      conn.batchTimer = setTimeout(() => this._flushCandidates(conn, false),
          BATCH_MS);
    }
  }

  _flushCandidates (conn, end)
  {
    clearTimeout(conn.batchTimer);
    conn.batchTimer = null;
    if (!conn.batch.length && !end)
      return;
    const message = { type: 'candidates', candidates: conn.batch };
    if (end)
      message.end = true;
    conn.batch = [];
    this._signal(conn, message);
  }

  _signal (conn, fields)
  {
    this._enqueue({ to: conn.participant.id, from: this.id, pc: conn.id,
      ...fields });
  }

  /* §4: oversized signals go as parts; everything leaves through one
   * paced queue. */
  _enqueue (signal)
  {
    if (jsonBytes(signal) <= this.limits.bytes) {
      this._queue.push(signal);
    } else {
      const id = `${this.suffix}.${++this._partIds}`;
      this._queue.push(...splitSignal(signal, id, this.limits.bytes));
      this._emit('signal', { direction: 'out', message: signal,
        bytes: jsonBytes(signal), at: performance.now(), whole: true });
    }
    this._pump();
  }

  _pump ()
  {
    if (this._pumpTimer)
      return;
    while (this._queue.length) {
      if (!this._channel?.subscribed ||
          this._pusher.connection.state !== 'connected')
        return;
      const wait = paceDelay(this._sentTimes, this.limits.rate,
          performance.now());
      if (wait > 0) {
        this._pumpTimer = setTimeout(() => {
          this._pumpTimer = null;
          this._pump();
        }, Math.ceil(wait));
        return;
      }
      const message = this._queue.shift();
      if (!this._channel.trigger(SIGNAL_EVENT, message)) {
        this._queue.unshift(message);
        return;
      }
      const at = performance.now();
      this._sentTimes.push(at);
      this._emit('signal', { direction: 'out', message,
        bytes: jsonBytes(message), at });
    }
    this._drained?.();
  }

  _onSignal (raw, metadata)
  {
    let s = raw;
    if (typeof raw === 'string') {
      try {
        s = JSON.parse(raw);
      } catch {
        this._log(`unparsable signal from ${metadata?.user_id} dropped`);
        return;
      }
    }
    if (s === null || typeof s !== 'object' || Array.isArray(s)) {
      this._log(`signal that is not an object dropped`);
      return;
    }
    if (s.to !== this.id)
      return;
    this._emit('signal', { direction: 'in', message: s,
      bytes: jsonBytes(s), at: performance.now(),
      user_id: metadata?.user_id });
    if (!metadata?.user_id || s.from !== metadata.user_id) {
      this._log(`signal claiming to be from ${s.from} sent by ` +
          `${metadata?.user_id} dropped`);
      return;
    }
    this._handle(s);
  }

  _handle (s)
  {
    if (typeof s.pc !== 'string' || !s.pc || !TYPES.has(s.type)) {
      this._log(`malformed signal from ${s.from} dropped`);
      return;
    }
    const conn = this._conns.get(this._connKey(s.from, s.pc));
    switch (s.type) {
      case 'part':
        this._onPart(s);
        break;
      case 'offer':
        if (this._sfu)
          return this._log(`offer from ${s.from} dropped: an SFU room`);
        if (typeof s.sdp !== 'string')
          return this._log(`offer without sdp from ${s.from} dropped`);
        /* only subscribers' events are relayed: the sender is here */
        this._present(this._participant(s.from));
        this._answer(this.participants.get(s.from), s);
        break;
      case 'answer':
        if (!conn || !conn.offerer || typeof s.sdp !== 'string')
          return this._log(`answer for unknown pc ${s.pc} dropped`);
        this._onAnswer(conn, s.pc, s.sdp);
        break;
      case 'candidates':
        if (!Array.isArray(s.candidates))
          return this._log(`candidates without an array dropped`);
        if (conn?.remoteSet)
          this._addCandidates(conn, s);
        else
          this._keepEarly(s);
        break;
      case 'bye':
        if (!conn)
          return this._log(`bye for unknown pc ${s.pc} dropped`);
        if (conn.kept && this._sfu?.move?.bye(s.from, s.pc))
          break;
        if (!conn.participant.present) {
          /* gone from the room already: nothing left to wait for */
          this._drop(conn.participant);
          break;
        }
        this._closeConn(conn);
        this._setParticipantState(conn.participant, 'closed');
        break;
      case 'sfu-ready':
        /* §8: s.from receives this participant through the SFU */
        this._sfu?.move?.ready(s.from);
        break;
    }
  }

  async _onAnswer (conn, pcId, sdp)
  {
    try {
      await conn.localSet;
    } catch {
      return; /* _offer reported it */
    }
    try {
      if (conn.closed || conn.pc.signalingState !== 'have-local-offer')
        return this._log(`answer for pc ${pcId} in state ` +
            `${conn.pc.signalingState} dropped`);
      await conn.pc.setRemoteDescription({ type: 'answer', sdp });
      conn.remoteSet = true;
      await this._applyEarly(conn);
    } catch (e) {
      this._error(conn.participant.id, `answer: ${e.message ?? e}`);
    }
  }

  async _addCandidates (conn, s)
  {
    for (const c of s.candidates) {
      if (!c || typeof c.candidate !== 'string' ||
          (typeof c.sdpMid !== 'string' &&
              !Number.isInteger(c.sdpMLineIndex))) {
        this._log(`malformed candidate from ${s.from} skipped`);
        continue;
      }
      try {
        await conn.pc.addIceCandidate({ candidate: c.candidate,
          sdpMid: c.sdpMid ?? null, sdpMLineIndex: c.sdpMLineIndex ?? null });
      } catch (e) {
        this._log(`candidate from ${s.from} refused: ${e.message ?? e}`);
      }
    }
    if (s.end === true && !conn.closed) {
      try {
        await conn.pc.addIceCandidate();
      } catch {
        /* end-of-candidates after close or for a finished session */
      }
    }
  }

  /* §4: candidates ahead of their description wait up to 10 s. */
  _keepEarly (s)
  {
    const key = this._connKey(s.from, s.pc);
    let entry = this._early.get(key);
    if (!entry) {
      entry = { signals: [],
        timer: setTimeout(() => this._early.delete(key), EARLY_MS) };
      this._early.set(key, entry);
    }
    entry.signals.push(s);
  }

  async _applyEarly (conn)
  {
    const key = this._connKey(conn.participant.id, conn.id);
    const entry = this._early.get(key);
    if (!entry)
      return;
    clearTimeout(entry.timer);
    this._early.delete(key);
    for (const s of entry.signals)
      await this._addCandidates(conn, s);
  }

  /* §4: parts reassemble by (from, id); an incomplete set is dropped
   * after 10 s. */
  _onPart (s)
  {
    const { id, part, parts, chunk } = s;
    if (typeof id !== 'string' || !Number.isInteger(part) ||
        !Number.isInteger(parts) || parts < 1 || parts > MAX_PARTS ||
        part < 0 || part >= parts || typeof chunk !== 'string') {
      this._log(`malformed part from ${s.from} dropped`);
      return;
    }
    const key = `${s.from}\n${id}`;
    let set = this._parts.get(key);
    if (!set) {
      set = { parts, chunks: new Array(parts), count: 0, pc: s.pc,
        timer: setTimeout(() => {
          this._parts.delete(key);
          this._log(`incomplete parts ${id} from ${s.from} dropped`);
        }, PARTS_MS) };
      this._parts.set(key, set);
    }
    if (set.parts !== parts || set.pc !== s.pc || set.chunks[part] !== undefined) {
      this._log(`inconsistent part ${part} of ${id} from ${s.from} dropped`);
      return;
    }
    set.chunks[part] = chunk;
    if (++set.count < parts)
      return;
    clearTimeout(set.timer);
    this._parts.delete(key);
    let inner;
    try {
      inner = JSON.parse(set.chunks.join(''));
    } catch {
      this._log(`parts ${id} from ${s.from} do not parse`);
      return;
    }
    if (inner === null || typeof inner !== 'object' || inner.type === 'part' ||
        inner.to !== s.to || inner.from !== s.from || inner.pc !== s.pc) {
      this._log(`parts ${id} from ${s.from} carry a mismatched signal`);
      return;
    }
    this._emit('signal', { direction: 'in', message: inner, bytes:
      jsonBytes(inner), at: performance.now(), user_id: s.from,
      whole: true });
    this._handle(inner);
  }

  /* §7: HTTP API events reach everyone as data from 'server'; §8: the
   * room's topology is the room's own. */
  _onServerEvent (event, data)
  {
    if (event.startsWith('pusher') || event.startsWith('client-'))
      return;
    if (event === TOPOLOGY_EVENT) {
      this._onTopology(data);
      return;
    }
    this._emit('data', { participant: 'server', topic: event, data,
      lossy: false });
  }

  /* §8: the first topology of each join counts; in an SFU room the peer
   * connections go (with a bye) and the room's Janus takes over, but for
   * those connected when a mesh room moves to its SFU: they stay up until
   * the SFU carries each way (room-sfu.js, MeshMove). A later one naming
   * another Janus or room means the room moved (its Janus died): the old
   * SFU session goes and the new room is joined. */
  _onTopology (data)
  {
    if (!this.id) {
      /* it comes just before the first subscription_succeeded */
      this._pendingTopology = data;
      return;
    }
    let topology;
    try {
      topology = parseTopology(data);
    } catch (e) {
      this._error(null, e.message);
      return;
    }
    const moved = this._sfu !== null && topology.topology === 'sfu' &&
      (topology.sfu.url !== this._sfu.sfu.url ||
        topology.sfu.room !== this._sfu.sfu.room);
    if ((this._topologyTaken || this._sfu !== null) && !moved) {
      /* the same room (a reconnection's subscription): its token is the
       * one of later requests, and of a session opened again */
      if (this._sfu !== null && topology.topology === 'sfu')
        this._sfu.setToken(topology.sfu.token);
      return;
    }
    this._topologyTaken = true;
    if (topology.topology !== 'sfu')
      return;
    const kept = new Map();
    for (const p of this.participants.values()) {
      clearTimeout(p.offerTimer);
      p.offerTimer = null;
      if (!p.conn)
        continue;
      if (!this._sfu && p.conn.pc.connectionState === 'connected') {
        /* out of the mesh's hands: no reconnection, no data sent on it */
        kept.set(p.id, p.conn);
        p.conn = null;
        continue;
      }
      this._signal(p.conn, { type: 'bye' });
      this._closeConn(p.conn);
    }
    this._sfu?.close();
    const sfu = new LegbaSfu(this, topology.sfu, kept);
    this._sfu = sfu;
    this._log(`SFU room: Janus ${topology.sfu.url} room ${topology.sfu.room}`);
    sfu.start().catch((e) => {
      if (!sfu.closed && sfu.lostAt === null)
        this._error(null, `SFU: ${e.message ?? e}`);
    });
  }

  _adoptChannel (conn, channel)
  {
    const lossy = channel.label === 'legba-lossy';
    if (channel.label !== 'legba' && !lossy) {
      this._log(`unknown data channel ${channel.label} ignored`);
      return;
    }
    channel.binaryType = 'arraybuffer';
    /* both sides may make a lossy channel at once: each sends on the
     * first it has and receives on both */
    if (!conn.channels[channel.label])
      conn.channels[channel.label] = channel;
    const p = conn.participant;
    /* what waited goes on the lossy channel this side sends on, once it
     * is open (a second one, open already, is only received on) */
    const sendsOn = () => channel === conn.channels['legba-lossy'];
    channel.onopen = () => {
      if (!lossy)
        this._sendRaw(conn, channel, JSON.stringify({ topic: 'legba.mute',
          data: { ...this.muted } }));
      else if (sendsOn())
        this._flushLossy(conn);
    };
    if (lossy && sendsOn() && channel.readyState === 'open')
      this._flushLossy(conn);
    channel.onmessage = (e) => this._onData(p, e.data, lossy);
  }

  /* probed: on a subscriber connection of the SFU's, what a
   * `legba.sfu-probe` means (§8) */
  _onData (p, payload, lossy, probed = null)
  {
    if (typeof payload !== 'string') {
      this._emit('data', { participant: p.id, topic: undefined,
        data: new Uint8Array(payload), lossy });
      return;
    }
    const message = parseDataMessage(payload);
    if (!message) {
      this._error(p.id, 'data message that is not {"topic", "data"}');
      return;
    }
    if (message.topic === 'legba.mute') {
      const d = message.data ?? {};
      p.muted = { audio: d.audio === true, video: d.video === true };
      this._emit('mute', { participant: p.id, ...p.muted });
      return;
    }
    if (message.topic === 'legba.sfu-probe') {
      probed?.();
      return;
    }
    /* §6: the room's own; never the application's */
    if (message.topic?.startsWith('legba.')) {
      this._log(`message on unknown reserved topic ${message.topic} ` +
          `from ${p.id} dropped`);
      return;
    }
    this._emit('data', { participant: p.id, topic: message.topic,
      data: message.data, lossy });
  }

  _checkSize (conn, payload)
  {
    const size = typeof payload === 'string' ?
      encoder.encode(payload).length : payload.byteLength;
    const limit = maxMessageSize(conn.pc.remoteDescription?.sdp);
    if (size > limit) {
      throw new RangeError(`message of ${size} bytes is over ` +
          `${conn.participant.id}'s max-message-size ${limit}`);
    }
  }

  _sendRaw (conn, channel, payload)
  {
    this._checkSize(conn, payload);
    channel.send(payload);
  }

  /* §6: a connected participant's lossy channel, made by this side if
   * neither side made one yet; messages wait for it to open (the last
   * LOSSY_WAITING of them: latest value wins) */
  _sendLossy (conn, payload)
  {
    this._checkSize(conn, payload);
    let channel = conn.channels['legba-lossy'];
    if (!channel) {
      channel = conn.pc.createDataChannel('legba-lossy',
          { ordered: false, maxRetransmits: 0 });
      this._adoptChannel(conn, channel);
    }
    if (channel.readyState === 'open') {
      channel.send(payload);
      return;
    }
    conn.lossyWaiting.push(payload);
    if (conn.lossyWaiting.length > LOSSY_WAITING)
      conn.lossyWaiting.shift();
  }

  _flushLossy (conn)
  {
    const channel = conn.channels['legba-lossy'];
    for (const payload of conn.lossyWaiting.splice(0))
      channel.send(payload);
  }

  _openChannels (label, to)
  {
    const out = [];
    for (const p of this.participants.values()) {
      if (to && p.id !== to)
        continue;
      const channel = p.conn?.channels[label];
      if (channel?.readyState === 'open')
        out.push([p.conn, channel]);
    }
    return out;
  }

  /* §6: sends `data` (any JSON value, or bytes) to everyone, or to the
   * participant `to` (not in an SFU room, §8); returns how many
   * participants it went to. */
  send (data, { topic, lossy = false, to } = {})
  {
    if (this._sfu && to !== undefined)
      throw new RangeError('an SFU room relays data to everyone: ' +
          'messages to named participants are refused');
    if (topic?.startsWith('legba.'))
      throw new RangeError('topics starting with "legba." are reserved');
    if (data === undefined)
      throw new TypeError('data is required');
    const binary = data instanceof ArrayBuffer || ArrayBuffer.isView(data);
    const payload = binary ? data : JSON.stringify(
        topic === undefined ? { data } : { topic, data });
    if (this._sfu)
      return this._sfu.send(payload, lossy);
    const targets = this._openChannels('legba', to);
    for (const [conn, channel] of targets) {
      if (lossy)
        this._sendLossy(conn, payload);
      else
        this._sendRaw(conn, channel, payload);
    }
    return targets.length;
  }

  /* §6: mutes or unmutes the local tracks and tells everyone. */
  setMuted ({ audio = this.muted.audio, video = this.muted.video })
  {
    this.muted = { audio: !!audio, video: !!video };
    const local = this._localTracks();
    if (local.audio)
      local.audio.enabled = !this.muted.audio;
    if (local.video)
      local.video.enabled = !this.muted.video;
    const payload = JSON.stringify({ topic: 'legba.mute',
      data: { ...this.muted } });
    this._sfu?.send(payload, false);
    for (const [conn, channel] of this._openChannels('legba'))
      this._sendRaw(conn, channel, payload);
  }

  /* Per participant: connection state, the selected codecs and counters of
   * getStats (inbound and outbound RTP). In an SFU room, inbound is that
   * participant's subscriber connection and outbound the publisher
   * connection, whose stream Janus forwards to everyone. */
  async stats ()
  {
    const out = {};
    const sfu = this._sfu?.connections();
    const published = sfu?.publisher ? await sfu.publisher.getStats() : null;
    for (const p of this.participants.values()) {
      const pc = sfu ? sfu.feeds.find((f) => f.participant === p.id)?.pc :
        p.conn?.pc;
      const entry = { state: p.state, pc: p.conn?.id ?? null,
        connectionState: pc?.connectionState ?? null,
        inbound: {}, outbound: {} };
      out[p.id] = entry;
      if (pc)
        rtpCounters(await pc.getStats(), entry, !sfu);
      if (published)
        rtpCounters(published, entry, true);
    }
    return out;
  }

  /* Says bye on every peer connection (best effort, paced), then leaves
   * the room and closes everything. */
  async leave ()
  {
    if (!this._pusher)
      return;
    for (const p of this.participants.values()) {
      if (p.conn)
        this._signal(p.conn, { type: 'bye' });
    }
    if (this._queue.length && this.state === 'connected') {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, LEAVE_DRAIN_MS);
        this._drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this._drained = null;
    /* pusher-js hands frames to the socket on a zero timeout: let the
     * byes go before the socket closes */
    await new Promise((resolve) => setTimeout(resolve, 0));
    clearTimeout(this._pumpTimer);
    this._pumpTimer = null;
    this._queue = [];
    this._sfu?.close();
    this._sfu = null;
    for (const p of [...this.participants.values()])
      this._drop(p);
    for (const entry of this._early.values())
      clearTimeout(entry.timer);
    for (const set of this._parts.values())
      clearTimeout(set.timer);
    this._early.clear();
    this._parts.clear();
    this._pusher.disconnect();
    this._pusher = null;
    this._channel = null;
    this._setState('disconnected');
  }
}

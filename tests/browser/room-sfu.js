// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The SFU side of LegbaRoomPeer (docs/room-protocol.md §8): once the room's
// `legba:topology` says `sfu`, the participant speaks to the Janus 1.1
// VideoRoom it names instead of to its peers. One Janus session over the
// WebSocket API; one publisher handle and connection carrying the local
// tracks and the `legba` data channel; one subscriber handle and
// connection per other publisher, whose `display` is its participant id.
// It reports through the LegbaRoomPeer that made it: the same `track`,
// `track-removed`, `data` and `mute` events as the mesh. A session that
// closes once joined (its Janus died, or only this page's connection to
// it) closes its connections and opens a new one to the same Janus,
// which joins the same VideoRoom as the same participant, after
// RETRY_FIRST_MS, doubling up to RETRY_MAX_MS while it fails; the room's
// next legba:topology naming another place wins (LegbaRoomPeer then
// makes a new LegbaSfu). An error is reported only when neither brought
// the room back within MOVE_WAIT_S.
// A mesh room that moves to its SFU (§8, `auto` rooms) moves make before
// break, as LegbaRoom does (lib/legba/room/legba-room-switch.c): MeshMove.

export const KEEPALIVE_MS = 25000;
const REQUEST_MS = 15000;
/* as LegbaRoom: the server notices a dead Janus within seconds */
const MOVE_WAIT_S = 15;
/* as LegbaRoom: a session lost is opened again after 250 ms, then after
 * twice as long each time, at most 4 s */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 4000;
const VIDEOROOM = 'janus.plugin.videoroom';
/* as LegbaRoom: the longest a move from mesh to SFU waits for the others */
export const SWITCH_MS = 5000;
/* how often a kept mesh connection's queue is looked at again */
const DRAIN_POLL_MS = 50;
/* §8: how often the publisher's channel sends a probe while the move
 * holds the messages */
const PROBE_MS = 100;
export const SFU_PROBE_TOPIC = 'legba.sfu-probe';

function randomId ()
{
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/* The kinds of the m-sections an offer has (Janus offers a subscriber
 * the publisher's streams). */
function offeredKinds (sdp)
{
  return ['video', 'audio'].filter((kind) =>
    new RegExp(`^m=${kind} `, 'm').test(sdp ?? ''));
}

/* §8 "Reading the topology": `data` (a JSON string or its value) checked;
 * returns {topology: 'mesh'} or {topology: 'sfu', sfu: {url, room, pin,
 * token}}, or throws a TypeError naming what is wrong. */
export function parseTopology (data)
{
  let value = data;
  if (typeof data === 'string') {
    try {
      value = JSON.parse(data);
    } catch {
      throw new TypeError('legba:topology is not JSON');
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new TypeError('legba:topology is not an object');
  if (value.topology === 'mesh')
    return { topology: 'mesh' };
  if (value.topology !== 'sfu')
    throw new TypeError(`unknown topology ${JSON.stringify(value.topology)}`);
  const sfu = value.sfu;
  if (sfu === null || typeof sfu !== 'object' || sfu.kind !== 'janus')
    throw new TypeError('legba:topology names no Janus');
  if (typeof sfu.url !== 'string' || !/^wss?:\/\/[^\s]+$/.test(sfu.url))
    throw new TypeError(`bad Janus url ${JSON.stringify(sfu.url)}`);
  if (!Number.isSafeInteger(sfu.room) || sfu.room <= 0)
    throw new TypeError(`bad VideoRoom id ${JSON.stringify(sfu.room)}`);
  for (const field of ['pin', 'token']) {
    if (sfu[field] !== undefined && typeof sfu[field] !== 'string')
      throw new TypeError(`bad ${field}`);
  }
  return { topology: 'sfu', sfu: { url: sfu.url, room: sfu.room,
    pin: sfu.pin, token: sfu.token } };
}

/* A Janus session over the WebSocket API: requests by transaction,
 * `keepalive` every 25 s, `token` in every request; events without a
 * pending transaction go to the handler of their handle (`sender`). */
class JanusSession
{
  constructor (url, token, log)
  {
    this.url = url;
    this.token = token;
    this.log = log;
    this.id = null;
    this.handlers = new Map();
    this.pending = new Map();
    this.next = 0;
    this.keepalive = null;
    this.keepalives = new Set();
    this.socket = null;
    this.onclose = () => {};
  }

  async open ()
  {
    const socket = new WebSocket(this.url, 'janus-protocol');
    this.socket = socket;
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = () => reject(new Error(`cannot reach ${this.url}`));
    });
    socket.onerror = null;
    socket.onmessage = (e) => this.onMessage(e.data);
    socket.onclose = () => {
      clearInterval(this.keepalive);
      for (const { reject, timer } of this.pending.values()) {
        clearTimeout(timer);
        reject(new Error('the Janus session closed'));
      }
      this.pending.clear();
      this.onclose();
    };
    const created = await this.request({ janus: 'create' });
    this.id = created.data.id;
    this.keepalive = setInterval(() =>
      this.keepalives.add(this.send({ janus: 'keepalive' })), KEEPALIVE_MS);
  }

  /* Janus no longer has the session (it timed it out, or answered a
   * keepalive with an error: destroyed): as if the WebSocket closed. */
  _gone (why)
  {
    this.log(`${why}: the session is gone`);
    this.socket?.close();
  }

  send (fields)
  {
    const transaction = `t${++this.next}`;
    const message = { ...fields, transaction };
    if (this.id !== null)
      message.session_id = this.id;
    if (this.token !== undefined)
      message.token = this.token;
    if (this.socket?.readyState === WebSocket.OPEN)
      this.socket.send(JSON.stringify(message));
    return transaction;
  }

  /* Resolves with the answer to the request: `success`, or the `event`
   * that follows an `ack`; rejects on `error` or a plugin error. */
  request (fields)
  {
    const transaction = this.send(fields);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(transaction);
        reject(new Error(`Janus did not answer ${fields.janus} in time`));
      }, REQUEST_MS);
      this.pending.set(transaction, { resolve, reject, timer });
    });
  }

  onMessage (text)
  {
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      this.log('unparsable message from Janus dropped');
      return;
    }
    if (this.keepalives.delete(m.transaction)) {
      if (m.janus === 'error')
        this._gone(`Janus answered a keepalive: ${m.error?.reason}`);
      return;
    }
    if (m.janus === 'timeout') {
      this._gone('Janus timed the session out');
      return;
    }
    const waiting = this.pending.get(m.transaction);
    if (waiting && m.janus !== 'ack') {
      this.pending.delete(m.transaction);
      clearTimeout(waiting.timer);
      const data = m.plugindata?.data;
      if (m.janus === 'error')
        waiting.reject(new Error(`Janus: ${m.error?.reason}`));
      else if (data?.error)
        waiting.reject(new Error(`VideoRoom ${data.error_code}: ${data.error}`));
      else
        waiting.resolve(m);
      return;
    }
    if (m.janus !== 'ack' && m.janus !== 'success')
      this.handlers.get(m.sender)?.(m);
  }

  async attach (handler)
  {
    const attached = await this.request({ janus: 'attach', plugin: VIDEOROOM });
    this.handlers.set(attached.data.id, handler);
    return attached.data.id;
  }

  message (handle, body, jsep)
  {
    const fields = { janus: 'message', handle_id: handle, body };
    if (jsep)
      fields.jsep = jsep;
    return this.request(fields);
  }

  trickle (handle, candidate)
  {
    this.send({ janus: 'trickle', handle_id: handle,
      candidate: candidate ? { candidate: candidate.candidate,
        sdpMid: candidate.sdpMid, sdpMLineIndex: candidate.sdpMLineIndex } :
        { completed: true } });
  }

  detach (handle)
  {
    this.handlers.delete(handle);
    this.send({ janus: 'detach', handle_id: handle });
  }

  close ()
  {
    clearInterval(this.keepalive);
    if (this.id !== null)
      this.send({ janus: 'destroy' });
    this.onclose = () => {};
    this.socket?.close();
  }
}

/* A mesh room moving to its SFU (§8, "A mesh room that moves to its SFU"),
 * make before break, as LegbaRoom's legba-room-switch.c:
 *
 * - the connected mesh connections (`kept`, participant id -> the
 *   LegbaRoomPeer's connection, out of its hands) stay up while the SFU
 *   connections are made; each track of a participant comes from the mesh
 *   until the same kind comes from the SFU (its first RTP: the track
 *   unmutes), the mesh track reported removed right before the SFU's is
 *   reported;
 * - while the local messages are held (below), the publisher's channel
 *   sends a `legba.sfu-probe` every PROBE_MS;
 * - a participant's subscriber connection with its own data channel open,
 *   each track Janus offered on it arrived and a probe of that
 *   participant's received on it is told to that participant with the
 *   signal `sfu-ready`; the mesh connection with it closes once
 *   `sfu-ready` went both ways and what was sent to it on the mesh is out;
 * - the local reliable messages to everyone, which go to the SFU from the
 *   event on, wait (LegbaSfu.held) until each participant met in the mesh
 *   has said `sfu-ready`: Janus relays a message to the subscribers it
 *   considers ready then, and no other (Janus 1.1: once the subscriber's
 *   SCTP association first reported itself dry, which may be after the
 *   subscriber's channel opened; a probe that arrived says it is).
 *
 * SWITCH_MS bounds it all: then the messages go and the mesh connections
 * close, whoever has not answered. */
class MeshMove
{
  constructor (sfu, kept)
  {
    this.sfu = sfu;
    this.peer = sfu.peer;
    this.kept = kept;
    /* those whose sfu-ready is due to this side */
    this.waiting = new Set(kept.keys());
    /* those this side tells sfu-ready, once it receives them */
    this.partners = new Set(kept.keys());
    /* those received through the SFU */
    this.receiving = new Set();
    /* participant id -> SFU tracks shown once the mesh's go */
    this.pending = new Map();
    this.started = performance.now();
    this.done = false;
    this.drainTimer = null;
    this.probeTimer = null;
    this.deadline = setTimeout(() => this._expire(), SWITCH_MS);
    for (const conn of kept.values()) {
      conn.kept = true;
      conn.pc.addEventListener('connectionstatechange', () => {
        if (['failed', 'closed'].includes(conn.pc.connectionState))
          this._closeMesh(conn.participant.id);
      });
    }
    this._log(`moving to the SFU, keeping ${kept.size} mesh connections ` +
        'until then');
  }

  _log (line)
  {
    const ms = (performance.now() - this.started).toFixed(0);
    this.peer._log(`sfu: ${line} (${ms} ms into the move)`);
  }

  _closeMesh (id)
  {
    const conn = this.kept.get(id);
    if (!conn)
      return;
    this.kept.delete(id);
    this._log(`closing the mesh connection to ${id} (pc ${conn.id})`);
    this.peer._closeConn(conn);
    for (const show of this.pending.get(id) ?? [])
      show();
    this.pending.delete(id);
  }

  /* Closes each mesh connection whose participant comes through the SFU
   * both ways and whose queue is out; polls for the others. */
  _closeDrained ()
  {
    let queued = false;
    for (const [id, conn] of [...this.kept]) {
      if (!this.receiving.has(id) || this.waiting.has(id))
        continue;
      if (Object.values(conn.channels).some((c) => c.bufferedAmount > 0))
        queued = true;
      else
        this._closeMesh(id);
    }
    if (queued && !this.drainTimer) {
      this.drainTimer = setTimeout(() => {
        this.drainTimer = null;
        this._closeDrained();
        this._finish();
      }, DRAIN_POLL_MS);
    }
  }

  /* The publisher's channel is open: a probe every PROBE_MS while the
   * messages are held. */
  probe (channel)
  {
    const send = () => {
      if (!this.sfu.holding || this.done) {
        clearInterval(this.probeTimer);
        this.probeTimer = null;
        return;
      }
      if (channel.readyState === 'open' && channel.bufferedAmount < 65536)
        channel.send(JSON.stringify({ topic: SFU_PROBE_TOPIC, data: {} }));
    };
    if (this.probeTimer !== null || !this.sfu.holding || this.done)
      return;
    this.probeTimer = setInterval(send, PROBE_MS);
    send();
  }

  /* A probe of feed's participant came through its subscription. */
  probed (feed)
  {
    if (feed.probed || this.sfu.feeds.get(feed.id) !== feed)
      return;
    feed.probed = true;
    this._log(`${feed.display}'s messages come through the SFU`);
    this.check(feed);
  }

  _release ()
  {
    clearInterval(this.probeTimer);
    this.probeTimer = null;
    if (!this.sfu.holding)
      return;
    this._log('messages go through the SFU');
    this.sfu.holding = false;
    this.sfu._flushHeld();
  }

  _finish ()
  {
    if (this.sfu.holding || this.kept.size > 0 || this.partners.size > 0)
      return;
    this._log('moved to the SFU');
    this._stop();
    if (this.sfu.move === this)
      this.sfu.move = null;
  }

  _stop ()
  {
    this.done = true;
    clearTimeout(this.deadline);
    clearTimeout(this.drainTimer);
    this.drainTimer = null;
    clearInterval(this.probeTimer);
    this.probeTimer = null;
  }

  _expire ()
  {
    this._log(`not done after ${SWITCH_MS} ms (${this.waiting.size} ` +
        `participants to answer, ${this.kept.size} mesh connections); ` +
        'finishing it');
    this.waiting.clear();
    this.partners.clear();
    this._release();
    for (const id of [...this.kept.keys()])
      this._closeMesh(id);
    this._finish();
  }

  /* §8: participant `from` receives this one through the SFU */
  ready (from)
  {
    if (!this.waiting.delete(from))
      return;
    this._log(`${from} receives this participant through the SFU`);
    if (this.waiting.size === 0)
      this._release();
    this._closeDrained();
    this._finish();
  }

  /* A bye for a kept connection: a client that moves break before make,
   * which will not say sfu-ready. Returns whether it was one. */
  bye (from, pc)
  {
    const conn = this.kept.get(from);
    if (!conn || conn.id !== pc)
      return false;
    this._closeMesh(from);
    this._finish();
    return true;
  }

  participantLeft (id)
  {
    this._closeMesh(id);
    this.receiving.delete(id);
    this.partners.delete(id);
    if (this.waiting.delete(id) && this.waiting.size === 0)
      this._release();
    this._finish();
  }

  /* A track of `feed` came: shown at once, unless the mesh still brings
   * that participant's track of that kind; then shown when its first RTP
   * comes, the mesh's reported removed just before. */
  track (feed, track, show)
  {
    let shown = false;
    const once = () => {
      if (!shown) {
        shown = true;
        show();
      }
    };
    const mesh = this.kept.get(feed.display);
    if (mesh?.tracks.some((t) => t.kind === track.kind)) {
      const waiting = this.pending.get(feed.display) ?? [];
      waiting.push(once);
      this.pending.set(feed.display, waiting);
    } else {
      once();
    }
    const arrived = () => {
      feed.arrived.add(track.kind);
      if (this.done)
        return;
      const conn = this.kept.get(feed.display);
      const old = conn?.tracks.find((t) => t.kind === track.kind);
      if (old) {
        this._log(`${feed.display}'s ${track.kind} now comes through the SFU`);
        conn.tracks = conn.tracks.filter((t) => t !== old);
        this.peer._emit('track-removed', { participant: feed.display,
          track: old, kind: old.kind });
      }
      once();
      this.check(feed);
    };
    if (track.muted)
      track.addEventListener('unmute', arrived, { once: true });
    else
      arrived();
  }

  /* The subscriber connection of `feed` has its own data channel open,
   * each track Janus offered on it arrived and a probe came on it: its
   * participant is received through the SFU; one of the mesh is told so
   * (sfu-ready). */
  check (feed)
  {
    const id = feed.display;
    if (this.done || !feed.open || !feed.probed || feed.expected === null ||
        feed.expected.some((kind) => !feed.arrived.has(kind)) ||
        this.receiving.has(id))
      return;
    this.receiving.add(id);
    if (this.partners.delete(id)) {
      this._log(`telling ${id} it is received through the SFU`);
      this.peer._enqueue({ to: id, from: this.peer.id, pc: feed.pcId,
        type: 'sfu-ready' });
    }
    this._closeDrained();
    this._finish();
  }

  close ()
  {
    this._stop();
    for (const id of [...this.kept.keys()])
      this._closeMesh(id);
    this.pending.clear();
  }
}

export class LegbaSfu
{
  /* peer: the LegbaRoomPeer; sfu: the checked topology's `sfu`; kept:
   * the connected mesh connections of a room moving from mesh to SFU, by
   * participant id (MeshMove) */
  constructor (peer, sfu, kept = new Map())
  {
    this.peer = peer;
    this.sfu = sfu;
    this.session = new JanusSession(sfu.url, sfu.token,
        (line) => peer._log(`sfu: ${line}`));
    this.feeds = new Map();     /* feed id -> {handle, display, pc, ...} */
    this.publisher = null;
    this.ownFeed = null;
    this.lossyWaiting = [];
    this.closed = false;
    this.moveWait = null;
    /* reliable messages waiting for the publisher's channel: those of a
     * move until the others receive this participant (MeshMove) */
    this.held = [];
    this.holding = kept.size > 0;
    this.move = kept.size > 0 ? new MeshMove(this, kept) : null;
    this.retry = null;
    this.lostAt = null;         /* Date.now() of the loss, while lost */
    this.attempts = 0;
  }

  _joinBody (ptype)
  {
    const body = { request: 'join', ptype, room: this.sfu.room };
    if (this.sfu.pin !== undefined)
      body.pin = this.sfu.pin;
    if (this.sfu.token !== undefined)
      body.token = this.sfu.token;
    return body;
  }

  _newPc (handle)
  {
    const { options, serverIceServers } = this.peer;
    const pc = new RTCPeerConnection({
      iceServers: options.iceServers.length > 0 ?
        options.iceServers : serverIceServers,
      iceTransportPolicy: options.iceTransportPolicy,
      bundlePolicy: 'max-bundle',
      rtcpMuxPolicy: 'require',
    });
    pc.onicecandidate = (e) => {
      if (!this.closed && (!e.candidate || e.candidate.candidate))
        this.session.trickle(handle, e.candidate);
    };
    return pc;
  }

  /* Opens the session, joins as a publisher, publishes, and subscribes to
   * the publishers already there. */
  async start ()
  {
    const session = this.session;
    session.onclose = () => {
      if (this.closed)
        return;
      if (this.ownFeed === null && this.lostAt === null) {
        this.peer._error(null, 'the SFU session closed');
        return;
      }
      this._lost(session, 'the SFU session closed');
    };
    await session.open();
    const handle = await session.attach((m) => this._onPublisherEvent(m));
    const joined = await session.message(handle, {
      ...this._joinBody('publisher'), display: this.peer.id });
    if (this.closed || session !== this.session)
      return;
    this.ownFeed = joined.plugindata.data.id;
    if (this.lostAt !== null) {
      this.peer._log(`sfu: the SFU session is back after ` +
          `${Date.now() - this.lostAt} ms, ${this.attempts} attempts`);
      clearTimeout(this.moveWait);
      this.lostAt = null;
      this.attempts = 0;
    }
    this.publisher = { handle, session, pc: this._newPc(handle), channels: {},
      participant: { id: 'the SFU' } };
    await this._publish(this.publisher);
    this._subscribeAll(joined.plugindata.data.publishers);
  }

  /* §8: the session, or an attempt to open it again, is gone. Its Janus
   * died (the server makes the room again elsewhere and says so with a
   * new legba:topology, which wins) or only this page's connection to it
   * went (no topology comes): its connections close, and a new session
   * on the same Janus joins the same VideoRoom after a back-off. */
  _lost (session, why)
  {
    if (this.closed || session !== this.session || session.lost)
      return;
    session.lost = true;
    this.peer._log(`sfu: ${why}; opening the session again`);
    for (const id of [...this.feeds.keys()])
      this._dropFeed(id);
    this.publisher?.pc.close();
    this.publisher = null;
    this.ownFeed = null;
    session.close();
    if (this.lostAt === null) {
      this.lostAt = Date.now();
      this.moveWait = setTimeout(() => {
        clearTimeout(this.retry);
        this.peer._error(null, `the SFU session closed (${why}), and ` +
            'it could not be opened again nor the room made again ' +
            `within ${MOVE_WAIT_S} s`);
      }, MOVE_WAIT_S * 1000);
    }
    const delay = Math.min(RETRY_FIRST_MS * 2 ** this.attempts, RETRY_MAX_MS);
    this.attempts++;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      if (this.closed)
        return;
      this.session = new JanusSession(this.sfu.url, this.sfu.token,
          (line) => this.peer._log(`sfu: ${line}`));
      const attempt = this.session;
      this.start().catch((e) => this._lost(attempt, `${e.message ?? e}`));
    }, delay);
  }

  async _publish (pub)
  {
    const { pc } = pub;
    const local = this.peer._localTracks();
    for (const kind of ['video', 'audio']) {
      if (!local[kind])
        continue;
      const t = pc.addTransceiver(local[kind], { direction: 'sendonly',
        streams: [local.stream] });
      t.setCodecPreferences(this.peer._codecs(kind, true));
    }
    this._adoptPublisherChannel(pc.createDataChannel('legba',
        { ordered: true }));
    const offer = await pc.createOffer();
    /* the offer leaves before setLocalDescription starts gathering, so
     * Janus has it before any trickled candidate */
    const published = pub.session.message(pub.handle, { request: 'publish' },
        { type: 'offer', sdp: offer.sdp });
    await pc.setLocalDescription(offer);
    const answer = await published;
    if (this.closed)
      return;
    await pc.setRemoteDescription(answer.jsep);
  }

  _adoptPublisherChannel (channel)
  {
    this.publisher.channels[channel.label] = channel;
    channel.binaryType = 'arraybuffer';
    channel.onopen = () => {
      if (channel.label === 'legba') {
        this.move?.probe(channel);
        channel.send(JSON.stringify({ topic: 'legba.mute',
          data: { ...this.peer.muted } }));
        this._flushHeld();
      } else {
        this._flushLossy();
      }
    };
  }

  _onPublisherEvent (m)
  {
    const data = m.plugindata?.data;
    if (m.janus === 'hangup')
      this.peer._error(null, `the SFU hung up the publisher: ${m.reason}`);
    if (!data)
      return;
    if (Array.isArray(data.publishers))
      this._subscribeAll(data.publishers);
    for (const gone of [data.unpublished, data.leaving]) {
      if (Number.isSafeInteger(gone) && gone !== this.ownFeed)
        this._dropFeed(gone);
    }
  }

  _subscribeAll (publishers)
  {
    for (const p of publishers ?? []) {
      if (!Number.isSafeInteger(p.id) || p.id === this.ownFeed ||
          this.feeds.has(p.id) || typeof p.display !== 'string')
        continue;
      this._subscribe(p.id, p.display).catch((e) => {
        if (this.feeds.has(p.id))
          this.peer._error(p.display, `subscription: ${e.message ?? e}`);
      });
    }
  }

  /* One subscriber handle per feed: Janus offers, a receive-only answer
   * goes with `start`; a data channel of its own makes Janus relay the
   * publisher's data. */
  async _subscribe (id, display)
  {
    const session = this.session;
    const feed = { id, display, handle: null, pc: null, tracks: [],
      channels: [], pcId: randomId(), open: false, probed: false,
      expected: null, arrived: new Set(), session };
    this.feeds.set(id, feed);
    feed.handle = await session.attach((m) => {
      if (m.janus === 'hangup')
        this.peer._log(`sfu: feed of ${display} hung up`);
    });
    if (this.feeds.get(id) !== feed || this.closed)
      return session.detach(feed.handle);
    const attached = await session.message(feed.handle, {
      ...this._joinBody('subscriber'), streams: [{ feed: id }] });
    if (this.feeds.get(id) !== feed || this.closed)
      return;
    const pc = this._newPc(feed.handle);
    feed.pc = pc;
    pc.ontrack = (e) => {
      feed.tracks.push(e.track);
      const show = () => {
        if (this.feeds.get(id) === feed)
          this.peer._emit('track', { participant: display, track: e.track,
            kind: e.track.kind, streams: e.streams });
      };
      if (this.move)
        this.move.track(feed, e.track, show);
      else
        show();
    };
    pc.ondatachannel = (e) => this._adoptFeedChannel(feed, e.channel);
    pc.onconnectionstatechange = () => {
      const p = this.peer.participants.get(display);
      if (p && pc.connectionState === 'connected')
        this.peer._setParticipantState(p, 'connected');
    };
    feed.expected = offeredKinds(attached.jsep?.sdp);
    await pc.setRemoteDescription(attached.jsep);
    for (const t of pc.getTransceivers())
      t.direction = 'recvonly';
    const own = pc.createDataChannel('legba', { ordered: true });
    own.addEventListener('open', () => {
      feed.open = true;
      if (this.feeds.get(id) === feed)
        this.move?.check(feed);
    });
    this._adoptFeedChannel(feed, own);
    const answer = await pc.createAnswer();
    const started = session.message(feed.handle, { request: 'start' },
        { type: 'answer', sdp: answer.sdp });
    await pc.setLocalDescription(answer);
    await started;
  }

  _adoptFeedChannel (feed, channel)
  {
    feed.channels.push(channel);
    channel.binaryType = 'arraybuffer';
    channel.onmessage = (e) => {
      const p = this.peer.participants.get(feed.display) ??
        { id: feed.display, muted: {} };
      this.peer._onData(p, e.data, channel.label === 'legba-lossy', () =>
        this.move?.probed(feed));
    };
  }

  _dropFeed (id)
  {
    const feed = this.feeds.get(id);
    if (!feed)
      return;
    this.feeds.delete(id);
    if (feed.handle !== null)
      feed.session.detach(feed.handle);
    feed.pc?.close();
    for (const track of feed.tracks) {
      this.peer._emit('track-removed', { participant: feed.display, track,
        kind: track.kind });
    }
  }

  /* presence said the participant left: its subscriptions end, and its
   * mesh connection of a move */
  /* Whether participant's media come through a connected subscription
   * (§3's grace period holds for it when its signalling goes). */
  receives (participant)
  {
    for (const feed of this.feeds.values()) {
      if (feed.display === participant &&
          feed.pc?.connectionState === 'connected')
        return true;
    }
    return false;
  }

  dropParticipant (participant)
  {
    this.move?.participantLeft(participant);
    for (const feed of [...this.feeds.values()]) {
      if (feed.display === participant)
        this._dropFeed(feed.id);
    }
  }

  /* §8: to everyone, once, on the publisher's channel; returns how many
   * participants it goes to. */
  send (payload, lossy)
  {
    if (!lossy && (this.holding || this.held.length > 0)) {
      this.held.push(payload);
      return this.peer.participants.size;
    }
    const channel = this.publisher?.channels.legba;
    if (channel?.readyState !== 'open')
      return 0;
    this.peer._checkSize(this.publisher, payload);
    if (!lossy) {
      channel.send(payload);
    } else {
      let unordered = this.publisher.channels['legba-lossy'];
      if (!unordered) {
        unordered = this.publisher.pc.createDataChannel('legba-lossy',
            { ordered: false, maxRetransmits: 0 });
        this._adoptPublisherChannel(unordered);
      }
      if (unordered.readyState === 'open')
        unordered.send(payload);
      else
        this.lossyWaiting = [...this.lossyWaiting, payload].slice(-64);
    }
    return this.feeds.size;
  }

  /* The held reliable messages, in order, once the move let them go and
   * the publisher's channel is open. */
  _flushHeld ()
  {
    const channel = this.publisher?.channels.legba;
    if (this.holding || channel?.readyState !== 'open')
      return;
    for (const payload of this.held.splice(0)) {
      try {
        this.peer._checkSize(this.publisher, payload);
        channel.send(payload);
      } catch (e) {
        this.peer._error(null, `a message that waited for the SFU: ` +
            `${e.message ?? e}`);
      }
    }
  }

  _flushLossy ()
  {
    for (const payload of this.lossyWaiting.splice(0))
      this.publisher.channels['legba-lossy'].send(payload);
  }

  setToken (token)
  {
    this.sfu = { ...this.sfu, token };
    this.session.token = token;
  }

  /* RTCPeerConnections to read stats from: each feed's, by participant,
   * and the publisher's. */
  connections ()
  {
    return { publisher: this.publisher?.pc ?? null,
      feeds: [...this.feeds.values()].filter((f) => f.pc)
        .map((f) => ({ participant: f.display, pc: f.pc })) };
  }

  close ()
  {
    clearTimeout(this.moveWait);
    clearTimeout(this.retry);
    if (this.closed)
      return;
    this.closed = true;
    this.move?.close();
    this.move = null;
    for (const id of [...this.feeds.keys()])
      this._dropFeed(id);
    this.publisher?.pc.close();
    this.session.close();
  }
}

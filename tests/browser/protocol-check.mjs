// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Holds a signal trace (what a room page sent and received, as room.html
// records it) to docs/room-protocol.md §4 and §5: sizes, pacing, order,
// fields, and what offers and answers carry. Returns violations as
// sentences naming the sender, so that a failing test says what broke.

/* Splits an SDP into its session part and media sections. */
export function sdpSections (sdp)
{
  const lines = sdp.split(/\r?\n/).filter((l) => l.length);
  const sections = [];
  let current = { kind: 'session', lines: [] };
  for (const line of lines) {
    if (line.startsWith('m=')) {
      sections.push(current);
      current = { kind: line.slice(2).split(' ')[0], lines: [line] };
    } else {
      current.lines.push(line);
    }
  }
  sections.push(current);
  return { session: sections[0], media: sections.slice(1) };
}

function attr (section, name)
{
  return section.lines.filter((l) => l.startsWith(`a=${name}`))
    .map((l) => l.slice(name.length + 2).replace(/^:/, ''));
}

/* The payload types of a section, as {pt, codec, clock, channels, fmtp,
 * feedback}. */
export function sdpCodecs (section)
{
  const pts = section.lines[0].split(' ').slice(3);
  return pts.map((pt) => {
    const map = attr(section, 'rtpmap').find((a) => a.startsWith(`${pt} `));
    const [codec = '', clock, channels] = (map?.split(' ')[1] ?? '').split('/');
    const fmtp = attr(section, 'fmtp').find((a) => a.startsWith(`${pt} `))
      ?.slice(pt.length + 1) ?? '';
    const feedback = attr(section, 'rtcp-fb')
      .filter((a) => a.startsWith(`${pt} `) || a.startsWith('* '))
      .map((a) => a.slice(a.indexOf(' ') + 1));
    return { pt, codec: codec.toUpperCase(), clock, channels, fmtp, feedback };
  });
}

function direction (section)
{
  for (const d of ['sendrecv', 'sendonly', 'recvonly', 'inactive']) {
    if (section.lines.includes(`a=${d}`))
      return d;
  }
  return 'sendrecv';
}

/* §5: what one description carries. `type` is offer or answer. */
export function checkDescription (sdp, type, who)
{
  const v = [];
  const { session, media } = sdpSections(sdp);
  const kinds = media.map((m) => m.kind);
  const count = (k) => kinds.filter((x) => x === k).length;
  /* port 0 rejects a section, unless it is bundle-only (RFC 8843) */
  const active = media.filter((m) => m.lines[0].split(' ')[1] !== '0' ||
      m.lines.includes('a=bundle-only'));
  if (count('video') !== 1 || count('audio') !== 1) {
    v.push(`${who}'s ${type} has ${count('video')} video and ` +
        `${count('audio')} audio sections, not exactly one of each (§5)`);
  }
  if (type === 'offer' && count('application') !== 1)
    v.push(`${who}'s offer has no data channel section (§6)`);
  const bundle = attr(session, 'group').find((g) => g.startsWith('BUNDLE'));
  const mids = active.map((m) => attr(m, 'mid')[0]);
  if (!bundle) {
    v.push(`${who}'s ${type} has no BUNDLE group (§5)`);
  } else {
    const grouped = bundle.split(' ').slice(1);
    for (const mid of mids) {
      if (!grouped.includes(mid))
        v.push(`${who}'s ${type}: section ${mid} is not bundled (§5)`);
    }
  }
  for (const m of active) {
    if (m.kind !== 'application' && !m.lines.includes('a=rtcp-mux'))
      v.push(`${who}'s ${type}: ${m.kind} section without rtcp-mux (§5)`);
  }
  for (const m of active.filter((x) => x.kind === 'video')) {
    const codecs = sdpCodecs(m);
    const media = codecs.filter((c) => c.codec !== 'RTX');
    const names = [...new Set(media.map((c) => c.codec))];
    for (const c of media) {
      if (c.codec !== 'H264' && c.codec !== 'VP8')
        v.push(`${who}'s ${type} offers video codec ${c.codec} (§5: H.264 or VP8)`);
      if (c.codec === 'H264') {
        if (!/(^|;)\s*packetization-mode=1(;|$)/.test(c.fmtp))
          v.push(`${who}'s ${type}: H.264 pt ${c.pt} without packetization-mode=1 (§5)`);
        const level = /profile-level-id=([0-9a-fA-F]{6})/.exec(c.fmtp)?.[1];
        if (!level || !/^42e0/i.test(level))
          v.push(`${who}'s ${type}: H.264 pt ${c.pt} profile-level-id ${level} is not constrained baseline 42e0xx (§5)`);
        if (!/level-asymmetry-allowed=1/.test(c.fmtp))
          v.push(`${who}'s ${type}: H.264 pt ${c.pt} without level-asymmetry-allowed=1 (§5)`);
      }
    }
    if (direction(m) !== 'recvonly' && direction(m) !== 'inactive' &&
        names.length > 1)
      v.push(`${who}'s ${type} sends video yet lists ${names.join(' and ')} (§5: only the codec it publishes)`);
    if (!media.some((c) => c.feedback.includes('nack')))
      v.push(`${who}'s ${type}: video without NACK feedback (§5)`);
    if (type === 'offer' && !codecs.some((c) => c.codec === 'RTX'))
      v.push(`${who}'s offer: video without RTX (§5)`);
    if (type === 'offer' && !attr(m, 'extmap').some((e) =>
      e.includes('transport-wide-cc')))
      v.push(`${who}'s offer: video without the transport-wide-cc extension (§5)`);
  }
  for (const m of active.filter((x) => x.kind === 'audio')) {
    for (const c of sdpCodecs(m)) {
      if (c.codec !== 'OPUS' || c.clock !== '48000' || c.channels !== '2')
        v.push(`${who}'s ${type} offers audio codec ${c.codec}/${c.clock}/${c.channels} (§5: opus/48000/2)`);
    }
  }
  return v;
}

/* §4 for the messages of one sender, in the order sent (outgoing) or
 * received (incoming): fields, sizes, the window rule, and descriptions
 * before candidates. `window` is the rate window to hold them to: 1.1 s
 * for what a page sent (its send times); for what it received, arrival
 * times carry the delivery jitter of a loaded machine, so 0.7 s, which a
 * sender that does not pace still fails by far (the server's own view,
 * its refusals with 4301, is checked apart). */
export function checkMessages (entries, { who, limits, window = 1100 })
{
  const v = [];
  const started = new Map();
  const times = [];
  for (const { message: s, bytes, at } of entries) {
    if (bytes > limits.bytes)
      v.push(`${who} sent a ${s.type} of ${bytes} bytes, over ${limits.bytes} (§4)`);
    times.push(at);
    for (const f of ['to', 'from', 'pc', 'type']) {
      if (typeof s[f] !== 'string' || !s[f])
        v.push(`${who} sent a message without "${f}": ${JSON.stringify(s).slice(0, 200)}`);
    }
    const key = `${s.to}\n${s.pc}`;
    if (s.type === 'candidates') {
      if (!started.has(key))
        v.push(`${who} sent candidates of pc ${s.pc} before its description (§4)`);
      if (!Array.isArray(s.candidates)) {
        v.push(`${who} sent candidates without an array (§4)`);
      } else {
        for (const c of s.candidates) {
          if (typeof c?.candidate !== 'string' ||
              (typeof c.sdpMid !== 'string' && !Number.isInteger(c.sdpMLineIndex)))
            v.push(`${who} sent a malformed candidate ${JSON.stringify(c)} (§4)`);
        }
      }
      if ('end' in s && typeof s.end !== 'boolean')
        v.push(`${who} sent "end" that is not a boolean (§4)`);
    } else if (s.type === 'part') {
      started.set(key, true);
      if (typeof s.id !== 'string' || !Number.isInteger(s.part) ||
          !Number.isInteger(s.parts) || typeof s.chunk !== 'string')
        v.push(`${who} sent a malformed part ${JSON.stringify(s).slice(0, 200)} (§4)`);
    } else if (s.type === 'offer' || s.type === 'answer') {
      started.set(key, true);
      if (typeof s.sdp !== 'string')
        v.push(`${who} sent an ${s.type} without sdp (§4)`);
    } else if (s.type !== 'bye') {
      v.push(`${who} sent a message of unknown type ${s.type} (§4)`);
    }
  }
  for (let i = 0; i + limits.rate < times.length; i++) {
    if (times[i + limits.rate] - times[i] < window) {
      v.push(`${who} sent ${limits.rate + 1} signals within ` +
          `${(times[i + limits.rate] - times[i]).toFixed(0)} ms (§4: at most ` +
          `${limits.rate} per ${window} ms)`);
      break;
    }
  }
  return v;
}

/* Everything a page's trace says about itself (out) and about its peers
 * (in): §4 and §5 for both sides. `self` names the page's participant. */
export function checkTrace (signals, { self, limits })
{
  const v = [];
  const out = signals.filter((e) => e.direction === 'out' && !e.whole);
  v.push(...checkMessages(out, { who: self, limits }));
  const senders = new Set(signals.filter((e) => e.direction === 'in' &&
      !e.whole).map((e) => e.message.from));
  for (const from of senders) {
    const received = signals.filter((e) => e.direction === 'in' &&
        !e.whole && e.message.from === from);
    v.push(...checkMessages(received, { who: from, limits, window: 700 }));
  }
  for (const e of signals) {
    const s = e.message;
    if (s.type !== 'offer' && s.type !== 'answer')
      continue;
    v.push(...checkDescription(s.sdp, s.type,
        e.direction === 'out' ? self : s.from));
  }
  return v;
}

// The test page of the media browser tests: @svc/client bundled for the browser (esbuild), driven
// by the test through `window.svcm`.
import { SvcClient, type SvcConfig, SvcError, type SvcRoomOptions } from '../../src/index.ts';

interface Seen {
  type: string;
  trackId: string;
  sid: string;
  source: string;
  kind: string;
  at: number;
}

// Every PeerConnection the page creates (reportFailed reaches them).
const peerConnections: RTCPeerConnection[] = [];
let failEveryPeer = false;
const NativePeerConnection = RTCPeerConnection;
window.RTCPeerConnection = class extends NativePeerConnection {
  constructor(config?: RTCConfiguration) {
    super(config);
    peerConnections.push(this);
    // Once the library has set its handlers (synchronously after construction).
    if (failEveryPeer) queueMicrotask(() => reportFailed(this));
  }
};

/** Makes `pc` report connectionState `failed`, as the browser does when its path dies. */
function reportFailed(pc: RTCPeerConnection) {
  if (pc.signalingState === 'closed') return;
  Object.defineProperty(pc, 'connectionState', { value: 'failed', configurable: true });
  pc.onconnectionstatechange?.(new Event('connectionstatechange'));
}

const events: Seen[] = [];
const states: string[] = [];
/** Codes of onMediaError. */
const errors: string[] = [];
let client: SvcClient | null = null;
let lastSocket: WebSocket | null = null;
const attached = new Map<unknown, HTMLMediaElement>();
/** The outbound-rtp counters `local()` sums per track. */
const COUNTS_SENT = [
  'packetsSent',
  'framesEncoded',
  'keyFramesEncoded',
  'framesSent',
  'pliCount',
  'nackCount',
] as const;

async function attempt<T>(fn: () => Promise<T>) {
  try {
    return { ok: true as const, value: await fn() };
  } catch (err) {
    return {
      ok: false as const,
      code: err instanceof SvcError ? err.code : String(err),
      message: String(err),
    };
  }
}

const svcm = {
  events,
  states,
  errors,
  async connect(config: SvcConfig, options: SvcRoomOptions, relay = false) {
    client = new SvcClient(config, {
      iceTransportPolicy: relay ? 'relay' : 'all',
      webSocketFactory: (url) => {
        lastSocket = new WebSocket(url);
        return lastSocket as never;
      },
    });
    client.connectionState.subscribe((s) => states.push(String(s)));
    client.onMediaError = (err) => errors.push(err.code);
    const record =
      (type: string) =>
      (_p: unknown, t: { trackId: string; sid: string; source: string; kind: string }) =>
        events.push({
          type,
          trackId: t.trackId,
          sid: t.sid,
          source: t.source,
          kind: t.kind,
          at: performance.now(),
        });
    client.onMediaStarted = record('started');
    client.onMediaStopped = record('stopped');
    client.onMediaMuted = (p, t) => record(t.muted ? 'muted' : 'unmuted')(p, t);
    return attempt(async () => (await client!.connect(options)).localParticipant.sid);
  },
  enable(source: 'camera' | 'microphone' | 'screen') {
    const c = client!;
    return attempt(() =>
      source === 'camera'
        ? c.enableCamera()
        : source === 'microphone'
          ? c.enableMicrophone()
          : c.enableScreenShare(),
    );
  },
  disable(source: 'camera' | 'microphone' | 'screen') {
    const c = client!;
    return attempt(() =>
      source === 'camera'
        ? c.disableCamera()
        : source === 'microphone'
          ? c.disableMicrophone()
          : c.disableScreenShare(),
    );
  },
  /** Calls one of the client's REST methods by name (the recordings test). */
  rest(method: string, args: unknown[]) {
    const c = client as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    return attempt(() => c[method]!.apply(client, args));
  },
  /** Resolves once every local track's media is flowing to the SFU. */
  async sending() {
    for (const t of client?.room?.localTracks ?? []) await sending(t);
  },
  /**
   * Reports connectionState `failed` on every open PeerConnection, as the browser does when the
   * network path dies (tests cannot cut a path on these machines: no netfilter or qdisc).
   */
  reportFailed() {
    for (const pc of [...peerConnections]) reportFailed(pc);
  },
  /** With `on`, every PeerConnection fails, the open ones now and each new one at once. */
  failEveryPeer(on: boolean) {
    failEveryPeer = on;
    if (on) svcm.reportFailed();
  },
  /** Closes the signaling socket abnormally (a drop): the client resumes by itself. */
  dropSocket() {
    lastSocket?.close(3000, 'test drop');
  },
  async disconnect() {
    await client?.disconnect();
  },
  /** Sending state of every local track (what a failing test reports of the publishing side). */
  async local() {
    const out = [];
    for (const t of client?.room?.localTracks ?? []) {
      const sent: Record<string, unknown> = { source: t.source, trackId: t.trackId };
      for (const r of (await t.getStats()).values()) {
        if (r.type === 'transport') sent.transport = `${r.iceState ?? '?'}/${r.dtlsState ?? '?'}`;
        if (r.type !== 'outbound-rtp') continue;
        for (const k of COUNTS_SENT) {
          sent[k] = Number(sent[k] ?? 0) + Number(r[k] ?? 0);
        }
        if (r.qualityLimitationReason) sent.limitedBy = r.qualityLimitationReason;
      }
      out.push(sent);
    }
    return out;
  },
  /** Decoding state of every remote track (attaching each to an element so audio is rendered). */
  async remote() {
    const out = [];
    for (const t of client?.room?.remoteTracks ?? []) {
      const track = t.mediaStreamTrack as unknown as MediaStreamTrack | null;
      if (track && !attached.has(track)) {
        const el = document.createElement(track.kind === 'video' ? 'video' : 'audio');
        el.autoplay = true;
        el.srcObject = new MediaStream([track]);
        document.body.append(el);
        void el.play().catch(() => {});
        attached.set(track, el);
      }
      let framesDecoded = 0;
      let samples = 0;
      let width = 0;
      let candidateType = '';
      let packets = 0;
      // What a stalled video tells: lost packets, keyframes decoded, and the receiver's requests.
      let lost = 0;
      let keyFrames = 0;
      let plis = 0;
      let nacks = 0;
      let freezes = 0;
      // The transport's ICE and DTLS states (what a failing test reports), and what reached it: a
      // transport that keeps receiving while the track's packets stand still drops them above ICE
      // (SRTP, demultiplexing), one that receives nothing never gets them.
      let transport = '';
      let transportPackets = 0;
      let pairPackets = 0;
      /** ms since the track's last RTP packet (-1: none yet). */
      let sinceLastPacket = -1;
      const stats = await t.getStats();
      // The pair in use: the transport's selected one, else a nominated pair that succeeded.
      let pairId = '';
      for (const r of stats.values()) {
        if (r.type !== 'transport') continue;
        transport = `${r.iceState ?? '?'}/${r.dtlsState ?? '?'}`;
        transportPackets = Number(r.packetsReceived ?? 0);
        if (r.selectedCandidatePairId) pairId = String(r.selectedCandidatePairId);
      }
      for (const r of stats.values()) {
        if (r.type === 'candidate-pair' && !pairId && r.nominated && r.state === 'succeeded') {
          pairId = String(r.id);
        }
      }
      const pair = pairId ? stats.get(pairId) : undefined;
      if (pair) {
        candidateType = String(stats.get(String(pair.localCandidateId))?.candidateType ?? '');
        pairPackets = Number(pair.packetsReceived ?? 0);
      }
      for (const r of stats.values()) {
        if (r.type !== 'inbound-rtp') continue;
        framesDecoded += Number(r.framesDecoded ?? 0);
        packets += Number(r.packetsReceived ?? 0);
        lost += Number(r.packetsLost ?? 0);
        keyFrames += Number(r.keyFramesDecoded ?? 0);
        plis += Number(r.pliCount ?? 0);
        nacks += Number(r.nackCount ?? 0);
        freezes += Number(r.freezeCount ?? 0);
        samples += Number(r.totalSamplesReceived ?? 0);
        width = Math.max(width, Number(r.frameWidth ?? 0));
        if (r.lastPacketReceivedTimestamp)
          sinceLastPacket = Math.round(
            performance.timeOrigin + performance.now() - Number(r.lastPacketReceivedTimestamp),
          );
      }
      out.push({
        ...t.info,
        framesDecoded,
        samples,
        packets,
        lost,
        keyFrames,
        plis,
        nacks,
        freezes,
        width,
        candidateType,
        transport,
        transportPackets,
        pairPackets,
        sinceLastPacket,
        hasTrack: !!track,
      });
    }
    return out;
  },
};

/**
 * A bare Janus client (the baseline of `npm run bench -- media`): the same browser talking to
 * Janus's WebSocket API directly, as the recorded probe did.
 */
function janusSocket(url: string) {
  const ws = new WebSocket(url, 'janus-protocol');
  const waiting = new Map<string, (m: any) => void>();
  let n = 0;
  ws.onmessage = (ev) => {
    const m = JSON.parse(String(ev.data));
    if (m.janus === 'ack' && !m.jsep) return;
    const done = waiting.get(m.transaction);
    if (done) {
      waiting.delete(m.transaction);
      done(m);
    }
  };
  const opened = new Promise<void>((resolve) => {
    ws.onopen = () => resolve();
  });
  const call = async (body: Record<string, unknown>) => {
    await opened;
    const transaction = `t${++n}`;
    const answer = new Promise<any>((resolve) => waiting.set(transaction, resolve));
    ws.send(JSON.stringify({ ...body, transaction }));
    return answer;
  };
  return { ws, call };
}

const raw = {
  pcs: [] as RTCPeerConnection[],
  /** Publishes the fake camera into a new Janus room; resolves with {room, feed}. */
  async publish(url: string, video: boolean | MediaTrackConstraints = true) {
    const j = janusSocket(url);
    const session = (await j.call({ janus: 'create' })).data.id;
    const handle = (
      await j.call({ janus: 'attach', session_id: session, plugin: 'janus.plugin.videoroom' })
    ).data.id;
    const msg = (body: object, jsep?: object) =>
      j.call({
        janus: 'message',
        session_id: session,
        handle_id: handle,
        body,
        ...(jsep ? { jsep } : {}),
      });
    const room = (await msg({ request: 'create', videocodec: 'vp8,h264,vp9', publishers: 10 }))
      .plugindata.data.room;
    const feed = (await msg({ request: 'join', ptype: 'publisher', room })).plugindata.data.id;
    const stream = await navigator.mediaDevices.getUserMedia({ video });
    const pc = new RTCPeerConnection();
    raw.pcs.push(pc);
    pc.addTransceiver(stream.getTracks()[0]!, { direction: 'sendonly' });
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    const res = await msg({ request: 'publish' }, { type: 'offer', sdp: offer.sdp });
    await pc.setRemoteDescription(res.jsep);
    setInterval(() => j.call({ janus: 'keepalive', session_id: session }), 20_000);
    await sending(pc);
    return { room, feed };
  },
  /** Subscribes to `feed`; resolves with ms from the start to the first decoded frame. */
  async firstFrame(url: string, room: number, feed: number) {
    const t0 = performance.now();
    const j = janusSocket(url);
    const session = (await j.call({ janus: 'create' })).data.id;
    const handle = (
      await j.call({ janus: 'attach', session_id: session, plugin: 'janus.plugin.videoroom' })
    ).data.id;
    const res = await j.call({
      janus: 'message',
      session_id: session,
      handle_id: handle,
      body: { request: 'join', ptype: 'subscriber', room, streams: [{ feed }] },
    });
    const pc = new RTCPeerConnection();
    raw.pcs.push(pc);
    const track = new Promise<MediaStreamTrack>((resolve) => {
      pc.ontrack = (ev) => resolve(ev.track);
    });
    await pc.setRemoteDescription(res.jsep);
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(answer);
    await j.call({
      janus: 'message',
      session_id: session,
      handle_id: handle,
      body: { request: 'start' },
      jsep: { type: 'answer', sdp: answer.sdp },
    });
    await track;
    await firstDecoded(pc);
    const ms = performance.now() - t0;
    pc.close();
    j.ws.close();
    return ms;
  },
};

/** Resolves once `pc` has sent a video frame (the publisher's media reaches the SFU). */
async function sending(pc: {
  getStats(): Promise<Map<string, Record<string, unknown>> | RTCStatsReport>;
}) {
  for (;;) {
    const stats = await pc.getStats();
    for (const r of (stats as Map<string, Record<string, unknown>>).values()) {
      if (r.type === 'outbound-rtp' && Number(r.framesSent ?? 0) > 0) return;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function firstDecoded(pc: {
  getStats(): Promise<Map<string, Record<string, unknown>> | RTCStatsReport>;
}) {
  for (;;) {
    const stats = await pc.getStats();
    for (const r of (stats as Map<string, Record<string, unknown>>).values()) {
      if (r.type === 'inbound-rtp' && Number(r.framesDecoded ?? 0) > 0) return;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Svc: ms from connect() to the first decoded frame of a remote camera. */
async function svcFirstFrame(config: SvcConfig, options: SvcRoomOptions) {
  const t0 = performance.now();
  const c = new SvcClient(config);
  const room = await c.connect(options);
  for (;;) {
    const t = room.remoteTracks.find((x) => x.info.kind === 'video' && x.mediaStreamTrack);
    if (t) {
      await firstDecoded(t);
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const ms = performance.now() - t0;
  await c.disconnect();
  return ms;
}

/**
 * Many clients in one page (`npm run bench -- media`'s scaling rounds): each connects to its
 * room and publishes a small camera; with `subscribe`, each receives every other camera.
 */
const many = {
  clients: [] as SvcClient[],
  async start(
    config: SvcConfig,
    joins: { roomName: string; userId: string }[],
    video: { width: number; height: number; frameRate: number },
    subscribe: boolean,
  ) {
    return attempt(async () => {
      for (const j of joins) {
        const c = new SvcClient(config, { autoSubscribe: subscribe });
        many.clients.push(c);
        await c.connect({
          roomName: j.roomName,
          liveType: 'VIDEO_CONFERENCE',
          participant: { userId: j.userId, name: j.userId },
        });
        await c.enableCamera(video);
      }
    });
  },
  /** Remote video tracks that have decoded at least one frame, over every client. */
  async decoding() {
    let n = 0;
    for (const c of many.clients) {
      for (const t of c.room?.remoteTracks ?? []) {
        for (const r of (await t.getStats()).values()) {
          if (r.type === 'inbound-rtp' && Number(r.framesDecoded ?? 0) > 0) n++;
        }
      }
    }
    return n;
  },
  async stop() {
    for (const c of many.clients.splice(0)) await c.disconnect();
  },
  /** The bare path: `n` small cameras published straight to Janus, each in a room of its own. */
  async raw(url: string, n: number, video: { width: number; height: number; frameRate: number }) {
    const constraints = {
      width: { ideal: video.width },
      height: { ideal: video.height },
      frameRate: { ideal: video.frameRate },
    };
    for (let i = 0; i < n; i++) await raw.publish(url, constraints);
  },
  rawStop() {
    for (const pc of raw.pcs.splice(0)) pc.close();
  },
};

(window as unknown as { svcm: typeof svcm }).svcm = svcm;
(window as unknown as { many: typeof many }).many = many;
(window as unknown as { raw: typeof raw }).raw = raw;
(window as unknown as { svcFirstFrame: typeof svcFirstFrame }).svcFirstFrame = svcFirstFrame;

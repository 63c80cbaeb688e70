import {
  KIND_OF_SOURCE,
  type MediaEventData,
  type MediaSnapshot,
  type SvcIceServer,
  type SvcTrackInfo,
  type SvcTrackKind,
  type SvcTrackSource,
} from '@svc/protocol';
import { SvcError } from './errors.ts';

// The client builds with Node's types only; these are the parts of the browser's WebRTC and
// media-capture APIs it uses (any browser, or a WebRTC implementation installed on globalThis).

/** A browser MediaStreamTrack (the parts Svc uses). */
export interface SvcMediaStreamTrack {
  readonly kind: string;
  readonly id: string;
  enabled: boolean;
  stop(): void;
}
interface MediaStreamLike {
  getTracks(): SvcMediaStreamTrack[];
}
interface SessionDescription {
  type: string;
  sdp?: string;
}
interface IceCandidateLike {
  toJSON(): Record<string, unknown>;
}
/** A browser RTCPeerConnection (the parts Svc uses). */
export interface SvcPeerConnection {
  onicecandidate: ((ev: { candidate: IceCandidateLike | null }) => void) | null;
  /** 'failed' when ICE or DTLS failed for good (an implementation without it never recovers). */
  readonly connectionState?: string;
  onconnectionstatechange: (() => void) | null;
  ontrack: ((ev: { track: SvcMediaStreamTrack }) => void) | null;
  addTransceiver(track: SvcMediaStreamTrack, init: { direction: string }): unknown;
  createOffer(): Promise<SessionDescription>;
  createAnswer(): Promise<SessionDescription>;
  setLocalDescription(d: SessionDescription): Promise<void>;
  setRemoteDescription(d: SessionDescription): Promise<void>;
  addIceCandidate(c: Record<string, unknown> | null): Promise<void>;
  getStats(): Promise<Map<string, Record<string, unknown>>>;
  close(): void;
}

/** Options of enableCamera / enableScreenShare (getUserMedia / getDisplayMedia constraints). */
export interface SvcVideoOptions {
  /** A camera's deviceId (MediaDeviceInfo.deviceId). */
  deviceId?: string;
  width?: number;
  height?: number;
  frameRate?: number;
}

/** Options of enableMicrophone. */
export interface SvcAudioOptions {
  deviceId?: string;
  echoCancellation?: boolean;
  noiseSuppression?: boolean;
}

/** A track this client publishes. */
export interface SvcLocalTrack {
  readonly source: SvcTrackSource;
  readonly kind: SvcTrackKind;
  /** The server's id, once published (null while (re)publishing). */
  readonly trackId: string | null;
  readonly mediaStreamTrack: SvcMediaStreamTrack;
  readonly muted: boolean;
  /** The publishing PeerConnection's statistics (outbound-rtp…). */
  getStats(): Promise<Map<string, Record<string, unknown>>>;
}

/** Another participant's track, as this client receives it. */
export interface SvcRemoteTrack {
  readonly info: SvcTrackInfo;
  /** The received media, once the subscription is up (null before, or when not subscribed). */
  readonly mediaStreamTrack: SvcMediaStreamTrack | null;
  /** The subscribing PeerConnection's statistics (inbound-rtp framesDecoded, totalSamplesReceived…). */
  getStats(): Promise<Map<string, Record<string, unknown>>>;
}

/** What the media part needs from the client: requests on the live channel. */
export interface MediaTransport {
  request(type: string, data: unknown): Promise<Record<string, unknown>>;
}

interface Publication {
  source: SvcTrackSource;
  track: SvcMediaStreamTrack;
  trackId: string | null;
  pc: SvcPeerConnection | null;
  muted: boolean;
  /** Increases on every (re)publish; a stale attempt stops itself. */
  attempt: number;
  /** PeerConnections that failed in a row without ever connecting. */
  failures: number;
  /** Ends the current attempt: its pending PeerConnection operation rejects. */
  end: (() => void) | null;
}

interface Subscription {
  info: SvcTrackInfo;
  subscriptionId: string | null;
  pc: SvcPeerConnection | null;
  track: SvcMediaStreamTrack | null;
  /** Ends the subscription's negotiation: its pending PeerConnection operation rejects. */
  end: (() => void) | null;
}

const emptyStats = async () => new Map<string, Record<string, unknown>>();

/**
 * A closed PeerConnection's pending operations may never settle (the WebRTC spec abandons them).
 * `until(owner)` gives a function racing each operation against `owner.end()`, after which it
 * rejects, so a negotiation whose PeerConnection was closed meanwhile ends instead of hanging.
 */
function until(owner: { end: (() => void) | null }) {
  const ended = new Promise<never>((_, reject) => {
    owner.end = () => reject(new SvcError('media_failed', 'The PeerConnection was closed.'));
  });
  ended.catch(() => {});
  return <T>(op: Promise<T>) => Promise.race([op, ended]);
}

/** Closes what `owner` holds now, ending its pending negotiation. */
function closePeer(owner: { pc: SvcPeerConnection | null; end: (() => void) | null }) {
  owner.end?.();
  owner.end = null;
  owner.pc?.close();
}

/**
 * A publication or subscription whose PeerConnection failed this many times in a row without
 * connecting is given up (events.failed with media_failed): the network cannot carry it.
 */
const MAX_CONNECTION_FAILURES = 5;

function webrtc() {
  const g = globalThis as unknown as {
    RTCPeerConnection?: new (config: {
      iceServers: SvcIceServer[];
      iceTransportPolicy: 'all' | 'relay';
    }) => SvcPeerConnection;
    navigator?: {
      mediaDevices?: {
        getUserMedia(c: unknown): Promise<MediaStreamLike>;
        getDisplayMedia(c: unknown): Promise<MediaStreamLike>;
      };
    };
  };
  if (!g.RTCPeerConnection) {
    throw new SvcError(
      'media_not_supported',
      'This environment has no WebRTC (RTCPeerConnection).',
    );
  }
  return { PeerConnection: g.RTCPeerConnection, devices: g.navigator?.mediaDevices };
}

/** Maps a getUserMedia/getDisplayMedia failure to a typed SvcError. */
function captureError(err: unknown): SvcError {
  const name = (err as { name?: string })?.name ?? '';
  const message = (err as Error)?.message ?? String(err);
  if (name === 'NotAllowedError' || name === 'SecurityError') {
    return new SvcError('media_permission_denied', message);
  }
  if (name === 'NotFoundError' || name === 'OverconstrainedError') {
    return new SvcError('media_device_not_found', message);
  }
  return new SvcError('media_device_failed', `${name}: ${message}`);
}

/**
 * The media side of a connected client: local publications (one PeerConnection per track),
 * subscriptions to others' tracks (auto-subscribe unless turned off), and the room's track list
 * as the server orders it. Kept by SvcClient across reconnections: after a resume or rejoin it
 * reconciles with the server's snapshot (publishes again what the server lost, subscribes to
 * what is new), so the application's tracks keep playing.
 */
export class MediaSession {
  readonly #tracks = new Map<string, SvcTrackInfo>();
  readonly #pubs = new Map<SvcTrackSource, Publication>();
  readonly #subs = new Map<string, Subscription>();
  /** Subscriptions that ended or failed in a row without connecting, by trackId. */
  readonly #subFailures = new Map<string, number>();
  #iceServers: SvcIceServer[] = [];
  #selfSid = '';
  #closed = false;
  /** Publications and subscriptions being re-established after the server lost them. */
  readonly #recovering = new Set<Publication | Subscription>();

  constructor(
    private readonly transport: MediaTransport,
    private readonly autoSubscribe: boolean,
    private readonly iceTransportPolicy: 'all' | 'relay',
    private readonly events: {
      started(track: SvcTrackInfo): void;
      stopped(track: SvcTrackInfo): void;
      muted(track: SvcTrackInfo): void;
      failed(err: unknown): void;
      /** True when this client starts re-establishing lost media, false when all of it is back. */
      recovering(active: boolean): void;
    },
  ) {}

  #recover(item: Publication | Subscription, active: boolean) {
    const before = this.#recovering.size;
    if (active) this.#recovering.add(item);
    else this.#recovering.delete(item);
    if (before === 0 && this.#recovering.size > 0) this.events.recovering(true);
    else if (before > 0 && this.#recovering.size === 0) this.events.recovering(false);
  }

  /** Whether lost media is being re-established (the client shows RECONNECTING meanwhile). */
  get recovering() {
    return this.#recovering.size > 0;
  }

  /** Every published track in the room (this client's included), in publish order. */
  get tracks(): SvcTrackInfo[] {
    return [...this.#tracks.values()];
  }

  get localTracks(): SvcLocalTrack[] {
    return [...this.#pubs.values()].map((p) => ({
      source: p.source,
      kind: KIND_OF_SOURCE[p.source],
      trackId: p.trackId,
      mediaStreamTrack: p.track,
      muted: p.muted,
      getStats: () => (p.pc ? p.pc.getStats() : emptyStats()),
    }));
  }

  get remoteTracks(): SvcRemoteTrack[] {
    return [...this.#tracks.values()]
      .filter((t) => t.sid !== this.#selfSid)
      .map((info) => {
        const sub = this.#subs.get(info.trackId);
        return {
          info,
          mediaStreamTrack: sub?.track ?? null,
          getStats: () => (sub?.pc ? sub.pc.getStats() : emptyStats()),
        };
      });
  }

  /**
   * Applies a join or rejoin snapshot. Publications the server does not know (a fresh session,
   * an engine restart while away) are published again; new remote tracks are subscribed to.
   */
  applySnapshot(selfSid: string, media: MediaSnapshot) {
    this.#selfSid = selfSid;
    this.#iceServers = media.iceServers;
    this.#tracks.clear();
    for (const t of media.tracks) this.#tracks.set(t.trackId, t);
    for (const [trackId, sub] of this.#subs) {
      if (!this.#tracks.has(trackId)) this.#closeSub(trackId, sub);
    }
    for (const pub of this.#pubs.values()) {
      if (!pub.trackId || !this.#tracks.has(pub.trackId)) this.#republish(pub, 0, true);
    }
    if (this.autoSubscribe) {
      for (const t of this.#tracks.values()) {
        if (t.sid !== selfSid && !this.#subs.has(t.trackId)) this.#subscribeQuietly(t);
      }
    }
  }

  /** Applies a media room event; returns true when it was one. */
  applyEvent(type: string, data: unknown): boolean {
    if (type === 'media.started') {
      const { track } = data as MediaEventData['media.started'];
      this.#tracks.set(track.trackId, track);
      this.events.started(track);
      if (this.autoSubscribe && track.sid !== this.#selfSid && !this.#subs.has(track.trackId)) {
        this.#subscribeQuietly(track);
      }
      return true;
    }
    if (type === 'media.stopped') {
      const { track, reason } = data as MediaEventData['media.stopped'];
      this.#tracks.delete(track.trackId);
      this.#subFailures.delete(track.trackId);
      const sub = this.#subs.get(track.trackId);
      if (sub) this.#closeSub(track.trackId, sub);
      this.events.stopped(track);
      if (track.sid === this.#selfSid && reason !== 'UNPUBLISHED') {
        // The server lost our track (engine restart, hangup, session moved to another node):
        // publish the same source again.
        const pub = [...this.#pubs.values()].find((p) => p.trackId === track.trackId);
        if (pub) this.#republish(pub, 0, true);
      }
      return true;
    }
    if (type === 'media.muted') {
      const { track } = data as MediaEventData['media.muted'];
      this.#tracks.set(track.trackId, track);
      this.events.muted(track);
      return true;
    }
    return false;
  }

  /** A server-side ICE candidate (session frame media.trickle). */
  applyTrickle(id: string, candidate: Record<string, unknown> | null) {
    const pc =
      [...this.#pubs.values()].find((p) => p.trackId === id)?.pc ??
      [...this.#subs.values()].find((s) => s.subscriptionId === id)?.pc;
    void pc?.addIceCandidate(candidate).catch(() => {});
  }

  /** Captures and publishes a source; resolves once the server has answered. */
  async enable(source: SvcTrackSource, options: SvcVideoOptions | SvcAudioOptions = {}) {
    const existing = this.#pubs.get(source);
    if (existing) return existing.trackId;
    const { devices } = webrtc();
    if (!devices) throw new SvcError('media_not_supported', 'navigator.mediaDevices is missing.');
    let stream: MediaStreamLike;
    try {
      if (source === 'screen') {
        const o = options as SvcVideoOptions;
        stream = await devices.getDisplayMedia({ video: videoConstraints(o), audio: false });
      } else if (source === 'camera') {
        stream = await devices.getUserMedia({
          video: videoConstraints(options as SvcVideoOptions),
        });
      } else {
        const o = options as SvcAudioOptions;
        stream = await devices.getUserMedia({
          audio: {
            ...(o.deviceId ? { deviceId: { exact: o.deviceId } } : {}),
            ...(o.echoCancellation !== undefined ? { echoCancellation: o.echoCancellation } : {}),
            ...(o.noiseSuppression !== undefined ? { noiseSuppression: o.noiseSuppression } : {}),
          },
        });
      }
    } catch (err) {
      throw captureError(err);
    }
    const track = stream.getTracks()[0];
    if (!track) throw new SvcError('media_device_failed', 'The capture gave no track.');
    return this.publishTrack(source, track);
  }

  /** Publishes an existing track as `source` (e.g. a canvas capture). */
  async publishTrack(source: SvcTrackSource, track: SvcMediaStreamTrack) {
    const pub: Publication = {
      source,
      track,
      trackId: null,
      pc: null,
      muted: false,
      attempt: 0,
      failures: 0,
      end: null,
    };
    this.#pubs.set(source, pub);
    try {
      await this.#publish(pub);
    } catch (err) {
      if (this.#pubs.get(source) === pub) this.#pubs.delete(source);
      closePeer(pub);
      track.stop();
      throw err;
    }
    return pub.trackId;
  }

  async #publish(pub: Publication) {
    const attempt = ++pub.attempt;
    const { PeerConnection } = webrtc();
    closePeer(pub);
    const pc = new PeerConnection({
      iceServers: this.#iceServers,
      iceTransportPolicy: this.iceTransportPolicy,
    });
    pub.pc = pc;
    pub.trackId = null;
    const step = until(pub);
    const early: (Record<string, unknown> | null)[] = [];
    let trackId: string | null = null;
    pc.onicecandidate = (ev) => {
      const candidate = ev.candidate ? ev.candidate.toJSON() : null;
      if (!trackId) early.push(candidate);
      else this.#trickle(trackId, candidate);
    };
    pc.onconnectionstatechange = () => {
      if (pub.pc !== pc || this.#closed) return;
      if (pc.connectionState === 'connected') pub.failures = 0;
      if (pc.connectionState === 'failed') this.#publicationFailed(pub);
    };
    // A newer attempt (or disable, or leaving) replaces this one and closes its PeerConnection.
    const stale = () => pub.attempt !== attempt || this.#closed;
    try {
      pc.addTransceiver(pub.track, { direction: 'sendonly' });
      const offer = await step(pc.createOffer());
      await step(pc.setLocalDescription(offer));
      const ack = await this.transport.request('media.publish', {
        source: pub.source,
        sdp: offer.sdp,
      });
      if (stale()) {
        pc.close();
        // Published meanwhile: the server's track has no PeerConnection behind it.
        this.transport.request('media.unpublish', { trackId: ack.trackId }).catch(() => {});
        return;
      }
      trackId = String(ack.trackId);
      pub.trackId = trackId;
      await step(pc.setRemoteDescription({ type: 'answer', sdp: String(ack.sdp) }));
    } catch (err) {
      if (stale()) return;
      throw err;
    }
    for (const c of early) this.#trickle(trackId, c);
    if (pub.muted) {
      await this.transport.request('media.mute', { trackId, muted: true }).catch(() => {});
    }
  }

  /**
   * Publishes `pub` again; an engine that is not back yet (`media_unavailable`, `media_failed`)
   * is retried 8 times, 250 ms doubling to 4 s. `lost`: the server lost it (the client shows
   * RECONNECTING until it is published again or given up).
   */
  #republish(pub: Publication, retry = 0, lost = false) {
    if (this.#closed || this.#pubs.get(pub.source) !== pub) {
      this.#recover(pub, false);
      return;
    }
    if (lost) this.#recover(pub, true);
    this.#publish(pub).then(
      () => {
        if (pub.trackId || this.#pubs.get(pub.source) !== pub) this.#recover(pub, false);
      },
      (err) => {
        const code = (err as SvcError).code;
        if ((code === 'media_unavailable' || code === 'media_failed') && retry < 8) {
          setTimeout(() => this.#republish(pub, retry + 1), Math.min(4000, 250 * 2 ** retry));
          return;
        }
        this.#recover(pub, false);
        this.events.failed(err);
      },
    );
  }

  /**
   * The publication's PeerConnection failed here (ICE or DTLS): the server's track is released and
   * the source published again on a new PeerConnection, unless it failed too often in a row.
   */
  #publicationFailed(pub: Publication) {
    const trackId = pub.trackId;
    if (trackId) this.transport.request('media.unpublish', { trackId }).catch(() => {});
    if (++pub.failures >= MAX_CONNECTION_FAILURES) {
      this.#pubs.delete(pub.source);
      pub.attempt++;
      closePeer(pub);
      pub.track.stop();
      this.#recover(pub, false);
      this.events.failed(
        new SvcError(
          'media_failed',
          `The ${pub.source} connection failed ${pub.failures} times in a row.`,
        ),
      );
      return;
    }
    this.#republish(pub, 0, true);
  }

  /**
   * After a resume: the server names the subscriptions it still holds for this session. The
   * others were held by another server node (the session moved): subscribe to them again.
   */
  afterResume(held: readonly string[] | undefined) {
    if (!held) return;
    const keep = new Set(held);
    for (const [trackId, sub] of [...this.#subs]) {
      if (!sub.subscriptionId || keep.has(sub.subscriptionId)) continue;
      this.#closeSub(trackId, sub);
      const info = this.#tracks.get(trackId);
      if (!info) continue;
      this.#recover(sub, true);
      this.subscribe(trackId)
        .catch((err) => {
          if ((err as SvcError).code !== 'track_not_found') this.events.failed(err);
        })
        .finally(() => this.#recover(sub, false));
    }
  }

  #trickle(id: string, candidate: Record<string, unknown> | null) {
    this.transport.request('media.trickle', { id, candidate }).catch(() => {});
  }

  /** Stops publishing a source and releases its capture. */
  async disable(source: SvcTrackSource) {
    const pub = this.#pubs.get(source);
    if (!pub) return;
    this.#pubs.delete(source);
    this.#recover(pub, false);
    pub.attempt++;
    const trackId = pub.trackId;
    closePeer(pub);
    pub.track.stop();
    if (trackId) {
      await this.transport.request('media.unpublish', { trackId }).catch((err: SvcError) => {
        if (err.code !== 'track_not_found' && err.code !== 'not_connected') throw err;
      });
    }
  }

  /** Mutes or unmutes a published source without renegotiation (others see media.muted). */
  async setMuted(source: SvcTrackSource, muted: boolean) {
    const pub = this.#pubs.get(source);
    if (!pub) return;
    pub.muted = muted;
    pub.track.enabled = !muted;
    if (pub.trackId) await this.transport.request('media.mute', { trackId: pub.trackId, muted });
  }

  /** Subscribes to a remote track (done by itself unless autoSubscribe is off). */
  async subscribe(trackId: string) {
    const info = this.#tracks.get(trackId);
    if (!info) throw new SvcError('track_not_found');
    if (this.#subs.has(trackId)) return;
    const sub: Subscription = { info, subscriptionId: null, pc: null, track: null, end: null };
    this.#subs.set(trackId, sub);
    try {
      const ack = await this.transport.request('media.subscribe', { trackId });
      if (this.#subs.get(trackId) !== sub) {
        await this.transport.request('media.unsubscribe', { subscriptionId: ack.subscriptionId });
        return;
      }
      const subscriptionId = String(ack.subscriptionId);
      sub.subscriptionId = subscriptionId;
      const { PeerConnection } = webrtc();
      const pc = new PeerConnection({
        iceServers: this.#iceServers,
        iceTransportPolicy: this.iceTransportPolicy,
      });
      sub.pc = pc;
      const step = until(sub);
      let answered = false;
      const early: (Record<string, unknown> | null)[] = [];
      pc.onicecandidate = (ev) => {
        const candidate = ev.candidate ? ev.candidate.toJSON() : null;
        if (!answered) early.push(candidate);
        else this.#trickle(subscriptionId, candidate);
      };
      pc.ontrack = (ev) => {
        sub.track = ev.track;
      };
      pc.onconnectionstatechange = () => {
        if (this.#subs.get(trackId) !== sub) return;
        if (pc.connectionState === 'connected') this.#subFailures.delete(trackId);
        if (pc.connectionState === 'failed') this.#subscriptionEnded(trackId, sub, true);
      };
      await step(pc.setRemoteDescription({ type: 'offer', sdp: String(ack.sdp) }));
      const answer = await step(pc.createAnswer());
      await step(pc.setLocalDescription(answer));
      await this.transport.request('media.answer', { subscriptionId, sdp: answer.sdp });
      answered = true;
      for (const c of early) this.#trickle(subscriptionId, c);
    } catch (err) {
      // Ended meanwhile (unsubscribed, the track stopped, its PeerConnection failed): not an error.
      if (this.#subs.get(trackId) !== sub) return;
      this.#closeSub(trackId, sub);
      throw err;
    }
  }

  /** Session frame media.ended: the server dropped the subscription `id` (its engine hung up). */
  applyEnded(id: string) {
    for (const [trackId, sub] of this.#subs) {
      if (sub.subscriptionId === id) this.#subscriptionEnded(trackId, sub, false);
    }
  }

  /**
   * A subscription's PeerConnection is gone: the server ended it, or it failed here (`release`:
   * the server still holds it). The track is subscribed to again on a new PeerConnection while
   * it is published, unless it failed too often in a row.
   */
  #subscriptionEnded(trackId: string, sub: Subscription, release: boolean) {
    this.#closeSub(trackId, sub);
    if (this.#closed) return;
    if (release && sub.subscriptionId) {
      this.transport
        .request('media.unsubscribe', { subscriptionId: sub.subscriptionId })
        .catch(() => {});
    }
    const failures = (this.#subFailures.get(trackId) ?? 0) + 1;
    this.#subFailures.set(trackId, failures);
    if (failures >= MAX_CONNECTION_FAILURES) {
      this.#subFailures.delete(trackId);
      this.events.failed(
        new SvcError(
          'media_failed',
          `The subscription to ${trackId} failed ${failures} times in a row.`,
        ),
      );
      return;
    }
    this.#recover(sub, true);
    this.subscribe(trackId)
      .catch((err) => {
        if ((err as SvcError).code !== 'track_not_found') this.events.failed(err);
      })
      .finally(() => this.#recover(sub, false));
  }

  #subscribeQuietly(track: SvcTrackInfo) {
    this.subscribe(track.trackId).catch((err) => {
      // A track that stopped meanwhile is not a failure.
      if ((err as SvcError).code !== 'track_not_found') this.events.failed(err);
    });
  }

  /** Stops receiving a remote track. */
  async unsubscribe(trackId: string) {
    const sub = this.#subs.get(trackId);
    if (!sub) return;
    this.#closeSub(trackId, sub);
    if (sub.subscriptionId) {
      await this.transport
        .request('media.unsubscribe', { subscriptionId: sub.subscriptionId })
        .catch(() => {});
    }
  }

  #closeSub(trackId: string, sub: Subscription) {
    if (this.#subs.get(trackId) === sub) this.#subs.delete(trackId);
    closePeer(sub);
    sub.track?.stop();
  }

  /** Closes every PeerConnection and stops every capture (the client left the room). */
  close() {
    this.#closed = true;
    this.#recovering.clear();
    for (const pub of this.#pubs.values()) {
      closePeer(pub);
      pub.track.stop();
    }
    this.#pubs.clear();
    for (const [id, sub] of this.#subs) this.#closeSub(id, sub);
    this.#tracks.clear();
  }
}

function videoConstraints(o: SvcVideoOptions) {
  const c: Record<string, unknown> = {};
  if (o.deviceId) c.deviceId = { exact: o.deviceId };
  if (o.width) c.width = { ideal: o.width };
  if (o.height) c.height = { ideal: o.height };
  if (o.frameRate) c.frameRate = { ideal: o.frameRate };
  return Object.keys(c).length > 0 ? c : true;
}

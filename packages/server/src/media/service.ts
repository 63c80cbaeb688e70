import { createHash, createHmac } from 'node:crypto';
import {
  type ErrorCode,
  KIND_OF_SOURCE,
  type MediaSnapshot,
  type SvcLiveType,
  type SvcMediaPermissions,
  type SvcTrackSource,
  TRACK_SOURCES,
} from '@svc/protocol';
import { newId } from '../ids.ts';
import type { LiveRoom, LiveTrack, RoomStore, StoredRoomEvent } from '../realtime/room-store.ts';
import { type RoomClaims, type RoomService, trackInfo } from '../realtime/rooms.ts';
import { iceServersFor, type MediaConfig } from './config.ts';
import {
  type HandleEvent,
  type MediaEngine,
  MediaEngineError,
  type MediaHealth,
} from './engine.ts';

/** An expected refusal of a media request: its registry code and a message for the client. */
export class MediaRequestError extends Error {
  constructor(
    readonly code: ErrorCode,
    message?: string,
  ) {
    super(message ?? code);
  }
}

/** Who is asking: the joined session of a signaling connection. */
export interface MediaCaller {
  claims: RoomClaims;
  sid: string;
}

/** What a participant may do with media: the room's liveType, narrowed by the token. */
export function mediaPermissions(
  liveType: SvcLiveType,
  isHost: boolean,
  canPublish: boolean,
  canSubscribe: boolean,
): SvcMediaPermissions {
  let sources: SvcTrackSource[] = [...TRACK_SOURCES];
  if (!canPublish) sources = [];
  else if (liveType === 'AUDIO_CONFERENCE') sources = ['microphone'];
  else if (liveType === 'LIVE_STREAMING' && !isHost) sources = [];
  return { canPublishSources: sources, canSubscribe };
}

/**
 * Checks that `sdp` is one SDP of one m-line of `kind` (what one track's PeerConnection sends).
 * Returns a reason when it is not. The engine parses it fully afterwards.
 */
export function checkSingleTrackSdp(sdp: string, kind: 'audio' | 'video'): string | null {
  if (!sdp.startsWith('v=0')) return 'The SDP must start with v=0.';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(sdp)) {
    return 'The SDP contains control characters.';
  }
  const lines = sdp.split(/\r?\n/).filter((l) => l.length > 0);
  if (lines.some((l) => !/^[a-z]=/.test(l))) return 'Every SDP line must be <letter>=<value>.';
  const media = lines.filter((l) => l.startsWith('m='));
  if (media.length !== 1) return `The SDP must have exactly one m-line (it has ${media.length}).`;
  const type = media[0]!.slice(2).split(' ')[0];
  if (type !== kind) return `The m-line must be ${kind} (it is ${type}).`;
  if (!lines.some((l) => l.startsWith('a=fingerprint:'))) return 'The SDP has no DTLS fingerprint.';
  if (!lines.some((l) => l.startsWith('a=ice-ufrag:'))) return 'The SDP has no ICE credentials.';
  return null;
}

/** The SFU room of a Svc room: a number derived from its instance id (below 2^48). */
export function engineRoomKey(rid: string) {
  return Number.parseInt(createHash('sha256').update(rid).digest('hex').slice(0, 12), 16) + 1;
}

interface Publication {
  kind: 'pub';
  engine: string;
  id: string;
  rid: string;
  sid: string;
  handleId: string;
}

interface Subscription {
  kind: 'sub';
  engine: string;
  id: string;
  rid: string;
  sid: string;
  trackId: string;
  handleId: string;
  trackKind: 'audio' | 'video';
}

type Leg = Publication | Subscription;

interface FollowedRoom {
  unfollow: Promise<() => Promise<void>>;
}

/**
 * The media area: turns media requests of the signaling channel into engine calls and room
 * events. Tracks live in the room's shared state (every node sees them, in seq order); the
 * engine handles this node created (a publisher per published track, a subscriber per
 * subscription) are kept here, by track or subscription id. This node follows the rooms it holds
 * handles in and frees them when their track stops, their participant leaves or the room ends.
 */
export class MediaService {
  private legs = new Map<string, Leg>();
  private byHandle = new Map<string, Leg>();
  private followed = new Map<string, FollowedRoom>();
  private reportedOff = false;
  /** Told of every track published (the recordings note who published which SFU feed). */
  onTrackPublished: ((rid: string, track: LiveTrack) => Promise<void>) | null = null;

  constructor(
    /** The SFU instances by key (a Janus URL, or `embedded`); empty when media is off. */
    private readonly engines: Map<string, MediaEngine>,
    private readonly cfg: MediaConfig,
    private readonly rooms: RoomService,
    private readonly store: RoomStore,
    private readonly nodeId: string,
    private readonly now: () => number,
    private readonly log: { info(o: object, m: string): void; warn(o: object, m: string): void },
    /** Sends a session frame to a participant's socket on this node, if it is here. */
    private readonly sendToSid: (rid: string, sid: string, frame: string) => void,
  ) {
    for (const [key, engine] of engines) {
      engine.onHandleEvent = (ev) => void this.onHandleEvent(ev).catch(() => {});
      engine.onRestart = () => void this.stopEngineTracks(key).catch(() => {});
      // With other instances to move to, a lost instance's tracks stop at once (their clients
      // publish again and land elsewhere); a lone engine's stop when it is back.
      engine.onLost = () => {
        if (this.engines.size > 1) void this.stopEngineTracks(key).catch(() => {});
      };
    }
    rooms.mediaSnapshot = (room, claims) => this.snapshot(room, claims);
  }

  /** Says once, in the log, that media is off and how to turn it on. */
  reportIfOff() {
    if (this.engines.size > 0 || this.reportedOff) return;
    this.reportedOff = true;
    this.log.warn({}, `media: off. ${this.health().detail}`);
  }

  health(): MediaHealth {
    const all = [...this.engines.values()].map((e) => e.health());
    if (all.length === 1) return all[0]!;
    if (all.length > 1) {
      const up = all.filter((h) => h.state === 'up').length;
      return {
        state: up > 0 ? 'up' : 'down',
        detail: `${up} of ${all.length} Janus instances up: ${all.map((h) => h.detail).join('; ')}`,
        restarts: all.reduce((n, h) => n + h.restarts, 0),
      };
    }
    return {
      state: 'off' as const,
      detail:
        this.cfg.mode === 'off'
          ? 'SVC_MEDIA=off.'
          : 'No Janus found: install it (Debian: apt-get install janus) or set SVC_JANUS_BINARY or SVC_JANUS_URLS.',
      restarts: 0,
    };
  }

  /** Resolves once the engine is up (tests, startup probes); rejects when media is off or after `timeoutMs`. */
  async ready(timeoutMs = 10_000) {
    if (this.engines.size === 0)
      throw new MediaRequestError('media_unavailable', this.health().detail);
    await Promise.all([...this.engines.values()].map((e) => e.ready(timeoutMs)));
  }

  /** The (first) engine (tests kill its process and read its admin API). */
  get engineForTests() {
    return [...this.engines.values()][0] ?? null;
  }

  /** The engine's handle ids held by this node (tests compare them with Janus's own count). */
  handleIds() {
    return [...this.engines.values()].flatMap((e) => e.handles());
  }

  /** The ids of the subscriptions this node holds for session `sid` (sent on resume). */
  subscriptionsOf(rid: string, sid: string): string[] {
    const ids: string[] = [];
    for (const leg of this.legs.values()) {
      if (leg.kind === 'sub' && leg.rid === rid && leg.sid === sid) ids.push(leg.id);
    }
    return ids;
  }

  snapshot(room: LiveRoom, claims: RoomClaims): MediaSnapshot {
    return {
      available: this.engines.size > 0,
      iceServers: iceServersFor(this.cfg, claims.userId, this.now(), (secret, text) =>
        createHmac('sha1', secret).update(text).digest('base64'),
      ),
      permissions: mediaPermissions(
        room.liveType,
        claims.isHost,
        claims.canPublish,
        claims.canSubscribe,
      ),
      tracks: (room.tracks ?? []).map(trackInfo),
    };
  }

  private isUp(key: string) {
    return this.engines.get(key)?.health().state === 'up';
  }

  /** The engine `key` when it is up. */
  private needEngine(key: string): MediaEngine {
    const engine = this.engines.get(key);
    if (!engine) throw new MediaRequestError('media_unavailable', this.health().detail);
    if (engine.health().state !== 'up') {
      throw new MediaRequestError('media_unavailable', engine.health().detail);
    }
    return engine;
  }

  /**
   * Where the room's media goes: its placed instance while that answers, else the least loaded
   * instance that answers (placed in the room's state so every node routes the room there).
   */
  private async placement(rid: string): Promise<string> {
    const up = [...this.engines.keys()].filter((k) => this.isUp(k));
    if (up.length === 0) throw new MediaRequestError('media_unavailable', this.health().detail);
    if (this.engines.size === 1) return up[0]!;
    const room = await this.store.peek(rid);
    if (room?.mediaEngine && up.includes(room.mediaEngine)) return room.mediaEngine;
    const loads = await Promise.all(
      up.map((k) =>
        this.engines
          .get(k)!
          .load()
          .then((n) => ({ k, n }))
          .catch(() => null),
      ),
    );
    const best = loads
      .filter((x): x is { k: string; n: number } => x !== null)
      .sort((a, b) => a.n - b.n)[0];
    if (!best) throw new MediaRequestError('media_unavailable', this.health().detail);
    const placed = await this.rooms.placeMedia(rid, (k) => this.isUp(k), best.k);
    if (!placed) throw new MediaRequestError('not_joined');
    return placed;
  }

  private engineFailure(err: unknown): never {
    if (err instanceof MediaRequestError) throw err;
    if (err instanceof MediaEngineError) {
      throw new MediaRequestError(
        err.invalidSdp ? 'media_invalid_sdp' : 'media_failed',
        err.message,
      );
    }
    throw err;
  }

  /** Handles one media request; resolves with the ack's data or rejects with MediaRequestError. */
  async handle(caller: MediaCaller, type: string, data: unknown): Promise<Record<string, unknown>> {
    switch (type) {
      case 'media.publish':
        return this.publish(caller, data as { source: SvcTrackSource; sdp: string });
      case 'media.unpublish':
        return this.unpublish(caller, (data as { trackId: string }).trackId);
      case 'media.mute': {
        const d = data as { trackId: string; muted: boolean };
        const res = await this.rooms.setTrackMuted(
          caller.claims.rid,
          d.trackId,
          d.muted,
          caller.sid,
          caller.sid,
        );
        if (!res) throw new MediaRequestError('track_not_found');
        return { seq: res.seq };
      }
      case 'media.subscribe':
        return this.subscribe(caller, (data as { trackId: string }).trackId);
      case 'media.answer':
        return this.answer(caller, data as { subscriptionId: string; sdp: string });
      case 'media.unsubscribe': {
        const leg = this.ownLeg(caller, (data as { subscriptionId: string }).subscriptionId);
        if (leg.kind !== 'sub') throw new MediaRequestError('subscription_not_found');
        await this.dropLeg(leg);
        return {};
      }
      case 'media.trickle': {
        const d = data as { id: string; candidate: Record<string, unknown> | null };
        const leg = this.ownLeg(caller, d.id);
        await this.needEngine(leg.engine)
          .trickle(leg.handleId, d.candidate)
          .catch((err) => this.engineFailure(err));
        return {};
      }
    }
    throw new MediaRequestError('unknown_message_type');
  }

  private ownLeg(caller: MediaCaller, id: string): Leg {
    const leg = this.legs.get(id);
    if (!leg || leg.sid !== caller.sid || leg.rid !== caller.claims.rid) {
      throw new MediaRequestError('subscription_not_found');
    }
    return leg;
  }

  private async publish(caller: MediaCaller, d: { source: SvcTrackSource; sdp: string }) {
    const { claims, sid } = caller;
    const room = await this.store.peek(claims.rid);
    if (!room) throw new MediaRequestError('not_joined');
    const perms = mediaPermissions(
      room.liveType,
      claims.isHost,
      claims.canPublish,
      claims.canSubscribe,
    );
    if (!perms.canPublishSources.includes(d.source)) {
      throw new MediaRequestError(
        'media_not_allowed',
        `This participant may not publish ${d.source} in a ${room.liveType} room${
          claims.canPublish ? '' : ' (the token has canPublish: false)'
        }.`,
      );
    }
    const kind = KIND_OF_SOURCE[d.source];
    const bad = checkSingleTrackSdp(d.sdp, kind);
    if (bad) throw new MediaRequestError('media_invalid_sdp', bad);
    const engineKey = await this.placement(claims.rid);
    const engine = this.needEngine(engineKey);
    const roomKey = engineRoomKey(claims.rid);
    await this.followRoom(claims.rid);
    const pub = await engine
      .publish(roomKey, `${claims.userId}`, d.sdp)
      .catch((err) => this.engineFailure(err));
    // A microphone the room controller has muted (a moderator's mute, or the user's own) starts
    // muted in the SFU too: publishing again (a new device, a republish after a move or an
    // engine restart) does not get around a moderator's mute.
    const forcedMute =
      kind === 'audio' &&
      (room.controller?.media.some((m) => m.userId === claims.userId && m.microphoneMuted) ??
        false);
    if (forcedMute) {
      await engine.moderate(roomKey, pub.feedId, pub.mid, true).catch(async (err) => {
        await engine.detach(pub.handleId).catch(() => {});
        this.engineFailure(err);
      });
    }
    const trackId = newId('TR', this.now());
    const leg: Publication = {
      kind: 'pub',
      engine: engineKey,
      id: trackId,
      rid: claims.rid,
      sid,
      handleId: pub.handleId,
    };
    this.addLeg(leg);
    const track: LiveTrack = {
      trackId,
      sid,
      userId: claims.userId,
      kind,
      source: d.source,
      muted: forcedMute,
      feedId: pub.feedId,
      mid: pub.mid,
      nodeId: this.nodeId,
      engine: engineKey,
    };
    const seq = await this.rooms.addTrack(claims.rid, track).catch(async (err) => {
      await this.dropLeg(leg);
      throw err;
    });
    if (seq === null) {
      await this.dropLeg(leg);
      throw new MediaRequestError('not_joined');
    }
    await this.onTrackPublished?.(claims.rid, track).catch((err) =>
      this.log.warn({ err }, 'media: noting a published track failed'),
    );
    return { trackId, sdp: pub.answerSdp };
  }

  private async unpublish(caller: MediaCaller, trackId: string) {
    const removed = await this.rooms.removeTracks(
      caller.claims.rid,
      (t) => t.trackId === trackId && t.sid === caller.sid,
      'UNPUBLISHED',
    );
    if (removed.length === 0) throw new MediaRequestError('track_not_found');
    const leg = this.legs.get(trackId);
    if (leg) await this.dropLeg(leg);
    return {};
  }

  private async subscribe(caller: MediaCaller, trackId: string) {
    const { claims, sid } = caller;
    if (!claims.canSubscribe) {
      throw new MediaRequestError('media_not_allowed', 'The token has canSubscribe: false.');
    }
    const track = await this.rooms.findTrack(claims.rid, trackId);
    if (!track) throw new MediaRequestError('track_not_found');
    if (track.sid === sid) {
      throw new MediaRequestError(
        'media_not_allowed',
        'A participant does not subscribe to its own track.',
      );
    }
    const engine = this.needEngine(track.engine);
    await this.followRoom(claims.rid);
    const sub = await engine
      .subscribe(engineRoomKey(claims.rid), track.feedId, this.cfg.subscribeWaitMs)
      .catch((err) => this.engineFailure(err));
    const leg: Subscription = {
      kind: 'sub',
      engine: track.engine,
      id: newId('SU', this.now()),
      rid: claims.rid,
      sid,
      trackId,
      handleId: sub.handleId,
      trackKind: track.kind,
    };
    this.addLeg(leg);
    // The track may have stopped while subscribing; its media.stopped found no leg to end.
    if (!(await this.rooms.findTrack(claims.rid, trackId))) {
      await this.dropLeg(leg);
      throw new MediaRequestError('track_not_found');
    }
    return { subscriptionId: leg.id, trackId, sdp: sub.offerSdp };
  }

  private async answer(caller: MediaCaller, d: { subscriptionId: string; sdp: string }) {
    const leg = this.ownLeg(caller, d.subscriptionId);
    if (leg.kind !== 'sub') throw new MediaRequestError('subscription_not_found');
    const bad = checkSingleTrackSdp(d.sdp, leg.trackKind);
    if (bad) throw new MediaRequestError('media_invalid_sdp', bad);
    await this.needEngine(leg.engine)
      .answer(leg.handleId, d.sdp)
      .catch((err) => this.engineFailure(err));
    return {};
  }

  /**
   * Server-side mute of a published track (for moderators): the SFU stops forwarding it and the
   * room sees media.muted with `by`. Null when there is no such track.
   */
  async moderateTrack(rid: string, trackId: string, muted: boolean, by: string) {
    const track = await this.rooms.findTrack(rid, trackId);
    if (!track) return null;
    await this.needEngine(track.engine)
      .moderate(engineRoomKey(rid), track.feedId, track.mid, muted)
      .catch((err) => this.engineFailure(err));
    return this.rooms.setTrackMuted(rid, trackId, muted, by, null);
  }

  /**
   * Starts recording the room's media into `dir` on the engine that carries the room (placing it
   * when it has none yet); resolves with that engine's key.
   */
  async startRecording(rid: string, dir: string): Promise<string> {
    const key = await this.placement(rid);
    await this.needEngine(key)
      .recordRoom(engineRoomKey(rid), dir)
      .catch((err) => this.engineFailure(err));
    this.keyframesSoon(rid);
    return key;
  }

  /**
   * Asks this node's publishers of the room for a keyframe, a little over a second from now: a
   * recording's video is decodable only from a keyframe, and the SFU's own request when the
   * recording starts is dropped when it asked the same sender within the last second (a new
   * subscriber did).
   */
  keyframesSoon(rid: string) {
    const timer = setTimeout(() => {
      for (const leg of this.legs.values()) {
        if (leg.kind !== 'pub' || leg.rid !== rid) continue;
        void this.engines
          .get(leg.engine)
          ?.keyframe(leg.handleId)
          .catch(() => {});
      }
    }, 1100);
    timer.unref();
  }

  /** Stops recording the room on engine `key` (nothing when that engine is gone). */
  async stopRecording(rid: string, key: string) {
    const engine = this.engines.get(key);
    if (engine?.health().state !== 'up') return;
    await engine.recordRoom(engineRoomKey(rid), null).catch((err) => this.engineFailure(err));
  }

  // ---- Handles' lifetime --------------------------------------------------------------------

  private addLeg(leg: Leg) {
    this.legs.set(leg.id, leg);
    this.byHandle.set(leg.handleId, leg);
  }

  private async dropLeg(leg: Leg) {
    if (this.legs.get(leg.id) !== leg) return;
    this.legs.delete(leg.id);
    this.byHandle.delete(leg.handleId);
    await this.engines
      .get(leg.engine)
      ?.detach(leg.handleId)
      .catch(() => {});
  }

  private async followRoom(rid: string) {
    if (this.followed.has(rid)) {
      await this.followed.get(rid)!.unfollow;
      return;
    }
    const entry: FollowedRoom = {
      unfollow: this.store.follow(rid, (ev) => void this.onRoomEvent(rid, ev).catch(() => {})),
    };
    this.followed.set(rid, entry);
    await entry.unfollow;
  }

  private async onRoomEvent(rid: string, ev: StoredRoomEvent) {
    if (ev.type === 'media.stopped') {
      const { track } = JSON.parse(ev.frame).data as { track: { trackId: string } };
      for (const leg of [...this.legs.values()]) {
        if (leg.rid !== rid) continue;
        if (leg.id === track.trackId || (leg.kind === 'sub' && leg.trackId === track.trackId)) {
          await this.dropLeg(leg);
        }
      }
    } else if (ev.type === 'participant.left') {
      const { participant } = JSON.parse(ev.frame).data as { participant: { sid: string } };
      for (const leg of [...this.legs.values()]) {
        if (leg.rid === rid && leg.sid === participant.sid) await this.dropLeg(leg);
      }
    } else if (ev.type === 'room.deleted' || ev.type === 'room.ended') {
      for (const leg of [...this.legs.values()]) if (leg.rid === rid) await this.dropLeg(leg);
      const f = this.followed.get(rid);
      this.followed.delete(rid);
      if (f) await (await f.unfollow)();
      for (const engine of this.engines.values()) {
        await engine.destroyRoom(engineRoomKey(rid)).catch(() => {});
      }
    }
  }

  private async onHandleEvent(ev: HandleEvent) {
    const leg = this.byHandle.get(ev.handleId);
    if (!leg) return;
    if (ev.type === 'trickle') {
      const frame = {
        type: 'media.trickle',
        seq: 0,
        ts: this.now(),
        data: { id: leg.id, candidate: ev.candidate },
      };
      this.sendToSid(leg.rid, leg.sid, JSON.stringify(frame));
      return;
    }
    // The PeerConnection is gone (ICE or DTLS failed, the client closed it): a publisher's
    // track stops (media.stopped HANGUP, and its client publishes again); a subscriber is told
    // its subscription ended (media.ended), and its client subscribes again.
    if (leg.kind === 'pub') {
      await this.rooms.removeTracks(leg.rid, (t) => t.trackId === leg.id, 'HANGUP');
    }
    const dropped = this.legs.get(leg.id) === leg;
    await this.dropLeg(leg);
    if (leg.kind === 'sub' && dropped) {
      const data = { id: leg.id, trackId: leg.trackId };
      const frame = { type: 'media.ended', seq: 0, ts: this.now(), data };
      this.sendToSid(leg.rid, leg.sid, JSON.stringify(frame));
    }
  }

  /**
   * Engine `key` lost every handle (it died or restarted): the tracks this node published on it
   * stop with ENGINE_RESTARTED, and its rooms' placement is given up by the next publish.
   */
  private async stopEngineTracks(key: string) {
    const legs = [...this.legs.values()].filter((l) => l.engine === key);
    const rids = new Set(legs.map((l) => l.rid));
    for (const leg of legs) {
      this.legs.delete(leg.id);
      this.byHandle.delete(leg.handleId);
    }
    for (const rid of rids) {
      await this.rooms
        .removeTracks(rid, (t) => t.nodeId === this.nodeId && t.engine === key, 'ENGINE_RESTARTED')
        .catch((err) =>
          this.log.warn({ err, rid }, 'media: ending tracks of a lost engine failed'),
        );
    }
  }

  async close() {
    for (const f of this.followed.values()) await (await f.unfollow)().catch(() => {});
    this.followed.clear();
    await Promise.allSettled([...this.engines.values()].map((e) => e.close()));
  }
}

import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import {
  APP_TYPE_REGEX,
  CLOSE_CODES,
  ERROR_CODES,
  type ErrorCode,
  type LeaveReason,
  MediaAnswerDataSchema,
  MediaMuteDataSchema,
  MediaPublishDataSchema,
  MediaSubscribeDataSchema,
  MediaTrickleDataSchema,
  MediaUnpublishDataSchema,
  MediaUnsubscribeDataSchema,
  MessageSendDataSchema,
  PingDataSchema,
  REALTIME_TOKEN_AUDIENCE,
  RoomUpdateMetadataDataSchema,
  SessionJoinDataSchema,
  SessionLeaveDataSchema,
  SessionResumeDataSchema,
} from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { findInputFault } from '../http/input-check.ts';
import { MediaRequestError, type MediaService } from '../media/service.ts';
import { unavailableDependency } from '../unavailable.ts';
import type { RealtimeConfig } from './config.ts';
import { qualityFromRtt } from './controller/quality.ts';
import type { RealtimeDeps } from './deps.ts';
import type { RoomStore, StoredRoomEvent } from './room-store.ts';
import type { RoomClaims, RoomService } from './rooms.ts';

const compile = <T extends TSchema>(schema: T) => TypeCompiler.Compile(schema);
/** Frame type → validator. A Map: a client's `type` ("__proto__", "toString") finds only these. */
const validators = new Map<string, ReturnType<typeof compile>>([
  ['session.join', compile(SessionJoinDataSchema)],
  ['session.resume', compile(SessionResumeDataSchema)],
  ['session.leave', compile(SessionLeaveDataSchema)],
  ['message.send', compile(MessageSendDataSchema)],
  ['room.update_metadata', compile(RoomUpdateMetadataDataSchema)],
  ['ping', compile(PingDataSchema)],
  ['media.publish', compile(MediaPublishDataSchema)],
  ['media.unpublish', compile(MediaUnpublishDataSchema)],
  ['media.mute', compile(MediaMuteDataSchema)],
  ['media.subscribe', compile(MediaSubscribeDataSchema)],
  ['media.answer', compile(MediaAnswerDataSchema)],
  ['media.unsubscribe', compile(MediaUnsubscribeDataSchema)],
  ['media.trickle', compile(MediaTrickleDataSchema)],
]);

const TEXT_FRAME = { binary: false } as const;

/** Unreadable frames in a row before the connection is closed with 4400. */
const INVALID_STREAK_LIMIT = 20;
/** Rate-limited frames in a row before the connection is closed with 4429. */
const REFUSED_STREAK_LIMIT = 100;
/** Frames held while the token is being verified; later ones are refused `rate_limited`. */
const EARLY_LIMIT = 16;
/** Room events a node keeps per followed room, to bridge a session's join and its first event. */
const NODE_RING = 512;
/**
 * Bytes a socket may leave unsent (its reader is slower than its room) before it is closed with
 * 4010 and its session is dropped: a client that stops reading cannot make the node hold its
 * room's traffic without bound.
 */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;
/** The channel on which node `nodeId` hears which of its sockets a resume elsewhere replaced. */
const replacedChannel = (nodeId: string) => `rt:replaced:${nodeId}`;

type ConnState = 'verifying' | 'pending' | 'waiting' | 'joined' | 'closed';

/** The `id` of a request frame, when it has a valid one (to answer a frame that is not handled). */
function requestId(raw: Buffer | ArrayBuffer | Buffer[]): string | undefined {
  try {
    const id = (JSON.parse(raw.toString()) as { id?: unknown } | null)?.id;
    return typeof id === 'string' && id.length >= 1 && id.length <= 64 ? id : undefined;
  } catch {
    return undefined;
  }
}

/** Reads the state afresh (it changes across awaits, which TypeScript's narrowing ignores). */
const isClosed = (conn: { state: ConnState }) => conn.state === 'closed';

interface Request {
  id: string;
  type: string;
  data: unknown;
}

class Connection {
  readonly id = randomBytes(9).toString('base64url');
  state: ConnState = 'verifying';
  claims: RoomClaims | null = null;
  sid: string | null = null;
  /** The last room seq sent to this socket; a socket never gets an event twice or out of order. */
  lastDelivered = 0;
  /** Whether the socket answered the last WebSocket ping (only pongs count, not frames sent). */
  alive = true;
  tokens: number;
  refilledAtMs: number;
  invalidStreak = 0;
  refusedStreak = 0;
  /** Requests are handled one after another, in arrival order. */
  queue: Promise<void> = Promise.resolve();
  early: { data: Buffer | ArrayBuffer | Buffer[]; isBinary: boolean }[] = [];
  /** The ids (undefined when unreadable) of frames beyond EARLY_LIMIT, refused once verified. */
  earlyRefused: (string | undefined)[] = [];
  timer: NodeJS.Timeout | null = null;
  follower: Follower | null = null;
  /** Why the connection waits (a host's arrival, or a host's approval in the waiting room). */
  waitingFor: 'NO_HOST' | 'APPROVAL' | null = null;
  /** The last signaling round trip (ms) and when its pong came (for network quality). */
  rttMs: number | null = null;
  pongAtMs = 0;
  /** The last ping sent (a random payload): only the pong echoing it counts as a round trip. */
  ping: { payload: string; sentAtMs: number } | null = null;

  /** Pings the socket; its pong measures the round trip. */
  sendPing(nowMs: number) {
    this.ping = { payload: randomBytes(9).toString('base64url'), sentAtMs: nowMs };
    this.ws.ping(this.ping.payload);
  }

  /** Whether the socket is corked until the end of this turn of the event loop. */
  corked = false;

  constructor(
    readonly ws: WebSocket,
    burst: number,
    nowMs: number,
    /** The upgraded TCP socket under `ws` (null for sockets not accepted from HTTP). */
    readonly tcp: Duplex | null = null,
  ) {
    this.tokens = burst;
    this.refilledAtMs = nowMs;
  }
}

interface Follower {
  rid: string;
  conns: Set<Connection>;
  /** The last seq this node delivered for the room (null before the first). */
  lastSeq: number | null;
  ring: StoredRoomEvent[];
  /** Events held while a gap is being filled from the log. */
  held: StoredRoomEvent[] | null;
  ready: Promise<void>;
  unfollow: (() => Promise<void>) | null;
}

const CLOSE_FOR: Partial<Record<LeaveReason, number>> = {
  DUPLICATE_IDENTITY: CLOSE_CODES.DUPLICATE_IDENTITY,
  ROOM_DELETED: CLOSE_CODES.ROOM_DELETED,
  ROOM_ENDED: CLOSE_CODES.ROOM_ENDED,
  KICKED: CLOSE_CODES.KICKED,
  TOKEN_EXPIRED: CLOSE_CODES.TOKEN_EXPIRED,
  LEFT: CLOSE_CODES.NORMAL,
  DISCONNECTED: CLOSE_CODES.TIMEOUT,
  SERVER_SHUTDOWN: CLOSE_CODES.GOING_AWAY,
};

const CODE_FOR: Partial<Record<LeaveReason, ErrorCode>> = {
  KICKED: 'kicked',
  DUPLICATE_IDENTITY: 'duplicate_identity',
  ROOM_DELETED: 'room_deleted',
  ROOM_ENDED: 'room_ended',
  TOKEN_EXPIRED: 'token_expired',
};

/**
 * This node's side of the signaling channel: its sockets, the rooms it follows (one follower per
 * room with local sockets), and the requests those sockets send. All room changes go through
 * {@link RoomService}; this class only talks to sockets and routes events to them.
 */
export class SignalingHub {
  readonly nodeId: string;
  private conns = new Set<Connection>();
  private followers = new Map<string, Follower>();
  private pinger: NodeJS.Timeout;
  private sweeper: NodeJS.Timeout;
  private qualityTimer: NodeJS.Timeout;
  private sweeping = false;
  private closed = false;
  /** Departures being recorded (a socket closed): a stopping node waits for them. */
  private departures = new Set<Promise<void>>();
  /** The media area, once the plugin has built it (media requests need it). */
  media: MediaService | null = null;
  /** This node's channel of sockets to end because their session resumed on another node. */
  private replacedFeed: Promise<(() => Promise<void>) | null>;

  constructor(
    private svc: RealtimeDeps,
    private rooms: RoomService,
    private store: RoomStore,
    private cfg: RealtimeConfig,
    private log: FastifyBaseLogger,
  ) {
    this.nodeId = `node_${randomBytes(6).toString('hex')}`;
    svc.state.subscriptions.on('restored', this.onResubscribed);
    this.pinger = setInterval(() => this.pingAll(), cfg.pingIntervalMs).unref();
    this.sweeper = setInterval(() => void this.tick(), cfg.sweepIntervalMs).unref();
    this.qualityTimer = setInterval(
      () => void this.measureQuality(),
      cfg.controller.qualityIntervalMs,
    ).unref();
    void this.store.heartbeat(this.nodeId, cfg.nodeTtlMs).catch(() => {});
    this.replacedFeed = svc.state
      .subscribe(replacedChannel(this.nodeId), (message) => {
        const [rid, connId] = message.split(' ');
        if (rid && connId) this.endReplaced(rid, connId);
      })
      .catch((err: unknown) => {
        this.log.warn({ err }, 'realtime: following replaced sockets failed');
        return null;
      });
  }

  private async tick() {
    if (this.sweeping || this.closed) return;
    this.sweeping = true;
    try {
      await this.store.heartbeat(this.nodeId, this.cfg.nodeTtlMs);
      await this.rooms.sweep();
    } catch (err) {
      // An outage is logged once by the app; the sweep resumes by itself when it ends.
      if (!this.closed && !unavailableDependency(err))
        this.log.warn({ err }, 'realtime sweep failed');
    } finally {
      this.sweeping = false;
    }
  }

  /** Takes a new socket. Handlers are attached at once so no early frame is lost. */
  accept(ws: WebSocket, query: Record<string, unknown>, tcp: Duplex | null = null) {
    const conn = new Connection(ws, this.cfg.rateBurst, this.svc.clock.now(), tcp);
    this.conns.add(conn);
    ws.on('message', (data, isBinary) => this.onFrame(conn, data, isBinary));
    ws.on('pong', (data) => {
      conn.alive = true;
      // A pong the client sends unasked (or twice) would let it choose its own round trip.
      const ping = conn.ping;
      if (ping && data.toString() === ping.payload) {
        conn.ping = null;
        conn.pongAtMs = Date.now();
        conn.rttMs = Math.max(0, conn.pongAtMs - ping.sentAtMs);
      }
    });
    ws.on('close', (code) => void this.onClose(conn, code));
    ws.on('error', () => {});
    void this.verify(conn, query).catch((err) => {
      // A dependency outage is logged once, where it is detected; the client retries later.
      if (unavailableDependency(err)) this.sendError(conn, undefined, 'service_unavailable');
      else this.log.error({ err }, 'realtime: accepting a socket failed');
      conn.state = 'closed';
      this.closeWith(conn, CLOSE_CODES.INTERNAL_ERROR);
    });
  }

  private async verify(conn: Connection, query: Record<string, unknown>) {
    const token = typeof query.access_token === 'string' ? query.access_token : '';
    const result = token
      ? await this.svc.signingKeys.verify(token, REALTIME_TOKEN_AUDIENCE)
      : ({ ok: false, reason: 'invalid' } as const);
    if (conn.state === 'closed') return;
    if (!result.ok) {
      const expired = result.reason === 'expired';
      return this.refuse(
        conn,
        expired ? 'token_expired' : 'token_invalid',
        expired ? CLOSE_CODES.TOKEN_EXPIRED : CLOSE_CODES.TOKEN_INVALID,
      );
    }
    const p = result.payload as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === 'string' ? v : '');
    const claims: RoomClaims = {
      projectId: str(p.pid),
      roomName: str(p.room),
      rid: str(p.rid),
      userId: str(p.sub),
      name: str(p.name),
      ...(typeof p.avatarUrl === 'string' ? { avatarUrl: p.avatarUrl } : {}),
      isHost: p.host === true,
      canJoinWithNoHost: p.canJoinWithNoHost !== false,
      canPublish: p.canPublish !== false,
      canSubscribe: p.canSubscribe !== false,
      expiresAtMs: typeof p.exp === 'number' ? p.exp * 1000 : 0,
    };
    if (!claims.projectId || !claims.roomName || !claims.rid || !claims.userId) {
      return this.refuse(conn, 'token_invalid', CLOSE_CODES.TOKEN_INVALID);
    }
    // `room` is optional; given, it must be the token's room (given twice, it is an array: no match).
    if (query.room !== undefined && query.room !== claims.roomName) {
      return this.refuse(conn, 'token_room_mismatch', CLOSE_CODES.TOKEN_ROOM_MISMATCH);
    }
    // A token outlives neither its project nor the project's Realtime product.
    // A store outage is not a bad token: it is answered service_unavailable (retry later).
    const project = await this.svc.projects.get(claims.projectId).catch((err: unknown) => {
      if (unavailableDependency(err)) throw err;
      return null;
    });
    if (isClosed(conn)) return;
    if (!project) return this.refuse(conn, 'token_invalid', CLOSE_CODES.TOKEN_INVALID);
    if (!project.products.includes('realtime')) {
      return this.refuse(conn, 'product_not_enabled', CLOSE_CODES.TOKEN_INVALID);
    }
    conn.claims = claims;
    // Follow the room before any command, so no event committed after it can be missed.
    await this.follow(claims.rid, conn);
    if (isClosed(conn)) return;
    conn.state = 'pending';
    conn.timer = setTimeout(() => {
      if (conn.state === 'pending') this.refuse(conn, 'not_joined', CLOSE_CODES.TIMEOUT);
    }, this.cfg.handshakeTimeoutMs).unref();
    const { early, earlyRefused } = conn;
    conn.early = [];
    conn.earlyRefused = [];
    for (const f of early) this.onFrame(conn, f.data, f.isBinary);
    // Frames beyond what is held were over the limit: each gets its rate_limited answer.
    for (const id of earlyRefused) if (!isClosed(conn)) this.rateLimited(conn, id);
  }

  // ---- Frames in ----------------------------------------------------------------------------

  /**
   * Takes one frame. Whatever handling it throws is answered `internal_error` and logged: one
   * frame never ends the process (the `ws` listener would rethrow it as an uncaught exception).
   */
  private onFrame(conn: Connection, raw: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) {
    this.cork(conn);
    try {
      this.takeFrame(conn, raw, isBinary);
    } catch (err) {
      this.log.error({ err }, 'realtime frame failed');
      try {
        this.sendError(conn, undefined, 'internal_error');
      } catch {
        // The socket itself is broken; its close handler ends the session.
      }
    }
  }

  private takeFrame(conn: Connection, raw: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) {
    if (conn.state === 'closed') return;
    if (conn.state === 'verifying') {
      if (conn.early.length < EARLY_LIMIT) conn.early.push({ data: raw, isBinary });
      else if (conn.earlyRefused.length < REFUSED_STREAK_LIMIT)
        conn.earlyRefused.push(isBinary ? undefined : requestId(raw));
      return;
    }
    if (!this.takeToken(conn)) {
      // Refused unparsed but for its id: §2 answers every request with its own id.
      this.rateLimited(conn, isBinary ? undefined : requestId(raw));
      return;
    }
    const request = this.parse(conn, raw, isBinary);
    if (!request) return;
    conn.queue = conn.queue
      .then(() => this.handle(conn, request))
      .catch((err) => {
        if (unavailableDependency(err)) {
          this.sendError(conn, request.id, 'service_unavailable');
          return;
        }
        this.log.error({ err, type: request.type }, 'realtime request failed');
        this.sendError(conn, request.id, 'internal_error');
      });
  }

  /** Takes one token from the connection's bucket; false when the frame is over the limit. */
  private takeToken(conn: Connection) {
    const now = this.svc.clock.now();
    conn.tokens = Math.min(
      this.cfg.rateBurst,
      conn.tokens + ((now - conn.refilledAtMs) * this.cfg.ratePerSec) / 1000,
    );
    conn.refilledAtMs = now;
    if (conn.tokens >= 1) {
      conn.tokens -= 1;
      conn.refusedStreak = 0;
      return true;
    }
    return false;
  }

  /** Refuses a frame over the rate limit; too many in a row close the socket with 4429. */
  private rateLimited(conn: Connection, id: string | undefined) {
    conn.refusedStreak += 1;
    if (conn.refusedStreak >= REFUSED_STREAK_LIMIT) {
      void this.endSession(conn, 'PROTOCOL_VIOLATION', 'rate_limited', CLOSE_CODES.FLOOD);
    } else {
      this.sendError(conn, id, 'rate_limited');
    }
  }

  private invalid(conn: Connection, id: string | undefined, code: ErrorCode, message?: string) {
    conn.invalidStreak += 1;
    if (conn.invalidStreak >= INVALID_STREAK_LIMIT) {
      void this.endSession(conn, 'PROTOCOL_VIOLATION', code, CLOSE_CODES.PROTOCOL_VIOLATION);
    } else {
      this.sendError(conn, id, code, message);
    }
  }

  private parse(
    conn: Connection,
    raw: Buffer | ArrayBuffer | Buffer[],
    isBinary: boolean,
  ): Request | null {
    if (isBinary) {
      this.invalid(conn, undefined, 'invalid_message', 'Binary frames are not accepted.');
      return null;
    }
    let value: unknown;
    try {
      value = JSON.parse(raw.toString());
    } catch {
      this.invalid(conn, undefined, 'invalid_message', 'The frame is not JSON.');
      return null;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.invalid(conn, undefined, 'invalid_message', 'The frame is not a JSON object.');
      return null;
    }
    const { id, type, data } = value as Record<string, unknown>;
    if (typeof id !== 'string' || id.length < 1 || id.length > 64) {
      this.invalid(conn, undefined, 'invalid_message', 'The frame needs an id (1–64 characters).');
      return null;
    }
    if (typeof type !== 'string' || type.length < 1 || type.length > 80) {
      this.invalid(conn, id, 'invalid_message', 'The frame needs a type.');
      return null;
    }
    const isApp = APP_TYPE_REGEX.test(type);
    const validator = this.rooms.controller.lookup(type)?.check ?? validators.get(type);
    if (!validator && !isApp) {
      this.invalid(conn, id, 'unknown_message_type', `Unknown type "${type.slice(0, 80)}".`);
      return null;
    }
    const payload = data === undefined && !isApp ? {} : data;
    if (validator && !validator.Check(payload)) {
      const first = validator.Errors(payload).First();
      this.invalid(
        conn,
        id,
        'invalid_request',
        first ? `data${first.path.replaceAll('/', '.')} ${first.message}` : undefined,
      );
      return null;
    }
    const fault = findInputFault(payload, 'data');
    if (fault) {
      this.invalid(conn, id, 'invalid_request', `${fault.path} ${fault.message}`);
      return null;
    }
    conn.invalidStreak = 0;
    return { id, type, data: payload ?? null };
  }

  private async handle(conn: Connection, r: Request) {
    if (conn.state === 'closed') return;
    const claims = conn.claims!;
    if (r.type === 'ping') {
      this.send(conn, JSON.stringify({ type: 'pong', id: r.id, ts: this.svc.clock.now() }));
      return;
    }
    if (r.type === 'session.join' || r.type === 'session.resume') {
      if (conn.state !== 'pending') return this.sendError(conn, r.id, 'already_joined');
      // The handshake is done once the request is in, however long the room's lock takes.
      this.clearTimer(conn);
      if (r.type === 'session.join') return this.join(conn, r.id);
      const data = r.data as { sessionId: string; resumeToken: string; lastSeq: number };
      const result = await this.rooms.resume(claims, data, this.nodeId, conn.id);
      if (isClosed(conn)) return;
      if (result.kind === 'failed') return this.sendError(conn, r.id, 'resume_failed');
      this.clearTimer(conn);
      conn.state = 'joined';
      conn.sid = result.sid;
      conn.lastDelivered = data.lastSeq;
      if (result.replaced) this.replace(claims.rid, result.replaced);
      this.sendAck(conn, r.id, { status: 'resumed', replayed: result.replay.length });
      this.sessionFrame(conn, 'session.resumed', {
        sessionId: result.sid,
        replayed: result.replay.length,
        subscriptions: this.media?.subscriptionsOf(claims.rid, result.sid) ?? [],
      });
      for (const ev of result.replay) this.deliverTo(conn, ev);
      this.flushRing(conn);
      return;
    }
    if (r.type === 'session.leave') {
      if (conn.state === 'joined' && conn.sid) {
        const sid = conn.sid;
        conn.state = 'closed';
        await this.rooms.leave(claims.rid, sid, 'LEFT', conn.id);
        this.sendAck(conn, r.id);
        this.closeWith(conn, CLOSE_CODES.NORMAL);
        return;
      }
      if (conn.state === 'waiting') {
        this.sendAck(conn, r.id);
        conn.state = 'closed';
        this.closeWith(conn, CLOSE_CODES.NORMAL);
        return;
      }
      return this.sendError(conn, r.id, 'not_joined');
    }
    if (conn.state === 'pending' && this.rooms.controller.allowedBeforeJoin(r.type)) {
      return this.controllerRequest(conn, r, null);
    }
    if (conn.state !== 'joined' || !conn.sid) return this.sendError(conn, r.id, 'not_joined');
    const sid = conn.sid;
    if (this.rooms.controller.lookup(r.type)) return this.controllerRequest(conn, r, sid);
    if (r.type === 'message.send') {
      const data = r.data as { message: string; roomName?: string };
      if (data.roomName !== undefined && data.roomName !== claims.roomName) {
        return this.sendError(conn, r.id, 'token_room_mismatch');
      }
      const ev = await this.rooms.sendMessage(
        claims.rid,
        sid,
        claims.userId,
        claims.name,
        claims.avatarUrl,
        data.message,
      );
      if (!ev) return this.sendError(conn, r.id, 'not_joined');
      return this.sendAck(conn, r.id, { seq: ev.seq });
    }
    if (r.type.startsWith('media.')) {
      if (!this.media) return this.sendError(conn, r.id, 'media_unavailable');
      try {
        const ack = await this.media.handle({ claims, sid }, r.type, r.data);
        if (isClosed(conn)) return;
        return this.sendAck(conn, r.id, ack);
      } catch (err) {
        if (err instanceof MediaRequestError)
          return this.sendError(conn, r.id, err.code, err.message);
        throw err;
      }
    }
    if (r.type === 'room.update_metadata') {
      const seq = await this.rooms.updateMetadata(
        claims.rid,
        sid,
        (r.data as { metadata: string }).metadata,
      );
      if (seq === null) return this.sendError(conn, r.id, 'host_required');
      return this.sendAck(conn, r.id, { seq });
    }
    // app.*
    const ev = await this.rooms.sendApp(claims.rid, sid, claims.userId, r.type, r.data);
    if (!ev) return this.sendError(conn, r.id, 'not_joined');
    this.sendAck(conn, r.id, { seq: ev.seq });
  }

  /** A room controller request: its answer is the command's ack or registry code. */
  private async controllerRequest(conn: Connection, r: Request, sid: string | null) {
    const answer = await this.rooms.command(conn.claims!, sid, r.type, r.data);
    if (isClosed(conn)) return;
    if (answer.error) return this.sendError(conn, r.id, answer.error, answer.message);
    this.sendAck(conn, r.id, answer.ack ?? {});
  }

  private async join(conn: Connection, requestId: string | null) {
    const result = await this.rooms.join(conn.claims!, this.nodeId, conn.id);
    if (conn.state === 'closed') {
      // The socket went away while joining: treat it as a drop.
      if (result.kind === 'joined') await this.rooms.dropped(conn.claims!.rid, result.sid, conn.id);
      return;
    }
    if (result.kind === 'refused') {
      if (requestId) this.sendError(conn, requestId, result.code);
      else
        this.sessionFrame(conn, 'session.closed', {
          reason: 'ROOM_ENDED',
          code: result.code,
          closeCode: CLOSE_CODES.ROOM_NOT_FOUND,
        });
      conn.state = 'closed';
      return this.closeWith(
        conn,
        result.code === 'room_full'
          ? CLOSE_CODES.ROOM_FULL
          : result.code === 'room_not_found'
            ? CLOSE_CODES.ROOM_NOT_FOUND
            : CLOSE_CODES.KICKED,
      );
    }
    this.clearTimer(conn);
    if (result.kind === 'waiting') {
      if (result.replaced) this.replace(conn.claims!.rid, result.replaced);
      if (conn.state === 'waiting' && conn.waitingFor === result.reason) return;
      const wasWaiting = conn.state === 'waiting';
      conn.state = 'waiting';
      conn.waitingFor = result.reason;
      if (requestId) this.sendAck(conn, requestId, { status: 'waiting' });
      this.sessionFrame(conn, 'session.waiting', { reason: result.reason });
      if (wasWaiting) return;
      const ms = Math.min(
        2 ** 31 - 1,
        Math.max(0, conn.claims!.expiresAtMs - this.svc.clock.now()),
      );
      conn.timer = setTimeout(() => {
        if (conn.state === 'waiting')
          void this.endSession(conn, 'TOKEN_EXPIRED', 'token_expired', CLOSE_CODES.TOKEN_EXPIRED);
      }, ms).unref();
      return;
    }
    const wasWaiting = conn.state === 'waiting';
    conn.waitingFor = null;
    conn.state = 'joined';
    conn.sid = result.sid;
    conn.lastDelivered = result.lastSeq;
    if (requestId) this.sendAck(conn, requestId, { status: 'joined' });
    if (wasWaiting) this.sessionFrame(conn, 'session.admitted', {});
    this.sessionFrame(conn, 'session.joined', result.snapshot, result.lastSeq);
    this.flushRing(conn);
  }

  // ---- Room events out ------------------------------------------------------------------------

  /**
   * Adds the connection to the room's follower (made on first use). `conn.follower` is set before
   * the subscription is ready, so a socket that closes meanwhile leaves the follower in onClose.
   */
  private async follow(rid: string, conn: Connection) {
    let f = this.followers.get(rid);
    if (!f) {
      const created: Follower = {
        rid,
        conns: new Set(),
        lastSeq: null,
        ring: [],
        held: null,
        unfollow: null,
        ready: Promise.resolve(),
      };
      created.ready = this.store
        .follow(rid, (ev) => this.onEvent(created, ev))
        .then((un) => {
          created.unfollow = un;
        });
      this.followers.set(rid, created);
      f = created;
    }
    f.conns.add(conn);
    conn.follower = f;
    await f.ready;
  }

  private async unfollowIfIdle(f: Follower) {
    if (f.conns.size > 0 || this.followers.get(f.rid) !== f) return;
    this.followers.delete(f.rid);
    await f.ready;
    await f.unfollow?.();
  }

  /**
   * The room subscriptions are back after a lost connection: what was published meanwhile never
   * arrives, so each followed room reads it from its log (as for a gap).
   */
  private readonly onResubscribed = () => {
    for (const f of this.followers.values()) {
      if (f.held || f.lastSeq === null) continue;
      f.held = [];
      this.catchUp(f, f.lastSeq);
    }
  };

  private catchUp(f: Follower, from: number) {
    void this.store
      .readAfter(f.rid, from)
      .catch(() => null)
      .then((missed) => {
        const held = f.held ?? [];
        f.held = null;
        for (const m of missed ?? []) this.deliver(f, m);
        if (!missed) f.lastSeq = null;
        for (const h of held) this.onEvent(f, h);
      });
  }

  private onEvent(f: Follower, ev: StoredRoomEvent) {
    if (f.held) {
      f.held.push(ev);
      return;
    }
    if (f.lastSeq !== null && ev.seq <= f.lastSeq) return;
    if (f.lastSeq !== null && ev.seq > f.lastSeq + 1) {
      // A gap (e.g. the Redis subscription reconnected): fetch what was missed, in order.
      f.held = [ev];
      this.catchUp(f, f.lastSeq);
      return;
    }
    this.deliver(f, ev);
  }

  private deliver(f: Follower, ev: StoredRoomEvent) {
    if (f.lastSeq !== null && ev.seq <= f.lastSeq) return;
    f.lastSeq = ev.seq;
    f.ring.push(ev);
    if (f.ring.length > NODE_RING * 2) f.ring.splice(0, f.ring.length - NODE_RING);
    switch (ev.type) {
      case 'participant.left': {
        const data = JSON.parse(ev.frame).data as {
          participant: { sid: string };
          reason: LeaveReason;
          message?: string;
        };
        for (const conn of f.conns) {
          if (conn.sid === data.participant.sid && conn.state === 'joined') {
            conn.lastDelivered = ev.seq;
            void this.endSession(
              conn,
              data.reason,
              CODE_FOR[data.reason] ?? 'not_joined',
              CLOSE_FOR[data.reason] ?? CLOSE_CODES.NORMAL,
              data.message,
            );
          }
        }
        break;
      }
      case 'waiting.approved':
      case 'waiting.rejected':
      case 'waiting.timed_out': {
        const data = JSON.parse(ev.frame).data as { userId: string; reason?: string };
        for (const conn of f.conns) {
          if (conn.state !== 'waiting' || conn.claims?.userId !== data.userId) continue;
          if (ev.type === 'waiting.approved') {
            conn.queue = conn.queue
              .then(() => this.join(conn, null))
              .catch((err) => this.log.error({ err }, 'realtime admit failed'));
          } else if (ev.type === 'waiting.rejected') {
            void this.endSession(
              conn,
              'WAITING_REJECTED',
              'waiting_rejected',
              CLOSE_CODES.WAITING_REJECTED,
              data.reason,
            );
          } else {
            void this.endSession(
              conn,
              'WAITING_TIMEOUT',
              'waiting_timeout',
              CLOSE_CODES.WAITING_TIMEOUT,
            );
          }
        }
        break;
      }
      case 'participant.joined': {
        this.broadcast(f, ev);
        const data = JSON.parse(ev.frame).data as { participant: { isHost: boolean } };
        if (data.participant.isHost) {
          for (const conn of f.conns) {
            if (conn.state !== 'waiting' || conn.waitingFor !== 'NO_HOST') continue;
            conn.queue = conn.queue
              .then(() => this.join(conn, null))
              .catch((err) => this.log.error({ err }, 'realtime admit failed'));
          }
        }
        return;
      }
      case 'room.deleted':
      case 'room.ended': {
        this.broadcast(f, ev);
        const reason: LeaveReason = ev.type === 'room.deleted' ? 'ROOM_DELETED' : 'ROOM_ENDED';
        for (const conn of f.conns) {
          void this.endSession(conn, reason, CODE_FOR[reason]!, CLOSE_FOR[reason]!);
        }
        return;
      }
    }
    this.broadcast(f, ev);
  }

  private broadcast(f: Follower, ev: StoredRoomEvent) {
    // Encoded once for every socket (ws would otherwise encode the string per send).
    let bytes: Buffer | null = null;
    for (const conn of f.conns) {
      if (conn.state === 'joined' && ev.seq > conn.lastDelivered) {
        conn.lastDelivered = ev.seq;
        bytes ??= Buffer.from(ev.frame);
        this.write(conn, bytes);
      }
    }
  }

  private deliverTo(conn: Connection, ev: StoredRoomEvent) {
    if (ev.seq <= conn.lastDelivered) return;
    conn.lastDelivered = ev.seq;
    this.write(conn, ev.frame);
  }

  /** Sends what this node received for the room after the session's starting point. */
  private flushRing(conn: Connection) {
    for (const ev of conn.follower?.ring ?? [])
      if (conn.state === 'joined') this.deliverTo(conn, ev);
  }

  // ---- Frames out, closing --------------------------------------------------------------------

  /**
   * Holds the connection's writes until the end of this turn of the event loop, so that the frames
   * a request causes at once (its echo, its ack) leave in one write: the client's reader wakes once
   * for them rather than once a frame.
   */
  private cork(conn: Connection) {
    const tcp = conn.tcp;
    if (!tcp || conn.corked) return;
    conn.corked = true;
    tcp.cork();
    setImmediate(() => {
      conn.corked = false;
      tcp.uncork();
    });
  }

  private send(conn: Connection, text: string) {
    if (conn.ws.readyState === conn.ws.OPEN) this.write(conn, text);
  }

  /** Sends a text frame; a socket whose unsent bytes pass the cap is dropped (a slow reader). */
  private write(conn: Connection, frame: string | Buffer) {
    conn.ws.send(frame, TEXT_FRAME);
    if (conn.ws.bufferedAmount > MAX_UNSENT_BYTES) this.dropSlowReader(conn);
  }

  /**
   * Drops a socket that does not read what it is sent. Its session is dropped at once, as after
   * any drop (the client may resume); nothing more is queued for it. The 4010 close frame waits
   * behind the unsent bytes, and ws destroys the socket if the close does not complete in time.
   */
  private dropSlowReader(conn: Connection) {
    if (isClosed(conn)) return;
    this.log.debug({ conn: conn.id }, 'realtime: closing a socket that does not read');
    void this.onClose(conn, CLOSE_CODES.TIMEOUT);
    this.closeWith(conn, CLOSE_CODES.TIMEOUT);
  }

  private sendAck(conn: Connection, id: string, data?: Record<string, unknown>) {
    this.send(conn, JSON.stringify(data ? { type: 'ack', id, data } : { type: 'ack', id }));
  }

  private sendError(conn: Connection, id: string | undefined, code: ErrorCode, message?: string) {
    const frame = {
      type: 'error',
      ...(id !== undefined ? { id } : {}),
      code,
      message: message ?? ERROR_CODES[code].title,
    };
    this.send(conn, JSON.stringify(frame));
  }

  private sessionFrame(conn: Connection, type: string, data: unknown, seq?: number) {
    const s = seq ?? conn.follower?.lastSeq ?? conn.lastDelivered;
    this.send(conn, JSON.stringify({ type, seq: s, ts: this.svc.clock.now(), data }));
  }

  /** Refuses a socket before any session (bad token, handshake timeout). */
  private refuse(conn: Connection, code: ErrorCode, closeCode: number) {
    this.sendError(conn, undefined, code);
    conn.state = 'closed';
    this.closeWith(conn, closeCode);
  }

  /** The server ends this connection's session: `session.closed`, then the close. */
  private async endSession(
    conn: Connection,
    reason: LeaveReason,
    code: ErrorCode,
    closeCode: number,
    message?: string,
  ) {
    if (conn.state === 'closed') return;
    const wasJoined = conn.state === 'joined';
    const sid = conn.sid;
    conn.state = 'closed';
    this.sessionFrame(conn, 'session.closed', {
      reason,
      code,
      closeCode,
      ...(message !== undefined ? { message } : {}),
    });
    this.closeWith(conn, closeCode);
    if (wasJoined && sid && reason === 'PROTOCOL_VIOLATION') {
      await this.rooms.leave(conn.claims!.rid, sid, reason, conn.id).catch(() => {});
    }
  }

  /**
   * Ends the socket that held a session until it resumed on another socket (or that waited for
   * approval until a newer connection of its user took its place), on whichever node holds it,
   * as a replaced session is ended (4006: that client must not come back on it).
   */
  private replace(rid: string, old: { nodeId: string; connId: string }) {
    if (old.nodeId === this.nodeId) return this.endReplaced(rid, old.connId);
    void this.svc.state
      .publish(replacedChannel(old.nodeId), `${rid} ${old.connId}`)
      .catch((err: unknown) => this.log.warn({ err }, 'realtime: ending a replaced socket failed'));
  }

  private endReplaced(rid: string, connId: string) {
    for (const conn of this.followers.get(rid)?.conns ?? []) {
      if (conn.id === connId && (conn.state === 'joined' || conn.state === 'waiting')) {
        void this.endSession(
          conn,
          'DUPLICATE_IDENTITY',
          'duplicate_identity',
          CLOSE_CODES.DUPLICATE_IDENTITY,
        );
      }
    }
  }

  private closeWith(conn: Connection, code: number) {
    this.clearTimer(conn);
    try {
      conn.ws.close(code);
    } catch {
      conn.ws.terminate();
    }
  }

  private clearTimer(conn: Connection) {
    if (conn.timer) clearTimeout(conn.timer);
    conn.timer = null;
  }

  private async onClose(conn: Connection, code: number) {
    const wasJoined = conn.state === 'joined';
    if (conn.state === 'waiting' && conn.waitingFor === 'APPROVAL' && conn.claims && !this.closed) {
      const { rid, userId } = conn.claims;
      void this.rooms.waitingGone(rid, userId, conn.id).catch(() => {});
    }
    conn.state = 'closed';
    this.clearTimer(conn);
    this.conns.delete(conn);
    const f = conn.follower;
    if (f) {
      f.conns.delete(conn);
      void this.unfollowIfIdle(f).catch(() => {});
    }
    if (!wasJoined || !conn.sid || !conn.claims || this.closed) return;
    const { rid } = conn.claims;
    // A client that closes normally after joining has left; anything else is a drop.
    const departure = (
      code === CLOSE_CODES.NORMAL
        ? this.rooms.leave(rid, conn.sid, 'LEFT', conn.id)
        : this.rooms.dropped(rid, conn.sid, conn.id)
    ).then(
      () => {},
      (err) => this.log.warn({ err }, 'realtime: recording a departure failed'),
    );
    this.departures.add(departure);
    await departure;
    this.departures.delete(departure);
  }

  private pingAll() {
    for (const conn of this.conns) {
      if (!conn.alive) {
        conn.ws.terminate();
        continue;
      }
      conn.alive = false;
      try {
        conn.sendPing(Date.now());
      } catch {}
    }
  }

  /**
   * Network quality: reports each room's local participants' scores from the last round trip,
   * then pings them again for the next period.
   */
  private async measureQuality() {
    if (this.closed) return;
    const now = Date.now();
    const period = this.cfg.controller.qualityIntervalMs;
    for (const f of this.followers.values()) {
      const scores: { userId: string; quality: number; rttMs: number | null }[] = [];
      for (const conn of f.conns) {
        if (conn.state !== 'joined' || !conn.claims) continue;
        const fresh = conn.rttMs !== null && now - conn.pongAtMs <= 2 * period + 100;
        if (conn.pongAtMs > 0 || conn.rttMs !== null) {
          const rttMs = fresh ? conn.rttMs : null;
          scores.push({ userId: conn.claims.userId, quality: qualityFromRtt(rttMs), rttMs });
        }
        try {
          conn.sendPing(now);
        } catch {}
      }
      if (scores.length > 0) {
        await this.rooms.reportQuality(f.rid, scores).catch((err) => {
          this.log.warn({ err }, 'realtime: reporting network quality failed');
        });
      }
    }
  }

  /** Sends a frame to the joined socket of `sid` in room `rid`, when it is on this node. */
  sendToSid(rid: string, sid: string, frame: string) {
    const f = this.followers.get(rid);
    for (const conn of f?.conns ?? []) {
      if (conn.sid === sid && conn.state === 'joined') this.send(conn, frame);
    }
  }

  /** Number of sockets on this node. */
  get size() {
    return this.conns.size;
  }

  /**
   * Stops the node: its joined sessions enter the departure grace period (they can resume on
   * another node), then every socket is closed with 1001.
   */
  async close() {
    if (this.closed) return;
    this.svc.state.subscriptions.off('restored', this.onResubscribed);
    clearInterval(this.pinger);
    clearInterval(this.sweeper);
    clearInterval(this.qualityTimer);
    await this.rooms.controller.reactions.close();
    const joined = [...this.conns].filter((c) => c.state === 'joined' && c.sid && c.claims);
    await Promise.allSettled(joined.map((c) => this.rooms.dropped(c.claims!.rid, c.sid!, c.id)));
    this.closed = true;
    // Clients that left or dropped just before: their departures finish before the stores close.
    await Promise.all(this.departures);
    for (const conn of this.conns) {
      conn.state = 'closed';
      this.closeWith(conn, CLOSE_CODES.GOING_AWAY);
    }
    await Promise.allSettled(
      [...this.followers.values()].map(async (f) => {
        await f.ready;
        await f.unfollow?.();
      }),
    );
    this.followers.clear();
    await (await this.replacedFeed)?.().catch(() => {});
  }
}

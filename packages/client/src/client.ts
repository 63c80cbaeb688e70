import {
  CLOSE_CODES,
  type ControllerSnapshot,
  LEAVE_REASONS,
  type LeaveReason,
  type RoomEventData,
  type RoomSnapshot,
  type SvcTrackInfo,
  type SvcTrackKind,
} from '@svc/protocol';
import { Channel, type ChannelClose, errorOfClose, type ServerFrame } from './channel.ts';
import { SvcRoomController } from './controller.ts';
import { SvcError, type SvcErrorCode } from './errors.ts';
import { type FetchFn, RestClient } from './http.ts';
import { MediaSession, type SvcAudioOptions, type SvcVideoOptions } from './media.ts';
import { MutableObservable, notify, type SvcObservable } from './observable.ts';
import { notConnected, SvcRoom } from './room.ts';
import { defaultWebSocketFactory, type SvcWebSocketFactory } from './socket.ts';
import {
  type SvcConfig,
  SvcConnectionState,
  type SvcCreateRoomOptions,
  type SvcDisconnectReason,
  type SvcListRecordingsOptions,
  type SvcListRoomsOptions,
  type SvcParticipant,
  type SvcRealtimeMessage,
  type SvcReceivedMessage,
  type SvcRecordingDownloadUrl,
  type SvcRecordingInfo,
  type SvcRecordingPage,
  type SvcRoomInfo,
  type SvcRoomOptions,
  type SvcRoomPage,
  type SvcStartRecordingOptions,
  type SvcTokenResponse,
} from './types.ts';

/**
 * Automatic reconnection. After a drop the client waits
 * `min(maxDelayMs, initialDelayMs · 2^(attempt−1))` scaled by a random factor in [0.5, 1)
 * ("equal jitter") before each attempt, and at least the `Retry-After` (up to a minute) of a
 * 429 or 503 that refused the previous one; after `maxAttempts` failed attempts it gives up
 * (`FAILED`, `onDisconnected('RECONNECT_FAILED')`). With the defaults (10 attempts, 250 ms,
 * 10 s) it gives up after 28–56 s.
 */
export interface SvcReconnectPolicy {
  /** Attempts before giving up (10). 0 disables reconnection: a drop is final at once. */
  maxAttempts: number;
  /** The first delay before jitter, in ms (250). */
  initialDelayMs: number;
  /** The largest delay before jitter, in ms (10000). */
  maxDelayMs: number;
}

export const DEFAULT_RECONNECT_POLICY: SvcReconnectPolicy = {
  maxAttempts: 10,
  initialDelayMs: 250,
  maxDelayMs: 10_000,
};

/** Optional parts of the client, for special runtimes and tests. */
export interface SvcClientOptions {
  /** Opens WebSockets. Default: the global WebSocket, else the `ws` package (Node 20). */
  webSocketFactory?: SvcWebSocketFactory;
  /** Default: the global fetch. */
  fetch?: FetchFn;
  reconnect?: Partial<SvcReconnectPolicy>;
  /** How long a signaling request (join, resume, message…) may wait for its answer (10000 ms). */
  requestTimeoutMs?: number;
  /**
   * How often the client pings the server on the signaling channel (15000 ms); a ping without a
   * pong within `requestTimeoutMs` counts as a drop. 0 disables the client's pings (the server
   * still pings).
   */
  heartbeatIntervalMs?: number;
  /** Random numbers in [0, 1) for the jitter (Math.random). */
  random?: () => number;
  /**
   * Subscribe to every remote track as soon as it is published (default true). When false, call
   * `subscribe(trackId)` for the tracks you want.
   */
  autoSubscribe?: boolean;
  /** `relay` forces every PeerConnection through the TURN servers the server gives (default `all`). */
  iceTransportPolicy?: 'all' | 'relay';
}

/** Errors that a later attempt may not meet: anything else ends reconnection at once. */
const RETRYABLE: ReadonlySet<SvcErrorCode> = new Set<SvcErrorCode>([
  'network_error',
  'connection_closed',
  'timeout',
  'token_expired',
  'rate_limited',
  'internal_error',
  'service_unavailable',
  'invalid_response',
  'frame_too_large',
]);

/** Close codes after which the client reconnects (resume); every other close ends the session. */
const RECONNECT_CLOSE_CODES: ReadonlySet<number> = new Set([
  CLOSE_CODES.GOING_AWAY,
  1005,
  1006,
  // A text frame that is not UTF-8 (closed by the WebSocket layer, like a frame too big).
  1007,
  CLOSE_CODES.MESSAGE_TOO_BIG,
  CLOSE_CODES.INTERNAL_ERROR,
  1012,
  1013,
  CLOSE_CODES.TIMEOUT,
  CLOSE_CODES.FLOOD,
]);

/** Close code → leave reason, when the server closed without a `session.closed` frame. */
const CLOSE_REASONS: Record<number, LeaveReason> = {
  [CLOSE_CODES.NORMAL]: 'LEFT',
  [CLOSE_CODES.TOKEN_EXPIRED]: 'TOKEN_EXPIRED',
  [CLOSE_CODES.DUPLICATE_IDENTITY]: 'DUPLICATE_IDENTITY',
  [CLOSE_CODES.ROOM_DELETED]: 'ROOM_DELETED',
  [CLOSE_CODES.KICKED]: 'KICKED',
  [CLOSE_CODES.WAITING_REJECTED]: 'WAITING_REJECTED',
  [CLOSE_CODES.WAITING_TIMEOUT]: 'WAITING_TIMEOUT',
  [CLOSE_CODES.ROOM_ENDED]: 'ROOM_ENDED',
  [CLOSE_CODES.ROOM_NOT_FOUND]: 'ROOM_ENDED',
  [CLOSE_CODES.PROTOCOL_VIOLATION]: 'PROTOCOL_VIOLATION',
};

/** A token closer than this to its expiry is renewed before a reconnection attempt. */
const TOKEN_RENEW_MARGIN_MS = 30_000;
/** The longest `Retry-After` a retry honours: a larger one waits this long. */
const MAX_RETRY_AFTER_MS = 60_000;
/** How long `disconnect()` waits for the server to confirm `session.leave`. */
const LEAVE_TIMEOUT_MS = 2_000;

/** One `connect()` and everything until the client leaves that room. */
interface Run {
  readonly options: SvcRoomOptions;
  token: SvcTokenResponse | null;
  /** The live (or opening) channel; null between reconnection attempts. */
  channel: Channel | null;
  sessionId?: string;
  resumeToken?: string;
  /** The last room seq applied: events with seq ≤ lastSeq are duplicates (replay). */
  lastSeq: number;
  departureGraceMs: number;
  droppedAt: number;
  ended: boolean;
  /** Set by `room.deleted`: the close that follows ends the session with this reason. */
  endReason?: LeaveReason;
  heartbeat?: ReturnType<typeof setInterval>;
  /** Cuts a backoff wait short when the run ends. */
  wake?: () => void;
  /** The reconnection loop is running. */
  reconnecting?: boolean;
  /** The run was in its room once (`onConnected` was sent): a later join is a reconnection. */
  connected?: boolean;
  /** Why the run failed (state `FAILED`). */
  failure?: SvcError;
}

/**
 * The Svc client: REST calls for rooms and tokens, and one connection to a room at a time over
 * the signaling channel, with automatic reconnection.
 *
 * ```ts
 * const client = new SvcClient({ projectId, apiKey, baseUrl: 'https://svc.example.com' });
 * client.onMessageReceived = (message, participant) => console.log(participant?.name, message.message);
 * const room = await client.connect({ roomName: 'standup', liveType: 'VIDEO_CONFERENCE',
 *   participant: { userId: 'u1', name: 'Ada' } });
 * await room.sendMessage('hello');
 * ```
 *
 * Handlers are plain properties; set them before `connect()`. A handler that throws does not
 * disturb the client (the exception is rethrown asynchronously).
 */
export class SvcClient {
  /** A participant joined the room (not sent for this client itself). */
  onUserJoined?: (participant: SvcParticipant) => void;
  /**
   * A participant left. `reason` is the server's (`LEFT`, `DISCONNECTED`, `DUPLICATE_IDENTITY`…);
   * undefined when the client noticed the departure only by comparing snapshots after a full
   * rejoin.
   */
  onUserLeft?: (participant: SvcParticipant, reason: LeaveReason | undefined) => void;
  /**
   * A message arrived (this client's own messages included), in the room's order. `participant`
   * is the sender's participant, or null when the message came through the REST API or its
   * sender has already left.
   */
  onMessageReceived?: (message: SvcReceivedMessage, participant: SvcParticipant | null) => void;
  /** `connect()` succeeded: the client is in the room. */
  onConnected?: (room: SvcRoom) => void;
  /**
   * The client left the room for good (see {@link SvcDisconnectReason}). `detail.message` is the
   * server's text when it gave one (e.g. the reason of a kick).
   */
  onDisconnected?: (reason: SvcDisconnectReason, detail?: { message?: string }) => void;
  /**
   * The connection dropped, or the server lost this client's media (a Janus instance died, the
   * session moved to another node): the client is reconnecting and re-establishing its media.
   */
  onReconnecting?: () => void;
  /**
   * The client is back in the room after a drop (resumed, or rejoined as a new session) and the
   * media it had is published and subscribed again.
   */
  onReconnected?: () => void;
  /**
   * The server holds this client: until a host joins (`NO_HOST`, `canJoinWithNoHost: false`) or
   * until a host or co-host approves it in the waiting room (`APPROVAL`).
   */
  onWaitingForHost?: (reason: 'NO_HOST' | 'APPROVAL') => void;
  /** A host changed the room's metadata. */
  onRoomMetadataChanged?: (metadata: string | null) => void;
  /** A participant (this client included) started publishing a track. */
  onMediaStarted?: (
    participant: SvcParticipant | null,
    track: SvcTrackInfo,
    kind: SvcTrackKind,
  ) => void;
  /** A participant's track stopped (unpublished, left, or lost by the server and republished). */
  onMediaStopped?: (
    participant: SvcParticipant | null,
    track: SvcTrackInfo,
    kind: SvcTrackKind,
  ) => void;
  /** A track was muted or unmuted (`track.muted`). */
  onMediaMuted?: (participant: SvcParticipant | null, track: SvcTrackInfo) => void;
  /** A media operation the client did by itself (auto-subscribe, republish) failed. */
  onMediaError?: (error: SvcError) => void;

  /** The room controller of the current room (roles, chat, hands, polls…). */
  readonly controller: SvcRoomController;

  readonly #rest: RestClient;
  readonly #state = new MutableObservable<SvcConnectionState>(SvcConnectionState.DISCONNECTED);
  readonly #reconnect: SvcReconnectPolicy;
  readonly #requestTimeoutMs: number;
  readonly #heartbeatIntervalMs: number;
  readonly #random: () => number;
  #factory: SvcWebSocketFactory | undefined;
  #run: Run | null = null;
  #room: SvcRoom | null = null;
  #media: MediaSession | null = null;
  readonly #autoSubscribe: boolean;
  readonly #iceTransportPolicy: 'all' | 'relay';
  #lastError: SvcError | null = null;

  constructor(
    readonly config: SvcConfig,
    options: SvcClientOptions = {},
  ) {
    if (!config.projectId) throw new TypeError('SvcConfig.projectId is required');
    if (!config.apiKey) throw new TypeError('SvcConfig.apiKey is required');
    const fetchFn = options.fetch ?? globalThis.fetch?.bind(globalThis);
    if (!fetchFn) throw new TypeError('No fetch in this runtime: pass options.fetch');
    this.#rest = new RestClient(config, fetchFn);
    this.#factory = options.webSocketFactory;
    this.#reconnect = { ...DEFAULT_RECONNECT_POLICY, ...options.reconnect };
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#heartbeatIntervalMs = options.heartbeatIntervalMs ?? 15_000;
    this.#random = options.random ?? Math.random;
    this.controller = new SvcRoomController(this);
    this.#autoSubscribe = options.autoSubscribe !== false;
    this.#iceTransportPolicy = options.iceTransportPolicy ?? 'all';
  }

  // ---- State -------------------------------------------------------------------------------

  /** The connection state: `.value`, `.subscribe(listener)`. */
  get connectionState(): SvcObservable<SvcConnectionState> {
    return this.#state;
  }

  /** The room the client is in (also while reconnecting), or null. */
  get room(): SvcRoom | null {
    return this.#room;
  }

  /** Why the last `connect()` or reconnection failed (state `FAILED`); null otherwise. */
  get lastError(): SvcError | null {
    return this.#lastError;
  }

  // ---- REST --------------------------------------------------------------------------------

  /** Creates a room. Rejects with `room_exists` (409) when the name is taken. */
  createRoom(options: SvcCreateRoomOptions): Promise<SvcRoomInfo> {
    return this.#rest.request('POST', '/realtime/rooms', options);
  }

  /** Deletes a room: everyone connected is disconnected with reason `ROOM_DELETED`. */
  async deleteRoom(roomName: string): Promise<void> {
    await this.#rest.request('DELETE', `/realtime/rooms/${encodeURIComponent(roomName)}`);
  }

  /**
   * Lists the project's rooms, one page at a time. **Server keys only**: with a client key the
   * server refuses with `server_key_required` (403), so call this from a backend.
   */
  listRooms(options: SvcListRoomsOptions = {}): Promise<SvcRoomPage> {
    const query = new URLSearchParams();
    if (options.status) query.set('status', options.status);
    if (options.page !== undefined) query.set('page', String(options.page));
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    const qs = query.size ? `?${query}` : '';
    return this.#rest.request('GET', `/realtime/rooms${qs}`);
  }

  // ---- Recordings ----------------------------------------------------------------------------
  // With a client key the server needs the access token of a host (or co-host) in the room: while
  // connected, the client sends its current token as `X-Room-Token` (docs/recordings.md).

  #roomTokenHeader(): Record<string, string> {
    const token = this.#run?.token?.token;
    return token ? { 'x-room-token': token } : {};
  }

  /** Starts recording a room (`MP4` by default). */
  startRecord(options: SvcStartRecordingOptions): Promise<SvcRecordingInfo> {
    return this.#rest.request(
      'POST',
      '/realtime/recordings',
      { ...options, fileType: options.fileType ?? 'MP4' },
      this.#roomTokenHeader(),
    );
  }

  /** Stops a recording; resolves with its final information (`COMPLETED`, `FAILED`, or `PROCESSING`). */
  stopRecord(egressId: string): Promise<SvcRecordingInfo> {
    return this.#rest.request(
      'POST',
      `/realtime/recordings/${encodeURIComponent(egressId)}/stop`,
      {},
      this.#roomTokenHeader(),
    );
  }

  /** Pauses a recording: nothing is written until `resumeRecord`, and the file skips the gap. */
  pauseRecord(egressId: string): Promise<SvcRecordingInfo> {
    return this.#rest.request(
      'POST',
      `/realtime/recordings/${encodeURIComponent(egressId)}/pause`,
      {},
      this.#roomTokenHeader(),
    );
  }

  /** Resumes a paused recording; the same file goes on. */
  resumeRecord(egressId: string): Promise<SvcRecordingInfo> {
    return this.#rest.request(
      'POST',
      `/realtime/recordings/${encodeURIComponent(egressId)}/resume`,
      {},
      this.#roomTokenHeader(),
    );
  }

  /** The recordings in progress, of one room or (server keys) all. */
  async listActiveRecordings(roomName?: string): Promise<SvcRecordingInfo[]> {
    const qs = roomName ? `?roomName=${encodeURIComponent(roomName)}` : '';
    const list = await this.#rest.request<{ items: SvcRecordingInfo[] }>(
      'GET',
      `/realtime/recordings/active${qs}`,
      undefined,
      this.#roomTokenHeader(),
    );
    return list.items;
  }

  /** Recordings, newest first, one page at a time (page 1, limit 10 by default). */
  listRecordings(options: SvcListRecordingsOptions = {}): Promise<SvcRecordingPage> {
    const query = new URLSearchParams();
    if (options.status) query.set('status', options.status);
    query.set('page', String(options.page ?? 1));
    query.set('limit', String(options.limit ?? 10));
    return this.#rest.request(
      'GET',
      `/realtime/recordings?${query}`,
      undefined,
      this.#roomTokenHeader(),
    );
  }

  /** One recording. Rejects with `recording_not_found` (404). */
  getRecording(egressId: string): Promise<SvcRecordingInfo> {
    return this.#rest.request(
      'GET',
      `/realtime/recordings/${encodeURIComponent(egressId)}`,
      undefined,
      this.#roomTokenHeader(),
    );
  }

  /** A signed address of a COMPLETED recording's file, valid `expiresIn` seconds (3600 by default). */
  getRecordingDownloadUrl(egressId: string, expiresIn = 3600): Promise<SvcRecordingDownloadUrl> {
    return this.#rest.request(
      'GET',
      `/realtime/recordings/${encodeURIComponent(egressId)}/download-url?expiresIn=${expiresIn}`,
      undefined,
      this.#roomTokenHeader(),
    );
  }

  /** One room. Rejects with `room_not_found` (404). */
  getRoom(roomName: string): Promise<SvcRoomInfo> {
    return this.#rest.request('GET', `/realtime/rooms/${encodeURIComponent(roomName)}`);
  }

  /** The participants of a room, as the server sees them now. */
  async getParticipants(roomName: string): Promise<SvcParticipant[]> {
    const list = await this.#rest.request<{ items: SvcParticipant[] }>(
      'GET',
      `/realtime/rooms/${encodeURIComponent(roomName)}/participants`,
    );
    return list.items;
  }

  /** An access token for a room (the room is created if it does not exist). */
  getToken(options: SvcRoomOptions): Promise<SvcTokenResponse> {
    return this.#rest.request('POST', '/realtime/token', options);
  }

  /**
   * Sends a message to everyone connected to a room, through the REST API (no connection
   * needed). Resolves with the message's place in the room's order once accepted (202).
   */
  sendRealtimeMessage(message: SvcRealtimeMessage): Promise<{ seq: number }> {
    const { roomName, ...body } = message;
    return this.#rest.request(
      'POST',
      `/realtime/rooms/${encodeURIComponent(roomName)}/messages`,
      body,
    );
  }

  /**
   * Answers an invitation to a room without joining it: opens the room's signaling channel with a
   * token for these options, sends `invitation.accept` / `invitation.decline` and closes. Used by
   * `controller.acceptInvitation` / `declineInvitation` (accepting then connects).
   */
  async answerInvitation(
    options: SvcRoomOptions,
    invitationId: string,
    answer: 'accept' | 'decline' | 'busy',
  ): Promise<void> {
    const token = await this.getToken(options);
    this.#factory ??= await defaultWebSocketFactory();
    const channel = new Channel(this.#requestTimeoutMs);
    await channel.open(this.#factory, token.wsUrl);
    try {
      if (answer === 'accept') await channel.request('invitation.accept', { invitationId });
      else await channel.request('invitation.decline', { invitationId, busy: answer === 'busy' });
    } finally {
      channel.close(CLOSE_CODES.NORMAL);
    }
  }

  // ---- Connection --------------------------------------------------------------------------

  /**
   * Gets a token and joins the room; resolves with the room once joined (after waiting for a
   * host if the options say so). Rejects with an SvcError carrying the server's code:
   * `room_full`, `token_expired`, `token_invalid`, `room_not_found`, an API-key code
   * (`invalid_api_key`, `insufficient_scope`…), or a client code (`network_error`, `timeout`,
   * `client_disconnected` when `disconnect()` is called meanwhile). On failure the state is
   * `FAILED`. A client already in a room leaves it first.
   */
  async connect(options: SvcRoomOptions): Promise<SvcRoom> {
    return this.#connect(options, false);
  }

  /**
   * @internal A room switch the controller makes by itself (a move to or from a breakout room,
   * the return from a closed one). Nobody awaits it, so a failure that a later attempt may not
   * meet (network, timeout, 503…) is retried as a reconnection is: `RECONNECTING` with the same
   * backoff, `onConnected` once in the room, `FAILED` and `onDisconnected('RECONNECT_FAILED')`
   * after the policy's attempts. Rejects as `connect()` does once it gives up.
   */
  _switchRoom(options: SvcRoomOptions): Promise<SvcRoom> {
    return this.#connect(options, true);
  }

  async #connect(options: SvcRoomOptions, retry: boolean): Promise<SvcRoom> {
    if (this.#run) await this.disconnect();
    const run: Run = {
      options,
      token: null,
      channel: null,
      lastSeq: 0,
      departureGraceMs: 0,
      droppedAt: 0,
      ended: false,
    };
    this.#run = run;
    this.#lastError = null;
    this.#state.set(SvcConnectionState.CONNECTING);
    try {
      await this.#establish(run, false);
    } catch (err) {
      const error = asSvcError(err);
      if (run.ended) throw new SvcError('client_disconnected', 'disconnect() was called');
      if (!retry || !RETRYABLE.has(error.code)) {
        this.#fail(run, error, false);
        throw error;
      }
      if (error.code === 'token_expired') run.token = null;
      await this.#reconnectLoop(run, error.retryAfterMs).catch((err) => {
        if (!run.ended) this.#fail(run, asSvcError(err), true);
      });
      if (this.#run === run && this.#room) return this.#room;
      throw run.failure ?? new SvcError('client_disconnected', 'disconnect() was called');
    }
    run.connected = true;
    this.#state.set(SvcConnectionState.CONNECTED);
    notify(this.onConnected, this.#room!);
    return this.#room!;
  }

  /**
   * Leaves the room (others see `participant.left` with reason `LEFT`) and stops reconnecting.
   * Resolves when done; never rejects. A pending `connect()` rejects with `client_disconnected`.
   * After a failure it moves the state from `FAILED` to `DISCONNECTED`.
   */
  async disconnect(): Promise<void> {
    const run = this.#run;
    if (!run) {
      if (this.#state.value === SvcConnectionState.FAILED) {
        this.#state.set(SvcConnectionState.DISCONNECTED);
      }
      return;
    }
    const wasInRoom = this.#room !== null;
    this.#stop(run);
    const channel = run.channel;
    run.channel = null;
    if (channel?.isOpen && run.sessionId) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        channel.request('session.leave', {}).catch(() => {}),
        new Promise((resolve) => {
          timer = setTimeout(resolve, LEAVE_TIMEOUT_MS);
        }),
      ]);
      clearTimeout(timer);
      channel.close(CLOSE_CODES.NORMAL);
    } else {
      channel?.abandon();
    }
    this.#room = null;
    this.controller._reset();
    this.#state.set(SvcConnectionState.DISCONNECTED);
    if (wasInRoom) notify(this.onDisconnected, 'CLIENT_DISCONNECT');
  }

  // ---- Media -------------------------------------------------------------------------------

  #needMedia(): MediaSession {
    if (!this.#media || !this.#room) throw notConnected();
    return this.#media;
  }

  /**
   * Captures the camera (getUserMedia) and publishes it; resolves with the track id once the
   * server has answered. Rejects with `media_permission_denied`, `media_device_not_found`,
   * `media_device_failed`, `media_not_supported` (no WebRTC here), or the server's code
   * (`media_not_allowed` in an AUDIO_CONFERENCE or for a LIVE_STREAMING viewer,
   * `media_unavailable`). A no-op when the camera is already on.
   */
  async enableCamera(options: SvcVideoOptions = {}): Promise<string | null> {
    return this.#needMedia().enable('camera', options);
  }

  /** Stops publishing the camera and releases it. */
  async disableCamera(): Promise<void> {
    await this.#media?.disable('camera');
  }

  /** Captures the microphone and publishes it (errors as enableCamera). */
  async enableMicrophone(options: SvcAudioOptions = {}): Promise<string | null> {
    return this.#needMedia().enable('microphone', options);
  }

  /** Stops publishing the microphone and releases it. */
  async disableMicrophone(): Promise<void> {
    await this.#media?.disable('microphone');
  }

  /** Mutes or unmutes the published microphone without renegotiation (others see media.muted). */
  async setMicrophoneMuted(muted: boolean): Promise<void> {
    await this.#media?.setMuted('microphone', muted);
  }

  /** Captures a screen (getDisplayMedia) and publishes it as `screen` (errors as enableCamera). */
  async enableScreenShare(options: SvcVideoOptions = {}): Promise<string | null> {
    return this.#needMedia().enable('screen', options);
  }

  /** Stops the screen share. */
  async disableScreenShare(): Promise<void> {
    await this.#media?.disable('screen');
  }

  /** Subscribes to a remote track (only needed with `autoSubscribe: false`). */
  async subscribe(trackId: string): Promise<void> {
    await this.#needMedia().subscribe(trackId);
  }

  /** Stops receiving a remote track. */
  async unsubscribe(trackId: string): Promise<void> {
    await this.#media?.unsubscribe(trackId);
  }

  // ---- Internals ---------------------------------------------------------------------------

  /** Marks the run over and releases its timers; the caller sets the state. */
  #stop(run: Run) {
    run.ended = true;
    this.#media?.close();
    this.#media = null;
    if (run.heartbeat) clearInterval(run.heartbeat);
    run.wake?.();
    if (this.#run === run) this.#run = null;
  }

  #fail(run: Run, error: SvcError, notifyApp: boolean) {
    run.failure = error;
    this.#stop(run);
    run.channel?.abandon();
    run.channel = null;
    this.#room = null;
    this.controller._reset();
    this.#lastError = error;
    this.#state.set(SvcConnectionState.FAILED);
    if (notifyApp) notify(this.onDisconnected, 'RECONNECT_FAILED');
  }

  #end(run: Run, reason: SvcDisconnectReason, message?: string) {
    this.#stop(run);
    run.channel?.abandon();
    run.channel = null;
    this.#room = null;
    if (reason === 'ROOM_DELETED') this.controller._roomDeleted();
    this.controller._reset();
    this.#state.set(SvcConnectionState.DISCONNECTED);
    notify(this.onDisconnected, reason, message !== undefined ? { message } : undefined);
  }

  /**
   * Opens a channel and joins (or resumes, falling back to a fresh join). Resolves once the
   * session is established; the channel is then `run.channel`.
   */
  async #establish(run: Run, resume: boolean): Promise<'joined' | 'resumed'> {
    const ensureActive = () => {
      if (run.ended) throw new SvcError('client_disconnected', 'disconnect() was called');
    };
    if (!run.token || Date.parse(run.token.expiresAt) - Date.now() < TOKEN_RENEW_MARGIN_MS) {
      run.token = await this.getToken(run.options);
    }
    ensureActive();
    this.#factory ??= await defaultWebSocketFactory();
    ensureActive();

    const channel = new Channel(this.#requestTimeoutMs);
    run.channel = channel;
    let settled = false;
    let settle!: { resolve(v: 'joined' | 'resumed'): void; reject(e: SvcError): void };
    const outcome = new Promise<'joined' | 'resumed'>((resolve, reject) => {
      settle = { resolve, reject };
    });
    outcome.catch(() => {});
    const finish = (result: 'joined' | 'resumed' | SvcError) => {
      if (settled) return;
      settled = true;
      clearTimeout(handshakeTimer);
      if (result instanceof SvcError) settle.reject(result);
      else settle.resolve(result);
    };
    // The whole handshake is bounded, except the wait for a host (cleared on session.waiting).
    const handshakeTimer = setTimeout(() => {
      finish(new SvcError('timeout', `No session within ${this.#requestTimeoutMs} ms`));
      channel.abandon();
    }, this.#requestTimeoutMs);

    channel.onFrame = (frame) => {
      if (run.channel !== channel || run.ended) return;
      this.#onFrame(run, frame, {
        established: (how) => finish(how),
        waiting: () => clearTimeout(handshakeTimer),
      });
    };
    channel.onClose = (close) => {
      if (!settled) {
        finish(errorOfClose(close));
        return;
      }
      this.#onChannelClosed(run, channel, close);
    };

    try {
      await channel.open(this.#factory, run.token.wsUrl);
      ensureActive();
      let joinNeeded = true;
      if (resume && run.sessionId && run.resumeToken) {
        try {
          await channel.request('session.resume', {
            sessionId: run.sessionId,
            resumeToken: run.resumeToken,
            lastSeq: run.lastSeq,
          });
          joinNeeded = false;
        } catch (err) {
          // resume_failed leaves the socket open for a fresh join (docs/realtime-protocol.md §5).
          if (asSvcError(err).code !== 'resume_failed') throw err;
        }
      }
      if (joinNeeded) await channel.request('session.join', {});
      const how = await outcome;
      ensureActive();
      if (this.#heartbeatIntervalMs > 0) this.#startHeartbeat(run, channel);
      return how;
    } catch (err) {
      finish(asSvcError(err));
      if (run.channel === channel) run.channel = null;
      channel.abandon();
      throw err;
    }
  }

  #startHeartbeat(run: Run, channel: Channel) {
    if (run.heartbeat) clearInterval(run.heartbeat);
    run.heartbeat = setInterval(() => {
      if (run.channel !== channel || !channel.isOpen) return;
      channel.request('ping', {}).catch((err) => {
        // A ping lost in a half-open connection: treat it as the drop it is.
        if (asSvcError(err).code === 'timeout' && run.channel === channel) channel.abandon();
      });
    }, this.#heartbeatIntervalMs);
  }

  #onFrame(
    run: Run,
    frame: ServerFrame,
    handshake: { established(how: 'joined' | 'resumed'): void; waiting(): void },
  ) {
    switch (frame.type) {
      case 'session.joined': {
        const snapshot = frame.data as RoomSnapshot;
        run.sessionId = snapshot.sessionId;
        run.resumeToken = snapshot.resumeToken;
        run.departureGraceMs = snapshot.departureGraceMs;
        run.lastSeq = frame.seq ?? 0;
        if (this.#room) {
          // A full rejoin after a failed resume: tell the app what changed while it was away.
          const { joined, left } = this.#room.applySnapshot(snapshot);
          for (const p of left) notify(this.onUserLeft, p, undefined);
          for (const p of joined) notify(this.onUserJoined, p);
        } else {
          const transport = {
            request: (type: string, data: unknown) => {
              const channel = run.channel;
              if (!channel?.isOpen || run.ended) return Promise.reject(notConnected());
              return channel.request(type, data);
            },
          };
          this.#room = new SvcRoom(snapshot, transport);
          this.#media = this.#newMedia(transport);
          this.#room.media = this.#media;
        }
        this.controller._snapshot(
          snapshot.controller as ControllerSnapshot | undefined,
          run.lastSeq,
          run.options,
        );
        this.#media?.applySnapshot(snapshot.self.sid, snapshot.media);
        handshake.established('joined');
        return;
      }
      case 'session.resumed':
        this.#media?.afterResume(
          (frame.data as { subscriptions?: string[] } | undefined)?.subscriptions,
        );
        handshake.established('resumed');
        return;
      case 'session.waiting':
        handshake.waiting();
        notify(
          this.onWaitingForHost,
          (frame.data as { reason?: 'NO_HOST' | 'APPROVAL' } | undefined)?.reason ?? 'NO_HOST',
        );
        return;
      case 'session.admitted':
      case 'session.closed':
      case 'error':
        return;
      case 'media.trickle': {
        const d = frame.data as { id: string; candidate: Record<string, unknown> | null };
        this.#media?.applyTrickle(d.id, d.candidate);
        return;
      }
      case 'media.ended':
        this.#media?.applyEnded((frame.data as { id: string }).id);
        return;
    }
    if (typeof frame.seq !== 'number' || !this.#room) return;
    if (frame.seq <= run.lastSeq) return;
    run.lastSeq = frame.seq;
    this.#applyEvent(run, this.#room, frame.type, frame);
    this.controller._event(this.#room, frame.type, frame.data, frame.seq, frame.ts ?? 0);
  }

  #applyEvent(run: Run, room: SvcRoom, type: string, frame: ServerFrame) {
    const self = room.localParticipant;
    switch (type) {
      case 'participant.joined': {
        const { participant } = frame.data as RoomEventData['participant.joined'];
        if (room.upsert(participant) && participant.sid !== self.sid) {
          notify(this.onUserJoined, participant);
        }
        return;
      }
      case 'participant.left': {
        const { participant, reason } = frame.data as RoomEventData['participant.left'];
        if (participant.sid === self.sid) return;
        if (room.remove(participant.sid)) notify(this.onUserLeft, participant, reason);
        return;
      }
      case 'message.received': {
        const data = frame.data as RoomEventData['message.received'];
        const message: SvcReceivedMessage = {
          roomName: room.name,
          message: data.message,
          sender: data.sender,
          seq: frame.seq!,
          ts: frame.ts ?? 0,
          viaApi: data.viaApi,
        };
        const participant = data.sender.sid ? (room.getParticipant(data.sender.sid) ?? null) : null;
        notify(this.onMessageReceived, message, participant);
        return;
      }
      case 'room.metadata_changed': {
        const { metadata } = frame.data as RoomEventData['room.metadata_changed'];
        room.setMetadata(metadata);
        notify(this.onRoomMetadataChanged, metadata);
        return;
      }
      case 'room.deleted':
        run.endReason = 'ROOM_DELETED';
        return;
    }
    if (type.startsWith('media.')) this.#media?.applyEvent(type, frame.data);
  }

  #newMedia(transport: { request(type: string, data: unknown): Promise<Record<string, unknown>> }) {
    const who = (track: SvcTrackInfo) => this.#room?.getParticipant(track.sid) ?? null;
    return new MediaSession(transport, this.#autoSubscribe, this.#iceTransportPolicy, {
      started: (track) => notify(this.onMediaStarted, who(track), track, track.kind),
      stopped: (track) => notify(this.onMediaStopped, who(track), track, track.kind),
      muted: (track) => notify(this.onMediaMuted, who(track), track),
      failed: (err) => notify(this.onMediaError, asSvcError(err)),
      recovering: (active) => this.#onMediaRecovering(active),
    });
  }

  /**
   * Lost media shows as RECONNECTING while the socket is up: the state leaves CONNECTED when the
   * recovery starts and comes back when it ends. During a socket reconnection, the loop's end
   * waits for it instead.
   */
  #onMediaRecovering(active: boolean) {
    const run = this.#run;
    if (!run || run.ended || !run.channel?.isOpen) return;
    if (active && this.#state.value === SvcConnectionState.CONNECTED) {
      this.#state.set(SvcConnectionState.RECONNECTING);
      notify(this.onReconnecting);
    } else if (
      !active &&
      this.#state.value === SvcConnectionState.RECONNECTING &&
      !run.reconnecting
    ) {
      this.#state.set(SvcConnectionState.CONNECTED);
      notify(this.onReconnected);
    }
  }

  #onChannelClosed(run: Run, channel: Channel, close: ChannelClose) {
    if (run.ended || run.channel !== channel) return;
    run.channel = null;
    if (run.heartbeat) clearInterval(run.heartbeat);
    const reason = endReasonOf(run, close);
    if (reason) {
      this.#end(run, reason, close.sessionClosed?.message);
      return;
    }
    this.#reconnectLoop(run).catch((err) => {
      if (!run.ended) this.#fail(run, asSvcError(err), true);
    });
  }

  /** Reconnects `run`; `retryAfterMs`: the server asked to wait that long before the first attempt. */
  async #reconnectLoop(run: Run, retryAfterMs = 0) {
    run.reconnecting = true;
    try {
      await this.#reconnectAttempts(run, retryAfterMs);
    } finally {
      run.reconnecting = false;
    }
  }

  async #reconnectAttempts(run: Run, firstRetryAfterMs: number) {
    run.droppedAt = Date.now();
    this.#state.set(SvcConnectionState.RECONNECTING);
    notify(this.onReconnecting);
    const policy = this.#reconnect;
    let lastError = new SvcError('reconnect_failed', 'Reconnection was disabled');
    let retryAfter = firstRetryAfterMs;
    for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
      const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
      // At least as long as the server asked (Retry-After of a 429 or 503), up to a minute.
      const asked = Math.min(retryAfter, MAX_RETRY_AFTER_MS);
      await this.#sleep(run, Math.max(base * (0.5 + this.#random() / 2), asked));
      if (run.ended) return;
      const canResume = Date.now() - run.droppedAt < run.departureGraceMs;
      try {
        await this.#establish(run, canResume);
      } catch (err) {
        if (run.ended) return;
        lastError = asSvcError(err);
        retryAfter = lastError.retryAfterMs ?? 0;
        if (!RETRYABLE.has(lastError.code)) break;
        if (lastError.code === 'token_expired') run.token = null;
        continue;
      }
      if (run.ended) return;
      // Media the server lost meanwhile is still coming back: #onMediaRecovering ends this.
      if (this.#media?.recovering) return;
      this.#state.set(SvcConnectionState.CONNECTED);
      if (run.connected) {
        notify(this.onReconnected);
      } else {
        run.connected = true;
        notify(this.onConnected, this.#room!);
      }
      return;
    }
    const error = RETRYABLE.has(lastError.code)
      ? new SvcError('reconnect_failed', `Gave up reconnecting: ${lastError.message}`, {
          closeCode: lastError.closeCode,
        })
      : lastError;
    this.#fail(run, error, true);
  }

  #sleep(run: Run, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        run.wake = undefined;
        resolve();
      }
      run.wake = done;
    });
  }
}

function asSvcError(err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  return new SvcError('network_error', err instanceof Error ? err.message : String(err));
}

/** The leave reason when a close ends the session, or undefined when the client reconnects. */
function endReasonOf(run: Run, close: ChannelClose): LeaveReason | undefined {
  if (run.endReason) return run.endReason;
  if (RECONNECT_CLOSE_CODES.has(close.closeCode)) return undefined;
  const stated = close.sessionClosed?.reason;
  if (stated && (LEAVE_REASONS as readonly string[]).includes(stated)) {
    return stated as LeaveReason;
  }
  return CLOSE_REASONS[close.closeCode] ?? (close.closeCode >= 4000 ? 'DISCONNECTED' : undefined);
}

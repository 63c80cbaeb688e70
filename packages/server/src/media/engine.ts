import { randomBytes } from 'node:crypto';
import type { MediaConfig } from './config.ts';
import { type JanusAsyncEvent, JanusError, JanusSocket } from './janus-client.ts';
import { JanusProcess } from './janus-process.ts';

/** The engine's view of its own health, for /readyz and the logs. */
export interface MediaHealth {
  /** `off`: no engine configured; `starting`/`down`: not usable now; `up`: serving. */
  state: 'off' | 'starting' | 'up' | 'down';
  /** Human-readable: where the engine is, or why media is off and how to turn it on. */
  detail: string;
  /** Times the engine was lost and reconnected (a restart of the embedded Janus counts). */
  restarts: number;
}

/** A failure of an engine request; `invalidSdp` when the engine refused the description. */
export class MediaEngineError extends Error {
  constructor(
    message: string,
    readonly invalidSdp = false,
  ) {
    super(message);
  }
}

/** Something the engine reports about one of its handles without being asked. */
export type HandleEvent =
  | { type: 'hangup'; handleId: string; reason: string }
  | { type: 'trickle'; handleId: string; candidate: Record<string, unknown> | null };

/**
 * A media engine (SFU): rooms, publishers and subscribers with SDP and trickle. Implemented by
 * {@link JanusEngine}; another SFU (e.g. LiveKit) would implement the same. Room keys are numbers
 * the caller derives from its room ids. Every method rejects with a MediaEngineError when the
 * engine is down or refuses.
 */
export interface MediaEngine {
  health(): MediaHealth;
  /** Resolves once the engine serves requests; rejects after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>;
  /** Creates the SFU room when it does not exist yet (idempotent). */
  ensureRoom(roomKey: number): Promise<void>;
  /** Destroys the SFU room and with it every handle in it (idempotent). */
  destroyRoom(roomKey: number): Promise<void>;
  /** Joins a publisher with the client's offer; resolves with the answer and the feed id. */
  publish(
    roomKey: number,
    display: string,
    offerSdp: string,
  ): Promise<{ handleId: string; feedId: number; mid: string; answerSdp: string }>;
  /**
   * Joins a subscriber to one feed; resolves with the engine's offer. A feed whose publisher's
   * PeerConnection is not up yet is waited for, up to `waitMs`.
   */
  subscribe(
    roomKey: number,
    feedId: number,
    waitMs: number,
  ): Promise<{ handleId: string; offerSdp: string }>;
  /** Gives a subscriber the client's answer. */
  answer(handleId: string, answerSdp: string): Promise<void>;
  /** A client's ICE candidate (null: end of candidates) for a handle. */
  trickle(handleId: string, candidate: Record<string, unknown> | null): Promise<void>;
  /** Server-side mute of one publisher's track: the SFU stops forwarding it (VideoRoom `moderate`). */
  moderate(roomKey: number, feedId: number, mid: string, muted: boolean): Promise<void>;
  /**
   * Starts (`dir` set) or stops (`dir` null) writing every publisher of the SFU room, present and
   * joining later, to `.mjr` files in `dir` (VideoRoom `edit` `new_rec_dir` + `enable_recording`).
   * Starting creates the SFU room when it does not exist yet.
   */
  recordRoom(roomKey: number, dir: string | null): Promise<void>;
  /** Asks a publisher handle's sender for a keyframe (VideoRoom `configure` `keyframe: true`). */
  keyframe(handleId: string): Promise<void>;
  /** Ends a handle (its PeerConnection closes). Resolves even when it is already gone. */
  detach(handleId: string): Promise<void>;
  /** The ids of the handles this engine connection holds. */
  handles(): string[];
  /** How loaded the engine is (its number of rooms); rejects when it does not answer. */
  load(): Promise<number>;
  /** Handle events (hangups, server-side candidates). */
  onHandleEvent: (event: HandleEvent) => void;
  /** Called when the engine is lost (its connection dropped): every handle and room is gone. */
  onLost: () => void;
  /** Called when the engine came back after being lost. */
  onRestart: () => void;
  close(): Promise<void>;
}

const VIDEOROOM = 'janus.plugin.videoroom';
/** Janus core codes for an SDP it could not take (JSEP unknown type / invalid SDP / unexpected answer). */
const SDP_CODES = new Set([464, 465, 466, 469, 470]);
/** Janus core "unauthorized": a request without the right secret. */
const JANUS_UNAUTHORIZED = 403;
/** VideoRoom "room already exists" / "no such room". */
const ROOM_EXISTS = 427;
const NO_SUCH_ROOM = 426;
/** VideoRoom "no such feed": also what a publisher whose PeerConnection is not up yet gives. */
const NO_SUCH_FEED = 428;

/**
 * The media engine over Janus's WebSocket API: one Janus session per server node, one handle per
 * publisher or subscriber. With a `process` it also supervises an embedded Janus; either way it
 * reconnects when the socket drops (Janus died or restarted) and then reports `onRestart`, since
 * Janus ends a session's handles with its transport.
 */
export class JanusEngine implements MediaEngine {
  private socket: JanusSocket | null = null;
  private sessionId: number | null = null;
  private control: number | null = null;
  private state: MediaHealth['state'] = 'starting';
  private lastError = '';
  private restarts = 0;
  private everUp = false;
  private closed = false;
  private rooms = new Set<number>();
  private live = new Set<string>();
  private keepalive: NodeJS.Timeout | null = null;
  private connecting: Promise<void> | null = null;
  onHandleEvent: (event: HandleEvent) => void = () => {};
  onLost: () => void = () => {};
  onRestart: () => void = () => {};

  constructor(
    readonly url: string,
    private readonly process: JanusProcess | null,
    private readonly log: { info(o: object, m: string): void; warn(o: object, m: string): void },
  ) {}

  /** The embedded engine: Janus as a supervised child of this server. */
  static embedded(cfg: MediaConfig, log: JanusEngine['log']) {
    const secret = cfg.janusAdminSecret ?? randomBytes(18).toString('base64url');
    const proc = new JanusProcess(cfg, secret);
    const engine = new JanusEngine(proc.wsUrl, proc, log);
    proc.onExit = (reason) => {
      log.warn({ reason }, 'media: Janus exited; restarting it');
    };
    proc.onStart = () => engine.reconnectSoon();
    proc.start();
    return engine;
  }

  /** The embedded Janus's admin API address and secret (null for an external Janus). */
  get admin() {
    return this.process ? { url: this.process.adminUrl, secret: this.process.adminSecret } : null;
  }

  /** The embedded Janus's process id. */
  get pid() {
    return this.process?.pid ?? null;
  }

  /** Resolves once connected (or rejects after `timeoutMs`). */
  async ready(timeoutMs = 10_000) {
    const deadline = Date.now() + timeoutMs;
    this.reconnectSoon();
    while (this.state !== 'up') {
      if (Date.now() > deadline || this.closed) throw new MediaEngineError(this.health().detail);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  health(): MediaHealth {
    const where = this.process ? `embedded Janus (pid ${this.process.pid ?? '-'})` : 'Janus';
    const detail =
      this.state === 'up'
        ? `${where} at ${this.url}`
        : `${where} at ${this.url} is ${this.state}${this.lastError ? `: ${this.lastError}` : ''}`;
    return { state: this.state, detail, restarts: this.restarts };
  }

  private reconnectSoon() {
    if (!this.connecting && this.state !== 'up') void this.connectLoop();
  }

  /** Connects with retries (50 ms doubling to 1 s) until up or closed. */
  private connectLoop(): Promise<void> {
    if (this.connecting) return this.connecting;
    this.connecting = (async () => {
      let delay = 50;
      while (!this.closed && this.state !== 'up') {
        try {
          await this.connectOnce();
        } catch (err) {
          this.lastError = (err as Error).message;
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 1000);
        }
      }
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async connectOnce() {
    if (this.process) await this.checkOwnership(this.process);
    const socket = new JanusSocket(this.url);
    await socket.open();
    try {
      const created = await socket.request({ janus: 'create' });
      const sessionId = (created.data as { id: number }).id;
      const attached = await socket.request({
        janus: 'attach',
        session_id: sessionId,
        plugin: VIDEOROOM,
      });
      this.socket = socket;
      this.sessionId = sessionId;
      this.control = (attached.data as { id: number }).id;
      if (this.closed) {
        // close() ran while this connection was being set up: it must not outlive the engine.
        await socket.request({ janus: 'destroy', session_id: sessionId }).catch(() => {});
        throw new MediaEngineError('The media engine was closed.');
      }
    } catch (err) {
      this.socket = null;
      socket.close();
      throw err;
    }
    socket.onEvent = (ev) => this.onEvent(ev);
    socket.onClose = () => this.lost('the connection to Janus closed');
    this.rooms.clear();
    this.live.clear();
    this.state = 'up';
    this.lastError = '';
    this.keepalive = setInterval(() => {
      void socket.request({ janus: 'keepalive', session_id: this.sessionId }, true).catch(() => {});
    }, 25_000).unref();
    const wasUp = this.everUp;
    this.everUp = true;
    this.log.info({ url: this.url }, wasUp ? 'media: Janus is back' : 'media: Janus connected');
    if (wasUp) {
      this.restarts += 1;
      this.onRestart();
    }
  }

  /**
   * Whether the Janus answering on the embedded ports is this server's own: its admin API knows
   * the secret this server generated. Another process (a second server on the same ports, or a
   * Janus left by something else) answers `unauthorized`, and this engine stays down, naming the
   * ports, instead of putting its rooms on a Janus it does not supervise.
   */
  private async checkOwnership(proc: JanusProcess) {
    const admin = new JanusSocket(proc.adminUrl, 'janus-admin-protocol', 5000);
    await admin.open();
    try {
      await admin.request({ janus: 'get_status', admin_secret: proc.adminSecret });
    } catch (err) {
      if (err instanceof JanusError && err.janusCode === JANUS_UNAUTHORIZED) {
        throw new MediaEngineError(
          `the Janus at ${this.url} is not this server's embedded Janus (another process holds its ports; set SVC_JANUS_WS_PORT and SVC_JANUS_ADMIN_PORT): ${err.message}`,
        );
      }
      throw err;
    } finally {
      admin.close();
    }
  }

  private lost(reason: string) {
    if (this.keepalive) clearInterval(this.keepalive);
    this.keepalive = null;
    this.socket = null;
    this.sessionId = null;
    this.control = null;
    this.rooms.clear();
    this.live.clear();
    if (this.closed) return;
    this.state = 'down';
    this.lastError = reason;
    this.log.warn({ url: this.url, reason }, 'media: Janus lost; reconnecting');
    this.onLost();
    // An embedded Janus reconnects when its process is back (onStart); an external one by polling.
    void this.connectLoop();
  }

  private onEvent(ev: JanusAsyncEvent) {
    const handleId = ev.sender !== undefined ? String(ev.sender) : null;
    if (!handleId || !this.live.has(handleId)) return;
    if (ev.janus === 'hangup' || ev.janus === 'detached') {
      // After a hangup the handle still exists in Janus until it is detached.
      if (ev.janus === 'detached') this.live.delete(handleId);
      this.onHandleEvent({ type: 'hangup', handleId, reason: String(ev.reason ?? ev.janus) });
    } else if (ev.janus === 'trickle') {
      const c = ev.candidate as Record<string, unknown> | undefined;
      const candidate = !c || c.completed === true ? null : c;
      this.onHandleEvent({ type: 'trickle', handleId, candidate });
    }
  }

  private need() {
    if (this.state !== 'up' || !this.socket || this.sessionId === null || this.control === null) {
      throw new MediaEngineError(`Janus is not available: ${this.health().detail}`);
    }
    return { socket: this.socket, sessionId: this.sessionId, control: this.control };
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof MediaEngineError) throw err;
      if (err instanceof JanusError) {
        throw new MediaEngineError(
          `Janus: ${err.message} (${err.janusCode})`,
          SDP_CODES.has(err.janusCode),
        );
      }
      throw err;
    }
  }

  private async controlRequest(body: Record<string, unknown>) {
    const { socket, sessionId, control } = this.need();
    const res = await socket.request({
      janus: 'message',
      session_id: sessionId,
      handle_id: control,
      body,
    });
    return (res.plugindata as { data: Record<string, unknown> }).data;
  }

  async ensureRoom(roomKey: number) {
    if (this.rooms.has(roomKey)) return;
    await this.call(async () => {
      try {
        await this.controlRequest({
          request: 'create',
          room: roomKey,
          permanent: false,
          publishers: 1000,
          bitrate: 1_024_000,
          fir_freq: 10,
          audiocodec: 'opus',
          videocodec: 'vp8,h264,vp9',
          notify_joining: false,
        });
      } catch (err) {
        if (!(err instanceof JanusError && err.janusCode === ROOM_EXISTS)) throw err;
      }
      this.rooms.add(roomKey);
    });
  }

  async destroyRoom(roomKey: number) {
    this.rooms.delete(roomKey);
    if (this.state !== 'up') return;
    await this.call(async () => {
      try {
        await this.controlRequest({ request: 'destroy', room: roomKey, permanent: false });
      } catch (err) {
        if (!(err instanceof JanusError && err.janusCode === NO_SUCH_ROOM)) throw err;
      }
    });
  }

  private async attach() {
    const { socket, sessionId } = this.need();
    const res = await socket.request({ janus: 'attach', session_id: sessionId, plugin: VIDEOROOM });
    const handleId = String((res.data as { id: number }).id);
    this.live.add(handleId);
    return handleId;
  }

  private async message(handleId: string, body: Record<string, unknown>, jsep?: object) {
    const { socket, sessionId } = this.need();
    const res = await socket.request({
      janus: 'message',
      session_id: sessionId,
      handle_id: Number(handleId),
      body,
      ...(jsep ? { jsep } : {}),
    });
    return {
      data: (res.plugindata as { data: Record<string, unknown> } | undefined)?.data ?? {},
      jsep: res.jsep as { type: string; sdp: string } | undefined,
    };
  }

  async publish(roomKey: number, display: string, offerSdp: string) {
    return this.call(async () => {
      await this.ensureRoom(roomKey);
      const handleId = await this.attach();
      try {
        const joined = await this.message(handleId, {
          request: 'join',
          ptype: 'publisher',
          room: roomKey,
          display: display.slice(0, 200),
        });
        const feedId = Number(joined.data.id);
        const res = await this.message(
          handleId,
          { request: 'publish' },
          { type: 'offer', sdp: offerSdp },
        );
        if (!res.jsep?.sdp) throw new MediaEngineError('Janus gave no answer to the offer.', true);
        const streams = (res.data.streams as { mid?: string }[] | undefined) ?? [];
        return { handleId, feedId, mid: streams[0]?.mid ?? '0', answerSdp: res.jsep.sdp };
      } catch (err) {
        await this.detach(handleId);
        throw err;
      }
    });
  }

  async subscribe(roomKey: number, feedId: number, waitMs: number) {
    return this.call(async () => {
      const handleId = await this.attach();
      const deadline = Date.now() + waitMs;
      try {
        let res: Awaited<ReturnType<JanusEngine['message']>>;
        for (;;) {
          try {
            res = await this.message(handleId, {
              request: 'join',
              ptype: 'subscriber',
              room: roomKey,
              streams: [{ feed: feedId }],
            });
            break;
          } catch (err) {
            const notYet = err instanceof JanusError && err.janusCode === NO_SUCH_FEED;
            if (!notYet || Date.now() >= deadline) throw err;
            await new Promise((r) => setTimeout(r, 50));
          }
        }
        if (!res.jsep?.sdp) throw new MediaEngineError('Janus gave no offer for the subscription.');
        return { handleId, offerSdp: res.jsep.sdp };
      } catch (err) {
        await this.detach(handleId);
        throw err;
      }
    });
  }

  async answer(handleId: string, answerSdp: string) {
    await this.call(() =>
      this.message(handleId, { request: 'start' }, { type: 'answer', sdp: answerSdp }),
    );
  }

  async trickle(handleId: string, candidate: Record<string, unknown> | null) {
    await this.call(async () => {
      const { socket, sessionId } = this.need();
      await socket.request(
        {
          janus: 'trickle',
          session_id: sessionId,
          handle_id: Number(handleId),
          candidate: candidate ?? { completed: true },
        },
        true,
      );
    });
  }

  async moderate(roomKey: number, feedId: number, mid: string, muted: boolean) {
    await this.call(() =>
      this.controlRequest({ request: 'moderate', room: roomKey, id: feedId, mid, mute: muted }),
    );
  }

  async recordRoom(roomKey: number, dir: string | null) {
    await this.call(async () => {
      if (dir === null) {
        try {
          await this.controlRequest({ request: 'enable_recording', room: roomKey, record: false });
        } catch (err) {
          if (!(err instanceof JanusError && err.janusCode === NO_SUCH_ROOM)) throw err;
        }
        return;
      }
      await this.ensureRoom(roomKey);
      await this.controlRequest({ request: 'edit', room: roomKey, new_rec_dir: dir });
      await this.controlRequest({ request: 'enable_recording', room: roomKey, record: true });
    });
  }

  async keyframe(handleId: string) {
    await this.call(() => this.message(handleId, { request: 'configure', keyframe: true }));
  }

  async detach(handleId: string) {
    const had = this.live.delete(handleId);
    if (!had || this.state !== 'up' || !this.socket || this.sessionId === null) return;
    await this.socket
      .request({ janus: 'detach', session_id: this.sessionId, handle_id: Number(handleId) })
      .catch(() => {});
  }

  handles() {
    return [...this.live];
  }

  async load() {
    return this.call(async () => {
      const data = await this.controlRequest({ request: 'list' });
      return ((data.list as unknown[]) ?? []).length;
    });
  }

  async close() {
    this.closed = true;
    this.state = 'down';
    if (this.keepalive) clearInterval(this.keepalive);
    const socket = this.socket;
    if (socket && this.sessionId !== null) {
      await socket.request({ janus: 'destroy', session_id: this.sessionId }).catch(() => {});
    }
    socket?.close();
    await this.process?.stop();
  }
}

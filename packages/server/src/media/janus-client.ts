import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';

/** A failure reported by Janus (core or plugin) or by the connection to it. */
export class JanusError extends Error {
  constructor(
    /** The Janus error code (core 4xx, VideoRoom 4xx), or 0 for a transport failure. */
    readonly janusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** A message Janus sends without being asked (webrtcup, media, hangup, detached, trickle, event). */
export interface JanusAsyncEvent {
  janus: string;
  sender?: number;
  plugindata?: { plugin: string; data: Record<string, unknown> };
  jsep?: { type: string; sdp: string };
  candidate?: unknown;
  [key: string]: unknown;
}

interface Pending {
  resolve: (msg: Record<string, unknown>) => void;
  reject: (err: Error) => void;
  /** Resolve on Janus's `ack` (trickle, keepalive) instead of waiting for the result. */
  ackIsEnough: boolean;
  timer: NodeJS.Timeout;
}

/**
 * A thin client for the Janus WebSocket API (`janus-protocol`, or `janus-admin-protocol` for the
 * admin API): one socket, requests matched to answers by transaction. A plugin request that
 * Janus handles asynchronously is answered `ack` first and its result arrives later as an `event`
 * with the same transaction; `request` waits for that result. Messages without a transaction go
 * to `onEvent`. The socket's end rejects every pending request and calls `onClose`.
 */
export class JanusSocket {
  private ws: WebSocket | null = null;
  private pending = new Map<string, Pending>();
  onEvent: (event: JanusAsyncEvent) => void = () => {};
  onClose: () => void = () => {};

  constructor(
    readonly url: string,
    private readonly protocol: 'janus-protocol' | 'janus-admin-protocol' = 'janus-protocol',
    private readonly timeoutMs = 10_000,
  ) {}

  /** Opens the socket; rejects when Janus does not accept it within the timeout. */
  async open(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(this.url, this.protocol, { handshakeTimeout: this.timeoutMs });
      const fail = (err: Error) => {
        ws.removeAllListeners();
        ws.on('error', () => {});
        ws.terminate();
        reject(new JanusError(0, `Janus at ${this.url}: ${err.message}`));
      };
      ws.once('error', fail);
      ws.once('open', () => {
        ws.off('error', fail);
        ws.on('error', () => {});
        this.ws = ws;
        ws.on('message', (raw) => this.onMessage(raw.toString()));
        ws.on('close', () => this.closed());
        resolve();
      });
    });
  }

  get isOpen() {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  /**
   * Sends `body` with a new transaction and resolves with Janus's answer (`success`, or the
   * plugin's `event` for an asynchronous request; `ack` when `ackIsEnough`). Janus `error`
   * answers and plugin events carrying `error_code` reject with a JanusError.
   */
  request(body: Record<string, unknown>, ackIsEnough = false): Promise<Record<string, unknown>> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new JanusError(0, 'Janus is not connected.'));
    }
    const transaction = randomBytes(9).toString('base64url');
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(transaction);
        reject(new JanusError(0, `Janus did not answer "${String(body.janus)}" in time.`));
      }, this.timeoutMs);
      this.pending.set(transaction, { resolve, reject, ackIsEnough, timer });
      ws.send(JSON.stringify({ ...body, transaction }));
    });
  }

  private onMessage(text: string) {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    const transaction = typeof msg.transaction === 'string' ? msg.transaction : null;
    const pending = transaction ? this.pending.get(transaction) : undefined;
    if (!pending || !transaction) {
      this.onEvent(msg as JanusAsyncEvent);
      return;
    }
    if (msg.janus === 'ack' && !pending.ackIsEnough) return;
    this.pending.delete(transaction);
    clearTimeout(pending.timer);
    if (msg.janus === 'error') {
      const e = (msg.error ?? {}) as { code?: number; reason?: string };
      pending.reject(new JanusError(e.code ?? 0, e.reason ?? 'Janus error'));
      return;
    }
    const data = (msg.plugindata as { data?: Record<string, unknown> } | undefined)?.data;
    if (data && typeof data.error_code === 'number') {
      pending.reject(new JanusError(data.error_code, String(data.error ?? 'plugin error')));
      return;
    }
    // An asynchronous answer may also carry events meant for onEvent (e.g. a jsep); the caller
    // gets the whole message.
    pending.resolve(msg);
  }

  private closed() {
    this.ws = null;
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new JanusError(0, 'The connection to Janus closed.'));
    }
    this.pending.clear();
    this.onClose();
  }

  close() {
    const ws = this.ws;
    this.ws = null;
    if (!ws) return;
    ws.removeAllListeners('close');
    ws.on('error', () => {});
    ws.terminate();
    this.closed();
  }
}

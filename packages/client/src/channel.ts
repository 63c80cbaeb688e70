import { CLOSE_CODES, type ErrorCode, type ErrorFrame, isErrorCode } from '@svc/protocol';
import { SvcError } from './errors.ts';
import type { SvcWebSocket, SvcWebSocketFactory } from './socket.ts';

/** A server frame that is not an answer to a request: a room event or a session frame. */
export interface ServerFrame {
  type: string;
  seq?: number;
  ts?: number;
  data?: unknown;
  code?: string;
  message?: string;
}

/** How a channel ended. */
export interface ChannelClose {
  /** The WebSocket close code (1006 when the socket died or was abandoned locally). */
  closeCode: number;
  /** The `session.closed` frame's data, when the server sent one. */
  sessionClosed?: { reason: string; code: string; closeCode: number; message?: string };
  /** The last `error` frame without a request id (a refused handshake), if any. */
  lastError?: ErrorFrame;
}

interface Pending {
  resolve(data: Record<string, unknown>): void;
  reject(err: SvcError): void;
  timer: ReturnType<typeof setTimeout>;
}

/** Close code → registry code, for a close that came without an error frame. */
const CLOSE_CODE_ERRORS: Record<number, ErrorCode> = {
  [CLOSE_CODES.TOKEN_INVALID]: 'token_invalid',
  [CLOSE_CODES.TOKEN_EXPIRED]: 'token_expired',
  [CLOSE_CODES.TOKEN_ROOM_MISMATCH]: 'token_room_mismatch',
  [CLOSE_CODES.ROOM_NOT_FOUND]: 'room_not_found',
  [CLOSE_CODES.ROOM_FULL]: 'room_full',
  [CLOSE_CODES.DUPLICATE_IDENTITY]: 'duplicate_identity',
  [CLOSE_CODES.ROOM_DELETED]: 'room_deleted',
  [CLOSE_CODES.ROOM_ENDED]: 'room_ended',
  [CLOSE_CODES.KICKED]: 'kicked',
  [CLOSE_CODES.WAITING_REJECTED]: 'waiting_rejected',
  [CLOSE_CODES.WAITING_TIMEOUT]: 'waiting_timeout',
  [CLOSE_CODES.PROTOCOL_VIOLATION]: 'invalid_message',
  [CLOSE_CODES.FLOOD]: 'rate_limited',
  [CLOSE_CODES.MESSAGE_TOO_BIG]: 'frame_too_large',
  [CLOSE_CODES.INTERNAL_ERROR]: 'internal_error',
  [CLOSE_CODES.GOING_AWAY]: 'service_unavailable',
};

/** The error that best explains a close: error frame, then session.closed, then close code. */
export function errorOfClose(close: ChannelClose): SvcError {
  const { closeCode, lastError, sessionClosed } = close;
  if (lastError && isErrorCode(lastError.code)) {
    return new SvcError(lastError.code, lastError.message, { closeCode });
  }
  if (sessionClosed && isErrorCode(sessionClosed.code)) {
    return new SvcError(sessionClosed.code, undefined, { closeCode });
  }
  const code = CLOSE_CODE_ERRORS[closeCode];
  if (code) return new SvcError(code, undefined, { closeCode });
  if (closeCode === CLOSE_CODES.TIMEOUT) return new SvcError('timeout', undefined, { closeCode });
  return new SvcError(
    'connection_closed',
    `The signaling connection closed (WebSocket close ${closeCode})`,
    { closeCode },
  );
}

/**
 * One signaling WebSocket: sends `{id, type, data}` requests and matches their `ack`/`error`,
 * hands every other frame to `onFrame`, and reports the end once through `onClose`.
 */
export class Channel {
  onFrame: (frame: ServerFrame) => void = () => {};
  onClose: (close: ChannelClose) => void = () => {};

  #socket: SvcWebSocket | null = null;
  #nextId = 1;
  readonly #pending = new Map<string, Pending>();
  #lastError: ErrorFrame | undefined;
  #sessionClosed: ChannelClose['sessionClosed'];
  #closed = false;
  /** Why the channel closed, once it has. */
  #closeError: SvcError | null = null;

  constructor(private readonly requestTimeoutMs: number) {}

  /** Opens the socket; resolves when it is open, rejects if it closes first. */
  open(factory: SvcWebSocketFactory, url: string): Promise<void> {
    return new Promise((resolve, reject) => {
      let socket: SvcWebSocket;
      try {
        socket = factory(url);
      } catch (err) {
        reject(new SvcError('network_error', (err as Error).message));
        return;
      }
      this.#socket = socket;
      let opened = false;
      socket.onopen = () => {
        opened = true;
        resolve();
      };
      socket.onmessage = (event) => this.#receive(event.data);
      // Errors are always followed by a close event; the close carries the outcome.
      socket.onerror = () => {};
      socket.onclose = (event) => {
        const close = this.#finish(event.code);
        if (!opened && close) reject(close.err);
      };
    });
  }

  get isOpen() {
    return !this.#closed && this.#socket?.readyState === 1;
  }

  /** Sends a request; resolves with the ack's data, rejects with the error frame's code. */
  request(type: string, data: unknown = {}): Promise<Record<string, unknown>> {
    if (this.#closed) {
      return Promise.reject(
        this.#closeError ?? new SvcError('connection_closed', 'The signaling channel is closed'),
      );
    }
    // Closing (the server's close frame is in, its close event not yet): that close explains
    // the failure better than a generic connection_closed, so the request waits for it.
    const closing = this.#socket?.readyState === 2;
    if (!closing && !this.isOpen) {
      return Promise.reject(new SvcError('connection_closed', 'The signaling channel is closed'));
    }
    const id = String(this.#nextId++);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new SvcError('timeout', `No answer to ${type} within ${this.requestTimeoutMs} ms`));
      }, this.requestTimeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      if (!closing) this.#socket!.send(JSON.stringify({ id, type, data }));
    });
  }

  /** Closes the socket normally; `onClose` runs when the server confirms (or at once if dead). */
  close(code: number = CLOSE_CODES.NORMAL) {
    if (this.#closed) return;
    try {
      this.#socket?.close(code);
    } catch {
      this.abandon();
    }
  }

  /**
   * Drops the socket at once without waiting for a closing handshake (a dead peer would never
   * answer), and reports a 1006 close.
   */
  abandon() {
    const socket = this.#socket;
    if (socket) {
      socket.onopen = null;
      socket.onmessage = null;
      socket.onclose = null;
      socket.onerror = () => {};
      try {
        const { terminate } = socket as { terminate?: () => void };
        if (typeof terminate === 'function') terminate.call(socket);
        else socket.close();
      } catch {
        // The socket may not be open yet; nothing more to release.
      }
    }
    this.#finish(1006);
  }

  #finish(closeCode: number): { err: SvcError } | null {
    if (this.#closed) return null;
    this.#closed = true;
    const close: ChannelClose = {
      closeCode,
      sessionClosed: this.#sessionClosed,
      lastError: this.#lastError,
    };
    const err = errorOfClose(close);
    this.#closeError = err;
    for (const [id, pending] of this.#pending) {
      clearTimeout(pending.timer);
      this.#pending.delete(id);
      pending.reject(err);
    }
    this.onClose(close);
    return { err };
  }

  #receive(raw: unknown) {
    if (this.#closed || typeof raw !== 'string') return;
    let frame: ServerFrame & { id?: string };
    try {
      frame = JSON.parse(raw);
    } catch {
      return;
    }
    if (!frame || typeof frame !== 'object' || typeof frame.type !== 'string') return;
    if ((frame.type === 'ack' || frame.type === 'error' || frame.type === 'pong') && frame.id) {
      const pending = this.#pending.get(frame.id);
      if (pending) {
        this.#pending.delete(frame.id);
        clearTimeout(pending.timer);
        if (frame.type === 'error') {
          const code = isErrorCode(frame.code) ? frame.code : 'invalid_response';
          pending.reject(new SvcError(code, frame.message));
        } else {
          pending.resolve((frame.data as Record<string, unknown>) ?? {});
        }
        return;
      }
    }
    if (frame.type === 'error' && !frame.id) this.#lastError = frame as ErrorFrame;
    if (frame.type === 'session.closed') {
      this.#sessionClosed = frame.data as ChannelClose['sessionClosed'];
    }
    this.onFrame(frame);
  }
}

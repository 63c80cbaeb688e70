import { ERROR_CODES, type ErrorCode, isErrorCode, type Problem } from '@svc/protocol';

/**
 * Codes the client raises itself (no server answer to carry a registry code):
 * - `network_error`: the request or socket could not reach the server;
 * - `invalid_response`: the server answered something that is not the protocol;
 * - `connection_closed`: the socket closed before the session was established, without a code;
 * - `timeout`: no answer within the client's timeout;
 * - `client_disconnected`: `disconnect()` was called while the operation was pending;
 * - `not_connected`: a room operation while the client has no live connection (e.g. reconnecting);
 * - `reconnect_failed`: automatic reconnection reached its limit.
 */
export const CLIENT_ERROR_CODES = [
  'network_error',
  'invalid_response',
  'connection_closed',
  'timeout',
  'client_disconnected',
  'not_connected',
  'reconnect_failed',
  /** No WebRTC in this environment (RTCPeerConnection or navigator.mediaDevices is missing). */
  'media_not_supported',
  /** The user or the browser refused the camera, microphone or screen. */
  'media_permission_denied',
  /** No device matches (or the constraints cannot be met). */
  'media_device_not_found',
  /** The device could not be started (in use, hardware error). */
  'media_device_failed',
] as const;
export type SvcClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];

/** Every `SvcError.code`: a server registry code (packages/protocol) or a client code. */
export type SvcErrorCode = ErrorCode | SvcClientErrorCode;

/**
 * The one error type the library throws and rejects with. `code` is the server's registry code
 * (problem+json `code`, or the signaling `error` frame's code) when the server refused, else a
 * {@link SvcClientErrorCode}.
 */
export class SvcError extends Error {
  override readonly name = 'SvcError';
  /** The registry code (e.g. `room_full`, `token_expired`) or a client code. */
  readonly code: SvcErrorCode;
  /** The HTTP status (problem+json), or the registry status of a signaling code; 0 if none. */
  readonly status: number;
  /** The server's request id (`requestId` / `Request-Id`), when the server answered over HTTP. */
  readonly requestId?: string;
  /** The WebSocket close code, when the signaling channel was closed. */
  readonly closeCode?: number;
  /** The whole problem+json body, when there is one (e.g. `errors` of `invalid_request`). */
  readonly problem?: Problem;
  /**
   * How long the server asked to wait before trying again (`Retry-After` of a 429 or 503), in
   * ms; the client's own retries (reconnection, room switches) wait at least this long.
   */
  readonly retryAfterMs?: number;

  constructor(
    code: SvcErrorCode,
    message?: string,
    details: {
      status?: number;
      requestId?: string;
      closeCode?: number;
      problem?: Problem;
      retryAfterMs?: number;
    } = {},
  ) {
    const known = isErrorCode(code) ? ERROR_CODES[code] : undefined;
    super(message ?? known?.title ?? code);
    this.code = code;
    this.status = details.status ?? known?.status ?? 0;
    this.requestId = details.requestId;
    this.closeCode = details.closeCode;
    this.problem = details.problem;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/** `Retry-After` in ms: delay-seconds or an HTTP date (RFC 9110 §10.2.3); undefined if absent or bad. */
export function retryAfterMs(header: string | null, nowMs = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // An HTTP date names its day and month ("Day, DD Mon YYYY hh:mm:ss GMT"); Date.parse alone
  // would also take "-1" or "1.5" as years.
  if (!/^[A-Za-z]{3}, /.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** Turns a non-2xx HTTP answer into an SvcError (problem+json when the server sent one). */
export async function errorFromResponse(res: Response): Promise<SvcError> {
  const requestId = res.headers.get('request-id') ?? undefined;
  const retryAfter = retryAfterMs(res.headers.get('retry-after'));
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  if (body && typeof body === 'object' && isErrorCode((body as Problem).code)) {
    const problem = body as Problem;
    return new SvcError(problem.code, problem.detail ?? problem.title, {
      status: res.status,
      requestId: problem.requestId ?? requestId,
      problem,
      retryAfterMs: retryAfter,
    });
  }
  return new SvcError('invalid_response', `HTTP ${res.status} without a problem body`, {
    status: res.status,
    requestId,
    retryAfterMs: retryAfter,
  });
}

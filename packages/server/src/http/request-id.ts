import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
// Request ids: a random per-process prefix and a counter: unique across nodes, and cheap
// (a CSPRNG call per request costs more than the whole key check).
const REQUEST_ID_PREFIX = `req_${randomBytes(6).toString('base64url')}`;
let requestCounter = 0;

/** The caller's `Request-Id` (or `X-Request-Id`) when it is sane, else a new one. */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers['request-id'] ?? req.headers['x-request-id'];
  if (typeof incoming === 'string' && REQUEST_ID.test(incoming)) return incoming;
  return newRequestId();
}

/** A new request id of this process. */
export function newRequestId(): string {
  requestCounter = (requestCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${REQUEST_ID_PREFIX}${requestCounter.toString(36)}`;
}

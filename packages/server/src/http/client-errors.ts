import type { Socket } from 'node:net';
import { ERROR_CODES, type ErrorCode } from '@svc/protocol';
import type { ConnectionError, FastifyInstance } from 'fastify';
import { problemBody } from './problem.ts';
import { newRequestId } from './request-id.ts';

const CLIENT_ERROR_TITLE = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
} as const;

/**
 * Answers what Node's HTTP parser refuses before Fastify sees a request (a control character in
 * a header, headers over the size limit, both Content-Length and Transfer-Encoding, a bad request
 * line) as problem+json, like every other error, then closes the connection: the parser cannot
 * read on past a malformed request. Writes to the raw socket, as Node's own handler does, and
 * only when no response on that connection has started.
 */
export function clientErrorHandler(this: FastifyInstance, err: ConnectionError, socket: Socket) {
  // A reset connection is gone: nothing to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request_timeout'
        : 'invalid_request';
  const id = newRequestId();
  this.log.debug({ err, reqId: id }, 'client error');
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    // Node's parser names what is wrong (HPE_INVALID_HEADER_TOKEN, HPE_UNEXPECTED_CONTENT_LENGTH…).
    const why = err.code?.startsWith('HPE_') ? ` (${err.code})` : '';
    const detail =
      code === 'invalid_request' ? `The request is not valid HTTP/1.1${why}.` : undefined;
    const body = JSON.stringify(problemBody(code, id, detail));
    const status = ERROR_CODES[code].status as keyof typeof CLIENT_ERROR_TITLE;
    socket.write(
      `HTTP/1.1 ${status} ${CLIENT_ERROR_TITLE[status]}\r\n` +
        'Content-Type: application/problem+json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `Request-Id: ${id}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  }
  socket.destroy(err);
}

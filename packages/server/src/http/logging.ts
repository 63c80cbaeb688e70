import type { FastifyRequest } from 'fastify';
import type { LoggerOptions } from 'pino';

/** Query parameters that may carry secrets; their values are replaced in logged URLs. */
const SECRET_PARAMS = /([?&](?:access_token|token|key|api_key|apiKey)=)[^&#]*/g;
/** Anything shaped like a Svc key, wherever it appears in a logged string. */
const KEY_SHAPE = /svc_[A-Za-z0-9_-]{8,}/g;

export function scrub(text: string): string {
  return text.replace(SECRET_PARAMS, '$1[REDACTED]').replace(KEY_SHAPE, 'svc_[REDACTED]');
}

/**
 * pino options: key material is redacted wherever it could appear (headers, bodies that
 * carry keys or tokens, URLs). Request logs carry only method, URL (scrubbed), and peer.
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-api-key"]',
        'headers.authorization',
        'headers["x-api-key"]',
        '*.key',
        '*.token',
        '*.secret',
        '*.adminToken',
        'key',
        'token',
        'secret',
      ],
      censor: '[REDACTED]',
    },
    serializers: {
      req(request: FastifyRequest) {
        return { method: request.method, url: scrub(request.url), remoteAddress: request.ip };
      },
    },
  };
}

import { ERROR_CODES, type ErrorCode, type Problem, type ProblemFieldError } from '@svc/protocol';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isForeignKeyViolation } from '../storage/db.ts';
import { RETRY_AFTER_SECONDS, unavailableDependency } from '../unavailable.ts';

/**
 * A refusal with a registry code. Throw it from a handler or hook; the error handler turns it
 * into problem+json with the code's status.
 */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    detail?: string,
    /** Extra members for the problem body (e.g. `attemptsRemaining`). */
    readonly extra: Record<string, unknown> = {},
    /** Extra response headers (e.g. `Retry-After`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(detail ?? ERROR_CODES[code].title);
    this.status = ERROR_CODES[code].status;
  }
}

/**
 * `invalid_request` about one field: `path` and `message` for programs (`errors`), `detail` for
 * people (by default the two together).
 */
export function invalidField(path: string, message: string, detail = `${path} ${message}`) {
  return new ApiError('invalid_request', detail, { errors: [{ path, message }] });
}

export const PROBLEM_TYPE_BASE = 'https://svc.dev/problems/';

/** Builds the problem+json body for `code`. */
export function problemBody(
  code: ErrorCode,
  requestId: string,
  detail?: string,
  extra: Record<string, unknown> = {},
): Problem {
  const { status, title } = ERROR_CODES[code];
  return {
    ...extra,
    type: PROBLEM_TYPE_BASE + code,
    title,
    status,
    ...(detail && detail !== title ? { detail } : {}),
    code,
    requestId,
  };
}

/** Sends a problem+json reply. */
export function sendProblem(
  reply: FastifyReply,
  code: ErrorCode,
  detail?: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) {
  const body = problemBody(code, String(reply.request.id), detail, extra);
  reply.headers(headers);
  // Serialised here, so no route's response schema can strip the problem's members.
  return reply
    .code(body.status)
    .type('application/problem+json; charset=utf-8')
    .serializer(JSON.stringify)
    .send(body);
}

function validationErrors(error: FastifyError): ProblemFieldError[] {
  const context = error.validationContext ?? 'body';
  const all = error.validation ?? [];
  // A failed union reports each branch and then itself: keep the union's one line.
  const unions = new Set(all.filter((v) => v.keyword === 'anyOf').map((v) => v.instancePath));
  const kept = all.filter((v) => v.keyword !== 'const' || !unions.has(v.instancePath));
  return kept.map((v) => {
    const params = v.params as Record<string, unknown>;
    let path = `${context}${v.instancePath.replaceAll('/', '.')}`;
    let message = v.message ?? 'is invalid';
    if (v.keyword === 'additionalProperties' && params.additionalProperty) {
      path += `.${String(params.additionalProperty)}`;
      message = 'is not a known field';
    } else if (v.keyword === 'required' && params.missingProperty) {
      path += `.${String(params.missingProperty)}`;
      message = 'is required';
    } else if (v.keyword === 'enum' && Array.isArray(params.allowedValues)) {
      message = `must be one of ${params.allowedValues.map((a) => JSON.stringify(a)).join(', ')}`;
    } else if (v.keyword === 'format' && params.format === 'date-time') {
      // The format also refuses leap seconds and instants past the year 9999 (app.ts): say so.
      message =
        'must be an RFC 3339 date-time (e.g. 2026-11-25T10:00:00Z) of the years 0000–9999 in UTC, without a leap second';
    } else if (v.keyword === 'anyOf') {
      // A union of literals (TypeBox's enums): name the values. Needs ajv's `verbose`.
      const branches = (v as { schema?: unknown }).schema;
      if (Array.isArray(branches) && branches.every((b) => b && 'const' in b)) {
        message = `must be one of ${branches.map((b) => JSON.stringify(b.const)).join(', ')}`;
      }
    }
    return { path, message };
  });
}

/**
 * Maps every error Fastify or a handler raises to problem+json; internals never leak. A
 * dependency outage ({@link unavailableDependency}) or a transaction PostgreSQL aborted for a
 * concurrent one (deadlock, serialization) is 503 `service_unavailable` with `Retry-After`;
 * anything else unexpected is 500 `internal_error`.
 */
export function installErrorHandling(app: FastifyInstance) {
  app.setErrorHandler(
    (error: FastifyError | ApiError, request: FastifyRequest, reply: FastifyReply) => {
      if (error instanceof ApiError) {
        return sendProblem(reply, error.code, error.message, error.extra, error.headers);
      }
      if (error.validation) {
        const errors = validationErrors(error);
        const detail = errors.map((e) => `${e.path} ${e.message}`).join('; ');
        return sendProblem(reply, 'invalid_request', detail, { errors });
      }
      switch (error.code) {
        case 'FST_ERR_CTP_INVALID_JSON_BODY':
        case 'FST_ERR_CTP_EMPTY_JSON_BODY':
          return sendProblem(reply, 'malformed_json', 'The request body is not valid JSON.');
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return sendProblem(reply, 'payload_too_large');
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
          return sendProblem(
            reply,
            error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
              ? 'unsupported_media_type'
              : 'invalid_header',
            error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
              ? 'The request body must be sent as application/json.'
              : 'Content-Length does not match the body.',
          );
      }
      if (
        typeof error.statusCode === 'number' &&
        error.statusCode >= 400 &&
        error.statusCode < 500
      ) {
        // A client error raised by Fastify or a plugin: keep its status, map to a registry code.
        const code: ErrorCode =
          error.statusCode === 413
            ? 'payload_too_large'
            : error.statusCode === 415
              ? 'unsupported_media_type'
              : 'invalid_request';
        return sendProblem(reply, code, error.message);
      }
      // A dependency outage, not a bug: logged once per outage where it is detected.
      const dependency = unavailableDependency(error);
      if (dependency) {
        return sendProblem(
          reply,
          'service_unavailable',
          `The ${dependency} is unavailable; retry after the indicated delay.`,
          { retryAfter: RETRY_AFTER_SECONDS },
          { 'Retry-After': String(RETRY_AFTER_SECONDS) },
        );
      }
      // PostgreSQL broke a deadlock or a serialization conflict by aborting this request's
      // transaction: nothing was written, and the same request again is expected to succeed.
      if (error.code === '40P01' || error.code === '40001') {
        request.log.warn({ err: error }, 'transaction aborted by a concurrent one');
        return sendProblem(
          reply,
          'service_unavailable',
          'The request conflicted with a concurrent change; retry after the indicated delay.',
          { retryAfter: RETRY_AFTER_SECONDS },
          { 'Retry-After': String(RETRY_AFTER_SECONDS) },
        );
      }
      // A write referred to a row deleted after this request read it (a project deleted by
      // another node while this one still held its key, say): nothing was written.
      if (isForeignKeyViolation(error)) {
        request.log.warn({ err: error }, 'a row this request refers to was deleted meanwhile');
        return sendProblem(
          reply,
          'not_found',
          'Something this request refers to was deleted while it ran.',
        );
      }
      request.log.error({ err: error }, 'unhandled error');
      return sendProblem(reply, 'internal_error');
    },
  );

  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, 'not_found', `No route for ${request.method} ${request.url.split('?')[0]}.`),
  );
}

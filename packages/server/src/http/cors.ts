import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { normaliseOrigin } from '../auth/restrictions.ts';
import { sendProblem } from './problem.ts';

/** The response headers a page may read: the request id, the rate limit, when to retry. */
export const EXPOSED_HEADERS = 'Request-Id, RateLimit, RateLimit-Policy, Retry-After';
/** The request headers a page may send (a preflight answers this list, whatever was asked). */
export const ALLOWED_HEADERS =
  'Authorization, Content-Type, X-Api-Key, X-Project-Id, X-Bundle-Id, Request-Id, X-Request-Id';
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE';
/** How long a browser may reuse a preflight's answer (Chromium keeps it at most 2 hours). */
const PREFLIGHT_MAX_AGE_SECONDS = '7200';

export interface CorsOptions {
  /** `SVC_ADMIN_CORS_ORIGINS`: exact origins whose pages may call the admin API (none). */
  adminOrigins: readonly string[];
}

/** Paths no page is let read unless its origin is in `SVC_ADMIN_CORS_ORIGINS`. */
function isAdminPath(url: string): boolean {
  return url.startsWith('/v1/admin') || url.startsWith('/metrics');
}

/** The request's `Origin` when it is a well-formed origin (`null` and junk are not). */
function browserOrigin(request: FastifyRequest): string | null {
  const origin = request.headers.origin;
  if (typeof origin !== 'string' || origin === 'null') return null;
  return normaliseOrigin(origin) === origin ? origin : null;
}

/** Lets the page at the request's origin read this response (see {@link installCors}). */
function allow(reply: FastifyReply, origin: string) {
  reply.header('Access-Control-Allow-Origin', origin);
  reply.header('Access-Control-Expose-Headers', EXPOSED_HEADERS);
}

/**
 * Takes back what {@link installCors} granted: the gate calls it when a key's origin lock refuses
 * the request, so a page on another origin cannot even read the refusal.
 */
export function disallowOrigin(reply: FastifyReply) {
  reply.removeHeader('Access-Control-Allow-Origin');
  reply.removeHeader('Access-Control-Expose-Headers');
}

/**
 * CORS for browsers. The public API (every path but `/v1/admin` and `/metrics`) answers any
 * origin's preflight: a preflight carries no key, so it cannot know the key's origin lock, and
 * it grants nothing by itself (no cookies are ever allowed: `Access-Control-Allow-Credentials`
 * is never sent). The actual request is where the lock holds: the response names the request's
 * origin in `Access-Control-Allow-Origin` (never `*`, with `Vary: Origin`), except when the key
 * presented has an origin list the origin is not on; then the gate answers 403
 * `origin_not_allowed` without it, so the page cannot read the answer either. The admin API is
 * opened only to `SVC_ADMIN_CORS_ORIGINS`; its preflights from any other origin get a 403.
 * Short-link redirects carry no CORS headers: they are for navigation.
 */
export function installCors(app: FastifyInstance, options: CorsOptions) {
  const adminOrigins = new Set(options.adminOrigins);
  const mayCall = (url: string, origin: string) => !isAdminPath(url) || adminOrigins.has(origin);

  app.addHook('onRequest', (request, reply, done) => {
    // Short-link redirects carry no CORS headers: they are for navigation.
    if (request.headers.origin !== undefined && !request.url.startsWith('/l/')) {
      reply.header('Vary', 'Origin');
      const origin = browserOrigin(request);
      if (origin && mayCall(request.url, origin)) allow(reply, origin);
    }
    done();
  });

  app.options('/*', { schema: { hide: true } }, (request, reply) => {
    const origin = browserOrigin(request);
    if (request.headers['access-control-request-method'] === undefined) {
      // Not a preflight: say what the API accepts.
      return reply.code(204).header('Allow', `${ALLOWED_METHODS}, OPTIONS`).send();
    }
    if (!origin || !mayCall(request.url, origin)) {
      disallowOrigin(reply);
      return sendProblem(
        reply,
        'origin_not_allowed',
        isAdminPath(request.url)
          ? 'The admin API is open only to the origins in SVC_ADMIN_CORS_ORIGINS.'
          : 'The request has no valid Origin.',
      );
    }
    return reply
      .code(204)
      .header('Access-Control-Allow-Methods', ALLOWED_METHODS)
      .header('Access-Control-Allow-Headers', ALLOWED_HEADERS)
      .header('Access-Control-Max-Age', PREFLIGHT_MAX_AGE_SECONDS)
      .send();
  });
}

import type { ErrorCode, KeyType, Product } from '@svc/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../clock.ts';
import type { PlatformConfig } from '../config.ts';
import { disallowOrigin } from '../http/cors.ts';
import type { Metrics } from '../http/metrics.ts';
import { sendProblem } from '../http/problem.ts';
import type { RateLimitResult, SharedState } from '../state/index.ts';
import type { KeyStore, VerifiedKey } from './key-store.ts';
import { ipAllowed, originAllowed, requestOrigin } from './restrictions.ts';

/**
 * How a route is guarded, declared once per route in `config.auth`:
 * `{ product: 'links', clientKeys: true }` lets client keys with the `links` scope and server
 * keys call it; `clientKeys: false` makes it a server-key-only operation.
 */
export interface RouteAuth {
  product: Product;
  clientKeys: boolean;
}

/** Who is calling, set on `request.auth` by the gate for every guarded route. */
export interface AuthContext {
  projectId: string;
  keyId: string;
  /** Legacy keys act as server keys. */
  keyType: KeyType;
  isServerKey: boolean;
  key: VerifiedKey;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

export type GateResult =
  | { ok: true; auth: AuthContext }
  | { ok: false; code: ErrorCode; detail?: string };

const RATE_WINDOW_MS = 60_000;
const PROJECT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_KEY_HEADER = 512;

export interface GateDeps {
  config: PlatformConfig;
  keys: KeyStore;
  state: SharedState;
  clock: Clock;
  metrics: Metrics;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  if (Array.isArray(value)) return value[0];
  return value;
}

/** Reads the presented key: `Authorization: Bearer …` or `X-Api-Key`. */
function presentedKey(request: FastifyRequest): GateResult | { ok: true; key: string } {
  const authorization = header(request, 'authorization');
  const apiKey = header(request, 'x-api-key');
  let bearer: string | undefined;
  if (authorization !== undefined) {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
    if (!m) {
      return {
        ok: false,
        code: 'invalid_api_key',
        detail: 'Authorization must be "Bearer <API key>".',
      };
    }
    bearer = m[1];
  }
  if (bearer !== undefined && apiKey !== undefined && bearer !== apiKey.trim()) {
    return { ok: false, code: 'conflicting_credentials' };
  }
  const key = bearer ?? apiKey?.trim();
  if (!key) return { ok: false, code: 'missing_api_key' };
  return { ok: true, key };
}

/**
 * The key gate: decides, for one request to a guarded route, who is calling and whether they
 * may. Checks run in the documented order and the first failure wins. Expected refusals are
 * values; only the HTTP hook turns them into responses. A key already in the cache is decided
 * synchronously; otherwise the answer is a promise.
 */
export function checkRequest(
  request: FastifyRequest,
  route: RouteAuth,
  deps: GateDeps,
  now: number = deps.clock.now(),
): GateResult | Promise<GateResult> {
  const presented = presentedKey(request);
  if (!presented.ok) return presented;
  const projectId = header(request, 'x-project-id');
  if (projectId === undefined || projectId === '') return { ok: false, code: 'missing_project_id' };
  if (!PROJECT_ID.test(projectId)) {
    return { ok: false, code: 'invalid_header', detail: 'X-Project-Id is not a valid project id.' };
  }
  const { key } = presented as { key: string };
  if (key.length > MAX_KEY_HEADER) return { ok: false, code: 'invalid_api_key' };
  const cached = deps.keys.peek(key, now);
  if (cached !== undefined) return checkKey(request, route, projectId, cached, now);
  // A malformed key (shape, checksum) is refused by the key store without any store query.
  return deps.keys.find(key).then((found) => checkKey(request, route, projectId, found, now));
}

/** The checks after the key lookup, in order: project, state, product, scope, restrictions. */
function checkKey(
  request: FastifyRequest,
  route: RouteAuth,
  projectId: string,
  found: VerifiedKey | null,
  now: number,
): GateResult {
  // Unknown, or another project's: the same answer, so neither is revealed.
  if (!found || found.projectId !== projectId) return { ok: false, code: 'invalid_api_key' };
  if (found.revokedAtMs !== null && found.revokedAtMs <= now)
    return { ok: false, code: 'api_key_revoked' };
  if (found.expiresAtMs !== null && found.expiresAtMs <= now)
    return { ok: false, code: 'api_key_expired' };
  if (!found.projectProducts.has(route.product)) {
    return {
      ok: false,
      code: 'product_not_enabled',
      detail: `The project has not enabled ${route.product}.`,
    };
  }
  const isClient = found.type === 'client';
  if (isClient) {
    if (!found.scopes.has(route.product)) {
      return {
        ok: false,
        code: 'insufficient_scope',
        detail: `The client key lacks the ${route.product} scope.`,
      };
    }
    if (!route.clientKeys) return { ok: false, code: 'server_key_required' };
    const refusal = checkClientRestrictions(request, found);
    if (refusal) return { ok: false, code: refusal };
  } else if (found.ipRanges.length > 0 && !ipAllowed(request.ip, found.ipRanges)) {
    return { ok: false, code: 'ip_not_allowed' };
  }
  return {
    ok: true,
    auth: { projectId, keyId: found.id, keyType: found.type, isServerKey: !isClient, key: found },
  };
}

function checkClientRestrictions(request: FastifyRequest, key: VerifiedKey): ErrorCode | null {
  const origins = key.allowedOrigins;
  const bundles = key.allowedBundleIds;
  if (origins.length === 0 && bundles.length === 0) return null;
  const origin = requestOrigin(header(request, 'origin'), header(request, 'referer'));
  const bundleId = header(request, 'x-bundle-id');
  if (origin && origins.length > 0 && originAllowed(origin, origins)) return null;
  if (bundleId && bundles.length > 0 && bundles.includes(bundleId)) return null;
  // Name the restriction the request tried (or, when it tried none, the first the key has).
  if (origin && origins.length > 0) return 'origin_not_allowed';
  if (bundleId && bundles.length > 0) return 'bundle_id_not_allowed';
  return origins.length > 0 ? 'origin_not_allowed' : 'bundle_id_not_allowed';
}

type Done = (err?: Error) => void;

/**
 * Installs the gate as an onRequest hook on each route that declares `config.auth` (routes
 * registered after this call, in any plugin); other routes never run it. A callback hook, so
 * that a request whose key is cached and whose rate limit is in process passes without a
 * single promise.
 */
export function installGate(app: FastifyInstance, deps: GateDeps) {
  app.decorateRequest('auth', null);
  // `RateLimit-Policy` has one value per limit: built once, not per request.
  const policies = new Map<number, string>();
  const policy = (limit: number) => {
    let value = policies.get(limit);
    if (value === undefined) {
      value = `"default";q=${limit};w=60`;
      if (policies.size < 1000) policies.set(limit, value);
    }
    return value;
  };

  function rateLimited(
    reply: FastifyReply,
    key: VerifiedKey,
    limit: number,
    rate: RateLimitResult,
    done: Done,
  ) {
    reply.header('RateLimit-Policy', policy(limit));
    reply.header(
      'RateLimit',
      `"default";r=${rate.remaining};t=${rate.allowed ? rate.resetSeconds : rate.retryAfterSeconds}`,
    );
    if (rate.allowed) return done();
    deps.metrics.rateLimitRefusals.inc({ key_type: key.type });
    sendProblem(
      reply,
      'rate_limited',
      `The key's limit of ${limit} requests per minute is used up.`,
      { retryAfter: rate.retryAfterSeconds },
      { 'Retry-After': String(rate.retryAfterSeconds) },
    );
  }

  function decided(
    request: FastifyRequest,
    reply: FastifyReply,
    result: GateResult,
    now: number,
    done: Done,
  ) {
    if (!result.ok) {
      deps.metrics.authRefusals.inc({ code: result.code });
      // The origin lock holds in the browser too: the refused page may not read the refusal.
      if (result.code === 'origin_not_allowed') disallowOrigin(reply);
      sendProblem(reply, result.code, result.detail);
      return;
    }
    request.auth = result.auth;
    const key = result.auth.key;
    const limit =
      key.rateLimitPerMinute ??
      (key.type === 'client'
        ? deps.config.clientKeyRateLimitPerMinute
        : deps.config.serverKeyRateLimitPerMinute);
    const rate = deps.state.rateLimit(key.rateBucket, limit, RATE_WINDOW_MS, now);
    if (rate instanceof Promise) {
      rate.then((r) => rateLimited(reply, key, limit, r, done)).catch(done);
    } else {
      rateLimited(reply, key, limit, rate, done);
    }
  }

  /** The hook for one route: its declaration is read once here, not per request. */
  const gateFor =
    (route: RouteAuth) => (request: FastifyRequest, reply: FastifyReply, done: Done) => {
      const now = deps.clock.now();
      const result = checkRequest(request, route, deps, now);
      if (result instanceof Promise) {
        result.then((r) => decided(request, reply, r, now, done)).catch(done);
      } else {
        decided(request, reply, result, now, done);
      }
    };
  const gates = new WeakSet<object>();

  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth;
    if (!auth) return;
    const existing = route.onRequest ? [route.onRequest].flat() : [];
    // Fastify derives a GET route's HEAD twin from options that may already carry the gate.
    if (existing.some((hook) => gates.has(hook))) return;
    const gate = gateFor(auth);
    gates.add(gate);
    route.onRequest = [gate, ...existing];
  });
}

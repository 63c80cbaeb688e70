import path from 'node:path';
import { normaliseOriginPattern } from './auth/restrictions.ts';
import { envBool as bool, ConfigError, envInt as int } from './env.ts';
import { invalidProxyEntry } from './http/proxy-trust.ts';

/**
 * The platform's settings, read from the environment (names are part of the public contract).
 * Each product reads its own section (its folder's `config.ts`); `areas.ts` composes them.
 */
export interface PlatformConfig {
  /** `PORT` (8080). */
  port: number;
  /** `HOST` (0.0.0.0). */
  host: string;
  /** `DATA_DIR` (./data): the embedded default's SQLite file and admin-token file. */
  dataDir: string;
  /** `DATABASE_URL`: `postgres://…` selects PostgreSQL; unset means SQLite in `dataDir`. */
  databaseUrl: string | undefined;
  /** `REDIS_URL`: `redis://…` selects Redis shared state; unset means in-process. */
  redisUrl: string | undefined;
  /** `SVC_REDIS_PREFIX` (`svc:`): prefix of every Redis key and channel this node uses. */
  redisPrefix: string;
  /**
   * `SVC_STORE_TIMEOUT_MS` (5000): PostgreSQL's deadline for one query and for getting a
   * connection; past it the request gets 503 `service_unavailable` (README, "When a dependency
   * fails").
   */
  storeTimeoutMs: number;
  /** `SVC_STATE_TIMEOUT_MS` (1000): Redis's deadline for one command, waiting for a connection included. */
  stateTimeoutMs: number;
  /** `SVC_ADMIN_TOKEN`: the admin API token; generated on first start when unset (embedded default). */
  adminToken: string | undefined;
  /** `SVC_SECRET`: keys server-side HMACs; generated into DATA_DIR when unset (embedded default only). */
  secret: string | undefined;
  /**
   * `SVC_SECRET_PREVIOUS`: earlier server secrets, comma-separated, newest first. Sealed values
   * (signing keys, webhook secrets, SMS credentials) still open with them and are sealed again
   * with the current secret on start; nothing new is sealed with them.
   */
  secretPrevious: string[];
  /** `SVC_PUBLIC_URL` (`http://localhost:PORT`): the externally visible base URL. */
  publicUrl: string;
  /** `SVC_TRUST_PROXY`: proxy addresses/CIDRs whose X-Forwarded-For is believed (none). */
  trustProxy: string[];
  /**
   * `SVC_ADMIN_CORS_ORIGINS` (none): exact origins (`https://admin.example.com`), comma-separated,
   * whose pages may call the admin API; no other origin's page may read an admin response.
   */
  adminCorsOrigins: string[];
  /** `SVC_SERVER_KEY_RATE_LIMIT` (6000): requests per minute for a server key without its own limit. */
  serverKeyRateLimitPerMinute: number;
  /** `SVC_CLIENT_KEY_RATE_LIMIT` (120): default requests per minute for a client key. */
  clientKeyRateLimitPerMinute: number;
  /** `SVC_KEY_CACHE_TTL_MS` (30000): how long a verified key stays cached in process. */
  keyCacheTtlMs: number;
  /** `SVC_BODY_LIMIT` (1048576): the largest request body in bytes. */
  bodyLimitBytes: number;
  /**
   * `SVC_SHUTDOWN_TIMEOUT_MS` (10000): on SIGTERM or SIGINT, how long in-flight requests, queued
   * click and webhook writes and deliveries in progress get to finish before the process exits
   * anyway (with status 1).
   */
  shutdownTimeoutMs: number;
  /** `LOG_LEVEL` (info): pino level (`fatal`…`trace`, or `silent`). */
  logLevel: string;
  /** `SVC_BOOTSTRAP` (true): create the `default` project and keys on first start with an empty store. */
  bootstrap: boolean;
}

export { ConfigError } from './env.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** A comma-separated list of exact origins (`scheme://host[:port]`). */
function origins(env: NodeJS.ProcessEnv, name: string): string[] {
  const list = (env[name] || '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return list.map((value) => {
    const origin = normaliseOriginPattern(value);
    if (!origin || origin.includes('*')) {
      throw new ConfigError(
        `${name} must list origins like https://admin.example.com, got "${value}"`,
      );
    }
    return origin;
  });
}

/** Reads and validates the platform's settings; throws {@link ConfigError} naming the variable. */
export function loadPlatformConfig(env: NodeJS.ProcessEnv = process.env): PlatformConfig {
  const port = int(env, 'PORT', 8080, 0, 65535);
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// (unset it to use SQLite)');
  }
  const redisUrl = env.REDIS_URL || undefined;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const publicUrl = (env.SVC_PUBLIC_URL || `http://localhost:${port}`).replace(/\/+$/, '');
  checkPublicUrl(publicUrl);
  return {
    port,
    host: env.HOST || '0.0.0.0',
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl,
    redisUrl,
    redisPrefix: env.SVC_REDIS_PREFIX || 'svc:',
    storeTimeoutMs: int(env, 'SVC_STORE_TIMEOUT_MS', 5000, 100, 600_000),
    stateTimeoutMs: int(env, 'SVC_STATE_TIMEOUT_MS', 1000, 50, 60_000),
    adminToken: credential(env, 'SVC_ADMIN_TOKEN'),
    secret: credential(env, 'SVC_SECRET'),
    secretPrevious: (env.SVC_SECRET_PREVIOUS || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    publicUrl,
    trustProxy: trustedProxies(env),
    adminCorsOrigins: origins(env, 'SVC_ADMIN_CORS_ORIGINS'),
    serverKeyRateLimitPerMinute: int(env, 'SVC_SERVER_KEY_RATE_LIMIT', 6000, 1, 10_000_000),
    clientKeyRateLimitPerMinute: int(env, 'SVC_CLIENT_KEY_RATE_LIMIT', 120, 1, 10_000_000),
    keyCacheTtlMs: int(env, 'SVC_KEY_CACHE_TTL_MS', 30_000, 0, 3_600_000),
    bodyLimitBytes: int(env, 'SVC_BODY_LIMIT', 1_048_576, 1024, 100 * 1_048_576),
    shutdownTimeoutMs: int(env, 'SVC_SHUTDOWN_TIMEOUT_MS', 10_000, 100, 600_000),
    logLevel,
    bootstrap: bool(env, 'SVC_BOOTSTRAP', true),
  };
}

/** `SVC_TRUST_PROXY`: a comma-separated list, each an address, a CIDR range or a proxy-addr name. */
function trustedProxies(env: NodeJS.ProcessEnv): string[] {
  const entries = (env.SVC_TRUST_PROXY || '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const invalid = invalidProxyEntry(entries);
  if (invalid !== null) {
    throw new ConfigError(
      `SVC_TRUST_PROXY must list addresses, CIDR ranges or loopback/linklocal/uniquelocal, got "${invalid}"`,
    );
  }
  return entries;
}

/** The shortest `SVC_ADMIN_TOKEN` and `SVC_SECRET` accepted: 32 characters (generated ones are longer). */
const MIN_CREDENTIAL_LENGTH = 32;

/**
 * A credential the operator sets (`SVC_ADMIN_TOKEN`, `SVC_SECRET`), or undefined when unset. One
 * shorter than {@link MIN_CREDENTIAL_LENGTH} stops the start: a guessable admin token opens every
 * project, a guessable secret every sealed value. The message gives its length, never the value.
 */
function credential(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  if (!value) return undefined;
  if (value.length < MIN_CREDENTIAL_LENGTH) {
    throw new ConfigError(
      `${name} must be at least ${MIN_CREDENTIAL_LENGTH} characters, random (for example \`openssl rand -base64 32\`); it has ${value.length}`,
    );
  }
  return value;
}

/**
 * `SVC_PUBLIC_URL` is the base of every URL the server hands out (short links, `wsUrl`, download
 * URLs, the token issuer): an http(s) URL, a path allowed, nothing after it. A refused value with
 * credentials in it is not repeated.
 */
function checkPublicUrl(publicUrl: string) {
  let url: URL;
  try {
    url = new URL(publicUrl);
  } catch {
    throw new ConfigError(`SVC_PUBLIC_URL is not a URL: "${publicUrl}"`);
  }
  const credentials = url.username !== '' || url.password !== '';
  if (
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.search ||
    url.hash ||
    credentials
  ) {
    throw new ConfigError(
      `SVC_PUBLIC_URL must be an http(s) URL without credentials, query or fragment${credentials ? '' : `, got "${publicUrl}"`}`,
    );
  }
}

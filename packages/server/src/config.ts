import path from 'node:path';
import { normaliseOriginPattern } from './auth/restrictions.ts';
import { ConfigError, envInt as int } from './env.ts';
import { loadMediaConfig, type MediaConfig } from './media/config.ts';
import { loadRealtimeConfig, type RealtimeConfig } from './realtime/config.ts';
import { loadSmsSenderConfig, type SmsSenderConfig } from './verify/sms-config.ts';

/** Everything the server reads from its environment. Names are part of the public contract. */
export interface Config {
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
  /** `SVC_WEBHOOK_ALLOW_PRIVATE` (false): let webhook endpoints resolve to private addresses. */
  webhookAllowPrivate: boolean;
  /** `SVC_WEBHOOK_WORKER` (true): run the webhook delivery worker on this node. */
  webhookWorker: boolean;
  /**
   * `SVC_WEBHOOK_RETRY_SCHEDULE` (`0,5s,5m,30m,2h,5h,10h,10h`): the delay before each attempt,
   * comma-separated; a bare number is seconds, or suffix `ms`, `s`, `m`, `h`. One attempt per entry.
   */
  webhookRetryScheduleMs: number[];
  /** `SVC_WEBHOOK_TIMEOUT_MS` (15000): one delivery attempt's whole time budget. */
  webhookTimeoutMs: number;
  /** `SVC_WEBHOOK_CONCURRENCY` (16): deliveries in flight at once on this node. */
  webhookConcurrency: number;
  /** `SVC_WEBHOOK_POLL_MS` (1000): how often an idle worker looks for due deliveries. */
  webhookPollMs: number;
  /**
   * `SVC_WEBHOOK_LEASE_MS` (timeout + 30000): how long a claimed delivery stays with its node;
   * after that another node may take it (the claiming node died). Must exceed the timeout.
   */
  webhookLeaseMs: number;
  /**
   * `SVC_WEBHOOK_ENDPOINT_CONCURRENCY` (half of SVC_WEBHOOK_CONCURRENCY, rounded up): attempts in
   * flight per endpoint on this node while it answers well. An endpoint whose latest attempt here
   * failed or took a second or more gets a quarter of it (at least 1).
   */
  webhookEndpointConcurrency: number;
  /**
   * `SVC_WEBHOOK_DISABLE_AFTER` (`5d`): an endpoint whose attempts have all failed for this long is
   * disabled (`disabledReason: "failing"`); `0` never disables.
   */
  webhookDisableAfterMs: number;
  /**
   * `SVC_WEBHOOK_RETENTION` (`30d`): events whose deliveries are all finished are deleted (with
   * their deliveries and attempts) this long after they were written; `0` keeps them.
   */
  webhookRetentionMs: number;
  /** `SVC_SERVER_KEY_RATE_LIMIT` (6000): requests per minute for a server key without its own limit. */
  serverKeyRateLimitPerMinute: number;
  /** `SVC_CLIENT_KEY_RATE_LIMIT` (120): default requests per minute for a client key. */
  clientKeyRateLimitPerMinute: number;
  /** `SVC_KEY_CACHE_TTL_MS` (30000): how long a verified key stays cached in process. */
  keyCacheTtlMs: number;
  /** `SVC_BODY_LIMIT` (1048576): the largest request body in bytes. */
  bodyLimitBytes: number;
  /**
   * `SVC_LINKS_MAX_CANDIDATES` (1000000): deferred-link match candidates the in-process store
   * keeps at most (least recently written dropped first; not used with Redis).
   */
  linksMaxCandidates: number;
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
  /** `SVC_SMS_SENDER` (console) and `SVC_TWILIO_*`: the default SMS sender (see verify/sms-config.ts). */
  smsSender: SmsSenderConfig;
  /** Realtime settings (`SVC_REALTIME_*`, see realtime/config.ts). */
  realtime: RealtimeConfig;
  /** Media settings (`SVC_MEDIA*`, `SVC_JANUS_*`, `SVC_ICE_SERVERS`, `SVC_TURN_*`, see media/config.ts). */
  media: MediaConfig;
}

export { ConfigError } from './env.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

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

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses `0,5s,5m,30m` (bare numbers are seconds) into milliseconds. */
export function parseRetrySchedule(raw: string, name = 'SVC_WEBHOOK_RETRY_SCHEDULE'): number[] {
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.length > 50) {
    throw new ConfigError(`${name} must list 1 to 50 delays`);
  }
  return parts.map((part) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(part);
    const ms = m ? Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? 's']) : Number.NaN;
    if (!Number.isFinite(ms) || ms > 7 * 24 * 3_600_000) {
      throw new ConfigError(
        `${name} must be comma-separated delays like 0,5s,5m,2h (at most 7 days each), got "${raw}"`,
      );
    }
    return ms;
  });
}

const LONG_UNITS: Record<string, number> = { ...DURATION_UNITS, d: 86_400_000 };

/** Parses one duration (`30d`, `12h`, `500ms`; a bare number is seconds) into milliseconds. */
export function parseDuration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const raw = (env[name] || fallback).trim();
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw);
  const ms = m ? Math.round(Number(m[1]) * LONG_UNITS[m[2] ?? 's']) : Number.NaN;
  if (!Number.isFinite(ms) || ms > 3650 * 86_400_000) {
    throw new ConfigError(`${name} must be a duration like 30d, 12h, 90s or 0, got "${raw}"`);
  }
  return ms;
}

/** Reads and validates the configuration; throws {@link ConfigError} with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
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
  try {
    new URL(publicUrl);
  } catch {
    throw new ConfigError(`SVC_PUBLIC_URL is not a URL: "${publicUrl}"`);
  }
  const webhookTimeoutMs = int(env, 'SVC_WEBHOOK_TIMEOUT_MS', 15_000, 100, 120_000);
  const webhookLeaseMs = int(
    env,
    'SVC_WEBHOOK_LEASE_MS',
    webhookTimeoutMs + 30_000,
    webhookTimeoutMs + 1,
    3_600_000,
  );
  const webhookConcurrency = int(env, 'SVC_WEBHOOK_CONCURRENCY', 16, 1, 1000);
  return {
    port,
    host: env.HOST || '0.0.0.0',
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl,
    redisUrl,
    redisPrefix: env.SVC_REDIS_PREFIX || 'svc:',
    storeTimeoutMs: int(env, 'SVC_STORE_TIMEOUT_MS', 5000, 100, 600_000),
    stateTimeoutMs: int(env, 'SVC_STATE_TIMEOUT_MS', 1000, 50, 60_000),
    adminToken: env.SVC_ADMIN_TOKEN || undefined,
    secret: env.SVC_SECRET || undefined,
    secretPrevious: (env.SVC_SECRET_PREVIOUS || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    publicUrl,
    trustProxy: (env.SVC_TRUST_PROXY || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    adminCorsOrigins: origins(env, 'SVC_ADMIN_CORS_ORIGINS'),
    webhookAllowPrivate: bool(env, 'SVC_WEBHOOK_ALLOW_PRIVATE', false),
    webhookWorker: bool(env, 'SVC_WEBHOOK_WORKER', true),
    webhookRetryScheduleMs: parseRetrySchedule(
      env.SVC_WEBHOOK_RETRY_SCHEDULE || '0,5s,5m,30m,2h,5h,10h,10h',
    ),
    webhookTimeoutMs,
    webhookConcurrency,
    webhookPollMs: int(env, 'SVC_WEBHOOK_POLL_MS', 1000, 10, 60_000),
    webhookLeaseMs,
    webhookEndpointConcurrency: int(
      env,
      'SVC_WEBHOOK_ENDPOINT_CONCURRENCY',
      Math.ceil(webhookConcurrency / 2),
      1,
      webhookConcurrency,
    ),
    webhookDisableAfterMs: parseDuration(env, 'SVC_WEBHOOK_DISABLE_AFTER', '5d'),
    webhookRetentionMs: parseDuration(env, 'SVC_WEBHOOK_RETENTION', '30d'),
    serverKeyRateLimitPerMinute: int(env, 'SVC_SERVER_KEY_RATE_LIMIT', 6000, 1, 10_000_000),
    clientKeyRateLimitPerMinute: int(env, 'SVC_CLIENT_KEY_RATE_LIMIT', 120, 1, 10_000_000),
    keyCacheTtlMs: int(env, 'SVC_KEY_CACHE_TTL_MS', 30_000, 0, 3_600_000),
    bodyLimitBytes: int(env, 'SVC_BODY_LIMIT', 1_048_576, 1024, 100 * 1_048_576),
    linksMaxCandidates: int(env, 'SVC_LINKS_MAX_CANDIDATES', 1_000_000, 1000, 50_000_000),
    shutdownTimeoutMs: int(env, 'SVC_SHUTDOWN_TIMEOUT_MS', 10_000, 100, 600_000),
    logLevel,
    bootstrap: bool(env, 'SVC_BOOTSTRAP', true),
    smsSender: loadSmsSenderConfig(env, (message) => {
      throw new ConfigError(message);
    }),
    realtime: loadRealtimeConfig(env),
    media: loadMediaConfig(env, path.resolve(env.DATA_DIR || './data')),
  };
}

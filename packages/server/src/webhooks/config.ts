import { ConfigError, DURATION_UNITS, envBool, envDuration, envInt as int } from '../env.ts';

/** Webhook delivery settings (`SVC_WEBHOOK_*`; names are part of the public contract). */
export interface WebhooksConfig {
  /** `SVC_WEBHOOK_ALLOW_PRIVATE` (false): let webhook endpoints resolve to private addresses. */
  allowPrivate: boolean;
  /** `SVC_WEBHOOK_WORKER` (true): run the webhook delivery worker on this node. */
  worker: boolean;
  /**
   * `SVC_WEBHOOK_RETRY_SCHEDULE` (`0,5s,5m,30m,2h,5h,10h,10h`): the delay before each attempt,
   * comma-separated; a bare number is seconds, or suffix `ms`, `s`, `m`, `h`. One attempt per entry.
   */
  retryScheduleMs: number[];
  /** `SVC_WEBHOOK_TIMEOUT_MS` (15000): one delivery attempt's whole time budget. */
  timeoutMs: number;
  /** `SVC_WEBHOOK_CONCURRENCY` (16): deliveries in flight at once on this node. */
  concurrency: number;
  /** `SVC_WEBHOOK_POLL_MS` (1000): how often an idle worker looks for due deliveries. */
  pollMs: number;
  /**
   * `SVC_WEBHOOK_LEASE_MS` (timeout + 30000): how long a claimed delivery stays with its node;
   * after that another node may take it (the claiming node died). Must exceed the timeout.
   */
  leaseMs: number;
  /**
   * `SVC_WEBHOOK_ENDPOINT_CONCURRENCY` (half of SVC_WEBHOOK_CONCURRENCY, rounded up): attempts in
   * flight per endpoint on this node while it answers well. An endpoint whose latest attempt here
   * failed or took a second or more gets a quarter of it (at least 1).
   */
  endpointConcurrency: number;
  /**
   * `SVC_WEBHOOK_DISABLE_AFTER` (`5d`): an endpoint whose attempts have all failed for this long is
   * disabled (`disabledReason: "failing"`); `0` never disables.
   */
  disableAfterMs: number;
  /**
   * `SVC_WEBHOOK_RETENTION` (`30d`): events whose deliveries are all finished are deleted (with
   * their deliveries and attempts) this long after they were written; `0` keeps them.
   */
  retentionMs: number;
}

/** Parses `0,5s,5m,30m` (bare numbers are seconds; at most 7 days each) into milliseconds. */
export function parseRetrySchedule(raw: string, name = 'SVC_WEBHOOK_RETRY_SCHEDULE'): number[] {
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.length > 50) {
    throw new ConfigError(`${name} must list 1 to 50 delays`);
  }
  return parts.map((part) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(part);
    const ms = m ? Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? 's']!) : Number.NaN;
    if (!Number.isFinite(ms) || ms > 7 * 24 * 3_600_000) {
      throw new ConfigError(
        `${name} must be comma-separated delays like 0,5s,5m,2h (at most 7 days each), got "${raw}"`,
      );
    }
    return ms;
  });
}

/** Reads the webhooks section; throws {@link ConfigError} naming the variable. */
export function loadWebhooksConfig(env: NodeJS.ProcessEnv): WebhooksConfig {
  const timeoutMs = int(env, 'SVC_WEBHOOK_TIMEOUT_MS', 15_000, 100, 120_000);
  const concurrency = int(env, 'SVC_WEBHOOK_CONCURRENCY', 16, 1, 1000);
  return {
    allowPrivate: envBool(env, 'SVC_WEBHOOK_ALLOW_PRIVATE', false),
    worker: envBool(env, 'SVC_WEBHOOK_WORKER', true),
    retryScheduleMs: parseRetrySchedule(
      env.SVC_WEBHOOK_RETRY_SCHEDULE || '0,5s,5m,30m,2h,5h,10h,10h',
    ),
    timeoutMs,
    concurrency,
    pollMs: int(env, 'SVC_WEBHOOK_POLL_MS', 1000, 10, 60_000),
    leaseMs: int(env, 'SVC_WEBHOOK_LEASE_MS', timeoutMs + 30_000, timeoutMs + 1, 3_600_000),
    endpointConcurrency: int(
      env,
      'SVC_WEBHOOK_ENDPOINT_CONCURRENCY',
      Math.ceil(concurrency / 2),
      1,
      concurrency,
    ),
    disableAfterMs: envDuration(env, 'SVC_WEBHOOK_DISABLE_AFTER', '5d'),
    retentionMs: envDuration(env, 'SVC_WEBHOOK_RETENTION', '30d'),
  };
}

import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import { newId } from '../ids.ts';
import type { Sealer } from '../sealing.ts';
import type { Store } from '../storage/db.ts';
import { unavailableDependency } from '../unavailable.ts';
import { openEndpointSecret } from './endpoints.ts';
import type { WebhookMetrics } from './metrics.ts';
import { type SendResult, WebhookSender } from './sender.ts';
import { webhookHeaders } from './signing.ts';
import { checkTarget, parseWebhookUrl } from './ssrf.ts';
import type { WebhookDeliveriesTable } from './tables.ts';

export interface WorkerOptions {
  store: Store;
  clock: Clock;
  metrics: WebhookMetrics;
  log: FastifyBaseLogger;
  /** Delay before each attempt (ms); one attempt per entry. */
  retryScheduleMs: number[];
  timeoutMs: number;
  concurrency: number;
  pollMs: number;
  leaseMs: number;
  allowPrivate: boolean;
  /** Opens the endpoints' sealed signing secrets. */
  sealer: Sealer;
  /** Names this node in attempt records; random by default. */
  nodeId?: string;
}

/**
 * `'pending'` inlined as a literal, not a parameter: SQLite uses the partial indexes (`WHERE
 * status = 'pending'`) only when the query names the same literal.
 */
export const PENDING = sql.lit('pending' as const);

interface AttemptContext {
  id: string;
  payload: string;
  url: string;
  enabled: number;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  webhooks_enabled: number;
}

const iso = (ms: number) => new Date(ms).toISOString();
/** The longest pause between claims after store errors: the worker resumes soon after an outage. */
const MAX_BACKOFF_MS = 5000;
/** How often an attempt's result that found the store unavailable is written again. */
const RECORD_RETRY_MS = 500;
const ERROR_LIMIT = 500;

/**
 * The delivery worker. It claims due deliveries (each claimed by one node: a lease written
 * under `FOR UPDATE SKIP LOCKED` on PostgreSQL; on SQLite this process is the only worker),
 * sends them, and records every attempt. A delivery is eligible only when no earlier event
 * with the same ordering key is still pending for the same endpoint, so events of one room
 * arrive in order even while an earlier one is being retried. A node that dies mid-attempt
 * leaves a lease that expires after `leaseMs`; another node (or this one, restarted) then
 * retries it: delivery is at least once.
 */
export class DeliveryWorker {
  readonly nodeId: string;
  private running = false;
  private loopDone: Promise<void> | null = null;
  private inFlight = new Set<Promise<void>>();
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private sender = new WebhookSender();

  constructor(private options: WorkerOptions) {
    this.nodeId = options.nodeId ?? `node_${randomBytes(6).toString('hex')}`;
  }

  /** Starts the loop. On SQLite, first takes back leases a killed predecessor left behind. */
  async start() {
    if (this.running) return;
    if (this.options.store.dialect === 'sqlite') {
      await this.options.store.db
        .updateTable('webhook_deliveries')
        .set({ lease_until: null, lease_token: null })
        .where('status', '=', 'pending')
        .where('lease_until', 'is not', null)
        .execute();
    }
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Stops claiming, waits for attempts in flight to finish (each bounded by the timeout). */
  async stop() {
    if (!this.running) return;
    this.running = false;
    this.wake();
    await this.loopDone;
    await Promise.allSettled([...this.inFlight]);
    this.sender.close();
  }

  /** Looks for due deliveries now (called after an event is written on this node). */
  wake() {
    this.woken = true;
    this.wakeUp?.();
  }

  private async loop() {
    let failures = 0;
    while (this.running) {
      this.woken = false;
      let delayMs = this.options.pollMs;
      try {
        const free = this.options.concurrency - this.inFlight.size;
        // Claim in batches (half the slots at least) rather than one row per finished attempt:
        // a claim is the costliest query; a lone idle worker still claims at once.
        const batch = Math.max(1, Math.floor(this.options.concurrency / 2));
        if (free >= batch || this.inFlight.size === 0) {
          const claimed = await this.claim(free);
          const contexts = await this.contexts(claimed);
          for (const delivery of claimed) {
            this.track(this.attempt(delivery, contexts.get(delivery.id)));
          }
          if (claimed.length === free) continue;
          delayMs = await this.untilNextDueMs();
        }
        failures = 0;
      } catch (err) {
        failures++;
        // A store outage is logged by the app when it starts; here only the first failure.
        if (!unavailableDependency(err))
          this.options.log.error({ err }, 'webhook worker: store error');
        else if (failures === 1)
          this.options.log.warn({ err }, 'webhook worker: store unavailable');
        // Back off, but not so far that deliveries wait long once the store is back.
        delayMs = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(failures, 7));
      }
      if (!this.running || this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = null;
    }
  }

  private track(promise: Promise<void>) {
    const tracked = promise
      .catch((err) => this.options.log.error({ err }, 'webhook worker: attempt failed'))
      .finally(() => {
        this.inFlight.delete(tracked);
        // A finished delivery may unblock the next event of its ordering key.
        this.wake();
      });
    this.inFlight.add(tracked);
  }

  /** Milliseconds until the earliest future attempt, at most pollMs. */
  private async untilNextDueMs(): Promise<number> {
    const now = this.options.clock.now();
    const row = await this.options.store.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('next'))
      .where('status', '=', PENDING)
      .where('next_attempt_at', '>', iso(now))
      .executeTakeFirst();
    if (!row?.next) return this.options.pollMs;
    const due = Date.parse(String(row.next)) - now;
    return Math.max(1, Math.min(this.options.pollMs, due));
  }

  /** Claims up to `limit` due deliveries for this node and returns them. */
  private async claim(limit: number): Promise<WebhookDeliveriesTable[]> {
    const { store, clock, leaseMs } = this.options;
    const nowMs = clock.now();
    const now = iso(nowMs);
    const token = `${this.nodeId}:${randomBytes(6).toString('hex')}`;
    const due = store.db
      .selectFrom('webhook_deliveries as d')
      .select('d.id')
      .where('d.status', '=', PENDING)
      .where('d.next_attempt_at', '<=', now)
      .where((eb) => eb.or([eb('d.lease_until', 'is', null), eb('d.lease_until', '<', now)]))
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('webhook_deliveries as e')
              .select('e.id')
              .whereRef('e.endpoint_id', '=', 'd.endpoint_id')
              .whereRef('e.ordering_key', '=', 'd.ordering_key')
              .whereRef('e.event_seq', '<', 'd.event_seq')
              .where('e.status', '=', PENDING),
          ),
        ),
      )
      .orderBy('d.next_attempt_at')
      .orderBy('d.event_seq')
      .limit(limit)
      // Two nodes never claim the same row: each skips rows another is claiming.
      .$if(store.dialect === 'postgres', (q) => q.forUpdate().skipLocked());
    return store.db
      .updateTable('webhook_deliveries')
      .set({ lease_until: iso(nowMs + leaseMs), lease_token: token, updated_at: now })
      .where('id', 'in', due)
      .returningAll()
      .execute();
  }

  /** What the attempts need (body, endpoint, project switch), for a whole batch in one query. */
  private async contexts(claimed: WebhookDeliveriesTable[]) {
    const map = new Map<string, AttemptContext>();
    if (claimed.length === 0) return map;
    const rows = await this.options.store.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_events as ev', 'ev.seq', 'd.event_seq')
      .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .innerJoin('projects as p', 'p.id', 'e.project_id')
      .select([
        'd.id',
        'ev.payload',
        'e.url',
        'e.enabled',
        'e.secret',
        'e.previous_secret',
        'e.previous_secret_expires_at',
        'p.webhooks_enabled',
      ])
      .where(
        'd.id',
        'in',
        claimed.map((d) => d.id),
      )
      .execute();
    for (const row of rows) map.set(row.id, row);
    return map;
  }

  private async attempt(delivery: WebhookDeliveriesTable, context: AttemptContext | undefined) {
    const { clock } = this.options;
    const endpoint = context;
    if (!endpoint) return; // endpoint deleted: its deliveries went with it
    if (endpoint.webhooks_enabled !== 1 || endpoint.enabled !== 1) {
      // Nothing is sent while a switch is off; the delivery stays listed and can be retried.
      await this.finish(delivery, {
        status: 'skipped',
        last_error:
          endpoint.webhooks_enabled !== 1
            ? 'webhooks are switched off for the project'
            : 'the endpoint is disabled',
      });
      return;
    }
    const startedMs = clock.now();
    const url = parseWebhookUrl(endpoint.url);
    const check = url
      ? await checkTarget(url, this.options.allowPrivate)
      : ({ ok: false, code: 'webhook_url_forbidden', detail: 'invalid URL' } as const);
    let result: SendResult;
    if (!check.ok) {
      result = { error: `refused before connecting: ${check.detail}`, latencyMs: 0, refused: true };
    } else {
      const { sealer } = this.options;
      const secrets = [openEndpointSecret(sealer, delivery.endpoint_id, endpoint.secret)];
      if (
        endpoint.previous_secret &&
        endpoint.previous_secret_expires_at &&
        endpoint.previous_secret_expires_at > iso(startedMs)
      ) {
        secrets.push(openEndpointSecret(sealer, delivery.endpoint_id, endpoint.previous_secret));
      }
      const headers = webhookHeaders(
        secrets,
        delivery.event_id,
        Math.floor(startedMs / 1000),
        endpoint.payload,
      );
      result = await this.sender.send({
        target: check.target,
        headers,
        body: endpoint.payload,
        timeoutMs: this.options.timeoutMs,
        nowMs: startedMs,
      });
      this.options.metrics.attemptDuration.observe(result.latencyMs / 1000);
    }
    // The request was sent: its result is worth keeping through a store outage. It is written
    // once the store is back, while the lease still holds (after that, another node sends again).
    for (;;) {
      try {
        await this.record(delivery, startedMs, result);
        return;
      } catch (err) {
        const leaseEndMs = Date.parse(delivery.lease_until ?? '') || 0;
        if (!unavailableDependency(err) || !this.running || clock.now() >= leaseEndMs) throw err;
        await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS));
      }
    }
  }

  /** Writes the attempt and the delivery's next state. */
  private async record(delivery: WebhookDeliveriesTable, startedMs: number, result: SendResult) {
    const { store, clock, retryScheduleMs, metrics } = this.options;
    const nowMs = clock.now();
    const attempt = delivery.attempt_count + 1;
    const code = result.statusCode;
    const success = code !== undefined && code >= 200 && code < 300;
    const gone = code === 410;
    let status: WebhookDeliveriesTable['status'] = 'pending';
    let nextAttemptAt: string | null = null;
    if (success) status = 'succeeded';
    else if (gone || attempt >= retryScheduleMs.length) status = 'failed';
    else {
      const delayMs = Math.max(retryScheduleMs[attempt], result.retryAfterMs ?? 0);
      nextAttemptAt = iso(nowMs + delayMs);
    }
    const error =
      result.error ??
      (success
        ? null
        : code !== undefined && code >= 300 && code < 400
          ? `HTTP ${code} (redirects are not followed)`
          : `HTTP ${code}`);
    metrics.attempts.inc({
      result: success
        ? 'success'
        : gone
          ? 'gone'
          : result.refused
            ? 'refused'
            : result.error
              ? 'error'
              : 'failure',
    });
    const attemptRow = {
      id: newId('wha', nowMs),
      delivery_id: delivery.id,
      attempt,
      attempted_at: iso(startedMs),
      status_code: code ?? null,
      latency_ms: result.latencyMs,
      error: error?.slice(0, ERROR_LIMIT) ?? null,
      response_body: result.body ?? null,
      next_attempt_at: nextAttemptAt,
      node_id: this.nodeId,
    };
    const patch = {
      status,
      attempt_count: attempt,
      next_attempt_at: nextAttemptAt,
      lease_until: null,
      lease_token: null,
      last_status_code: code ?? null,
      last_error: error?.slice(0, ERROR_LIMIT) ?? null,
      updated_at: iso(nowMs),
    };
    // Only the lease holder writes: if the lease was lost, another node owns the delivery.
    const leaseToken = delivery.lease_token ?? '';
    if (store.dialect === 'postgres' && !gone) {
      // The common case in one statement (one round trip instead of four).
      await store.db
        .with('attempt', (db) => db.insertInto('webhook_attempts').values(attemptRow))
        .updateTable('webhook_deliveries')
        .set(patch)
        .where('id', '=', delivery.id)
        .where('lease_token', '=', leaseToken)
        .execute();
    } else {
      await store.db.transaction().execute(async (trx) => {
        await trx.insertInto('webhook_attempts').values(attemptRow).execute();
        await trx
          .updateTable('webhook_deliveries')
          .set(patch)
          .where('id', '=', delivery.id)
          .where('lease_token', '=', leaseToken)
          .execute();
        if (gone) {
          await trx
            .updateTable('webhook_endpoints')
            .set({ enabled: 0, disabled_reason: 'gone', updated_at: iso(nowMs) })
            .where('id', '=', delivery.endpoint_id)
            .execute();
        }
      });
    }
    if (status !== 'pending') metrics.finished.inc({ status });
  }

  private async finish(
    delivery: WebhookDeliveriesTable,
    patch: { status: 'skipped'; last_error: string },
  ) {
    const now = iso(this.options.clock.now());
    await this.options.store.db
      .updateTable('webhook_deliveries')
      .set({
        ...patch,
        next_attempt_at: null,
        lease_until: null,
        lease_token: null,
        updated_at: now,
      })
      .where('id', '=', delivery.id)
      .where('lease_token', '=', delivery.lease_token)
      .execute();
    this.options.metrics.finished.inc({ status: patch.status });
  }
}

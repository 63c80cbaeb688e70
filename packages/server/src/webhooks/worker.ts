import { randomBytes } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { type Clock, iso } from '../clock.ts';
import { newId } from '../ids.ts';
import type { Sealer } from '../sealing.ts';
import type { Store } from '../storage/db.ts';
import { unavailableDependency } from '../unavailable.ts';
import { chainKey, chainsOf, leaseKeys, pendingOfKeys } from './claims.ts';
import { EndpointCache } from './endpoint-cache.ts';
import type { WebhookMetrics } from './metrics.ts';
import { type Outcome, writeOutcomes } from './outcomes.ts';
import { type SendResult, WebhookSender } from './sender.ts';
import { webhookHeaders } from './signing.ts';
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
  /** Attempts in flight per endpoint while it answers well (a degraded one gets a quarter). */
  endpointConcurrency?: number;
  pollMs: number;
  leaseMs: number;
  allowPrivate: boolean;
  /** Opens the endpoints' sealed signing secrets. */
  sealer: Sealer;
  /** An endpoint failing for this long is disabled (`failing`); 0: never. */
  disableAfterMs?: number;
  /** Finished events older than this are pruned; 0: kept. */
  retentionMs?: number;
  /** Names this node in attempt records; random by default. */
  nodeId?: string;
}

/**
 * `'pending'` inlined as a literal, not a parameter: SQLite uses the partial indexes (`WHERE
 * status = 'pending'`) only when the query names the same literal.
 */
export const PENDING = sql.lit('pending' as const);

/**
 * A claimed delivery with what its attempt needs (body, endpoint, project switch) and its
 * chain's key lease.
 */
export interface ClaimedDelivery extends WebhookDeliveriesTable {
  /** The ordering key, or the delivery's id for one without a key. */
  lease_key: string;
  lease_until: string;
  lease_token: string;
  payload: string;
  url: string;
  enabled: number;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  failing_since: string | null;
  webhooks_enabled: number;
}

/** What this node knows of an endpoint's health (in memory; each node keeps its own). */
interface EndpointState {
  inFlight: number;
  /** Chains claimed for it and waiting on this node for a slot. */
  queued: number;
  /** Failed attempts in a row on this node. */
  failures: number;
  /** No new attempt to this endpoint starts before this (ms since epoch). */
  pausedUntil: number;
  /** The latest attempt here failed or took {@link SLOW_MS} or more. */
  degraded: boolean;
}

/** The longest pause between claims after store errors: the worker resumes soon after an outage. */
const MAX_BACKOFF_MS = 5000;
/** How often an attempt's result that found the store unavailable is written again. */
const RECORD_RETRY_MS = 500;
const ERROR_LIMIT = 500;
/** An attempt this slow (or a failed one) marks its endpoint degraded: fewer slots on this node. */
export const SLOW_MS = 1000;
/** Failed attempts in a row after which this node pauses an endpoint… */
export const PAUSE_AFTER_FAILURES = 3;
/** …for 1 s, doubling with each further failure, up to this. */
export const MAX_PAUSE_MS = 30_000;
/** Outcomes written in one transaction at most. */
const RECORD_BATCH = 256;
/** A batch of outcomes waits at most this long for more while attempts are in flight. */
const RECORD_GATHER_MS = 10;
/** Rows deleted per statement when pruning; statements run one after another. */
export const PRUNE_BATCH = 500;
const PRUNE_INTERVAL_MS = 10 * 60_000;

/**
 * The delivery worker. It claims chains in batches: a chain is the next due deliveries of one
 * (endpoint, ordering key), and a claim leases the key (one `webhook_key_leases` row per chain;
 * the deliveries are read, not written), so at most one chain per key is in flight fleet-wide
 * and nodes partition keys between them. It sends a chain's deliveries one after another and
 * writes the outcomes in batches (one statement on PostgreSQL, one transaction on SQLite:
 * whatever finished while the previous batch was being written), each only while its key's lease
 * token holds; the chain's last outcome gives the lease back. A delivery is eligible only when no
 * earlier event with the same ordering key is still pending for the same endpoint, so events of
 * one room arrive in order even while an earlier one is being retried. A node that dies
 * mid-attempt leaves a key lease that expires after `leaseMs`; another node (or this one,
 * restarted) then takes the key and retries: delivery is at least once.
 *
 * Isolation: an endpoint has at most `endpointConcurrency` attempts in flight on a node, a quarter
 * of that while degraded (its latest attempt failed or was slow), and none while paused (after
 * {@link PAUSE_AFTER_FAILURES} failures in a row, for 1 s doubling up to {@link MAX_PAUSE_MS}); a
 * paused endpoint's deliveries wait without spending attempts. An endpoint whose attempts have all
 * failed for `disableAfterMs` is disabled with reason `failing`.
 */
export class DeliveryWorker {
  readonly nodeId: string;
  private running = false;
  private loopDone: Promise<void> | null = null;
  private inFlight = new Set<Promise<void>>();
  /** Chains in progress (sending, or waiting for their outcomes to be written): the slots used. */
  private sending = 0;
  /**
   * Chains claimed ahead (leased) and waiting for a slot, in claim order: a finished chain's slot
   * is refilled from here at once instead of after a claim's round trip.
   */
  private ready: ClaimedDelivery[][] = [];
  private endpoints = new Map<string, EndpointState>();
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private sender = new WebhookSender();
  private cache: EndpointCache;
  private outcomes: { outcome: Outcome; done: (err?: unknown) => void }[] = [];
  private recording: Promise<void> | null = null;
  /** Attempts in flight: while any is, a batch of outcomes waits for more (see `drainOutcomes`). */
  private attempting = 0;
  /** Ends a batch's wait early. */
  private gathered: (() => void) | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  private pruning: Promise<number> | null = null;
  private readonly endpointCap: number;
  private readonly degradedCap: number;
  private readonly claimBatch: number;
  /** Chains that finished since the latest claim. */
  private finishedSinceClaim = 0;
  /** Look for work at the next turn even if few chains finished. */
  private claimNow = true;

  constructor(private options: WorkerOptions) {
    this.nodeId = options.nodeId ?? `node_${randomBytes(6).toString('hex')}`;
    this.cache = new EndpointCache(options.sealer, options.allowPrivate);
    this.endpointCap = Math.max(
      1,
      Math.min(
        options.concurrency,
        options.endpointConcurrency ?? Math.ceil(options.concurrency / 2),
      ),
    );
    this.degradedCap = Math.max(1, Math.floor(this.endpointCap / 4));
    // Claims wait for half the slots one endpoint may use: a lone busy endpoint (capped at
    // endpointCap) still gets its chains claimed several at a time.
    this.claimBatch = Math.max(1, Math.floor(this.endpointCap / 2));
  }

  /** Starts the loop. On SQLite, first takes back leases a killed predecessor left behind. */
  async start() {
    if (this.running) return;
    if (this.options.store.dialect === 'sqlite') {
      await this.options.store.db.deleteFrom('webhook_key_leases').execute();
    }
    if (this.options.store.dialect === 'postgres') {
      // Fresh statistics for the claim's plan (a backlog written since the last autovacuum
      // would otherwise be planned as a near-empty table).
      await sql`analyze webhook_deliveries`.execute(this.options.store.db).catch(() => {});
    }
    this.running = true;
    this.loopDone = this.loop();
    if (this.options.retentionMs) {
      // Every node prunes now and then (the batches skip rows another node is deleting); the
      // first run comes soon after start, at a random moment so nodes started together spread.
      const schedule = (ms: number) => {
        this.pruneTimer = setTimeout(() => {
          void this.prune()
            .catch((err) => {
              if (!unavailableDependency(err))
                this.options.log.error({ err }, 'webhook retention: prune failed');
            })
            .finally(() => {
              if (this.running) schedule(PRUNE_INTERVAL_MS);
            });
        }, ms).unref();
      };
      schedule(30_000 + Math.random() * 60_000);
    }
  }

  /** Stops claiming, waits for attempts in flight to finish (each bounded by the timeout). */
  async stop() {
    if (!this.running) return;
    this.running = false;
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.wake();
    await this.loopDone;
    // Chains claimed ahead go back at once rather than when their leases run out.
    this.startReady();
    await Promise.allSettled([...this.inFlight]);
    await this.pruning?.catch(() => {});
    this.sender.close();
  }

  /** Looks for due deliveries now (called after an event is written on this node). */
  wake() {
    this.claimNow = true;
    this.nudge();
  }

  private nudge() {
    this.woken = true;
    this.wakeUp?.();
  }

  private state(endpointId: string): EndpointState {
    let s = this.endpoints.get(endpointId);
    if (!s) {
      s = { inFlight: 0, queued: 0, failures: 0, pausedUntil: 0, degraded: false };
      this.endpoints.set(endpointId, s);
    }
    return s;
  }

  private slotsOf(s: EndpointState) {
    return s.degraded ? this.degradedCap : this.endpointCap;
  }

  /**
   * Endpoints the next claim must leave alone (full or paused), and the chains left to those
   * partly used or degraded; other endpoints get `endpointCap`. An endpoint may have its slots'
   * worth of chains running and half as many again claimed ahead: enough to refill slots during
   * a claim's round trip, few enough that another node's claims still find keys to take.
   * `takes`: how many chains the endpoints this node knows can take, plus one endpoint's worth
   * for those it does not know yet.
   */
  private endpointLimits(nowMs: number) {
    const excluded: string[] = [];
    const caps: Record<string, number> = {};
    let takes = this.endpointCap;
    for (const [id, s] of this.endpoints) {
      const slots = this.slotsOf(s);
      const free = slots + Math.ceil(slots / 2) - s.inFlight - s.queued;
      if (free <= 0 || s.pausedUntil > nowMs) excluded.push(id);
      else if (free < this.endpointCap) caps[id] = free;
      else if (s.inFlight === 0 && s.queued === 0 && s.failures === 0 && !s.degraded)
        this.endpoints.delete(id);
      if (free > 0 && s.pausedUntil <= nowMs) takes += Math.min(free, this.endpointCap);
    }
    return { excluded, caps, takes };
  }

  /**
   * Starts queued chains while slots are free (the node's and their endpoint's), in claim order.
   * A chain whose endpoint is paused, or whose lease would not outlast an attempt, or any chain
   * once the worker stops, is given back (its key's lease deleted) for a later claim here or
   * elsewhere.
   */
  private startReady() {
    if (this.ready.length === 0) return;
    const nowMs = this.options.clock.now();
    const kept: ClaimedDelivery[][] = [];
    const released: ClaimedDelivery[] = [];
    for (const chain of this.ready) {
      const endpoint = this.state(chain[0].endpoint_id);
      const leaseEndMs = Date.parse(chain[0].lease_until) || 0;
      if (
        !this.running ||
        endpoint.pausedUntil > nowMs ||
        nowMs + this.options.timeoutMs >= leaseEndMs
      ) {
        endpoint.queued--;
        released.push(chain[0]);
      } else if (
        this.sending < this.options.concurrency &&
        endpoint.inFlight < this.slotsOf(endpoint)
      ) {
        endpoint.queued--;
        this.track(this.runChain(chain));
      } else kept.push(chain);
    }
    this.ready = kept;
    if (released.length > 0) this.track(this.release(released));
  }

  private async loop() {
    let failures = 0;
    while (this.running) {
      this.woken = false;
      let delayMs = this.options.pollMs;
      try {
        // Chains waiting for an endpoint that has since paused go back (and any that can start do).
        this.startReady();
        // Chains running or claimed ahead: up to half the node's slots ahead.
        const { concurrency } = this.options;
        const free = concurrency + Math.ceil(concurrency / 2) - this.sending - this.ready.length;
        // Claim in batches rather than once per finished chain (a claim is the costliest
        // query): after claimBatch chains finished, or when new work may be there (an event
        // written here, a timer), or when idle.
        if (
          free > 0 &&
          (this.claimNow ||
            this.finishedSinceClaim >= this.claimBatch ||
            (this.sending === 0 && this.ready.length === 0))
        ) {
          this.claimNow = false;
          this.finishedSinceClaim = 0;
          const chains = await this.claim(free);
          for (const chain of chains) this.state(chain[0].endpoint_id).queued++;
          this.ready.push(...chains);
          this.startReady();
          if (chains.length === free) continue;
          // With attempts in flight, the next look comes when one of them is recorded (it may
          // unblock its ordering key); otherwise at the next due time.
          if (this.sending === 0) delayMs = await this.untilNextDueMs();
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
        const timer = setTimeout(() => {
          // Retries come due and other nodes write events: look even while busy.
          this.claimNow = true;
          resolve();
        }, delayMs);
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
      });
    this.inFlight.add(tracked);
  }

  /** Milliseconds until the earliest future attempt or paused endpoint's return, at most pollMs. */
  private async untilNextDueMs(): Promise<number> {
    const now = this.options.clock.now();
    let due = this.options.pollMs;
    for (const s of this.endpoints.values()) {
      if (s.pausedUntil > now) due = Math.min(due, s.pausedUntil - now);
    }
    const row = await this.options.store.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.min('next_attempt_at').as('next'))
      .where('status', '=', PENDING)
      .where('next_attempt_at', '>', iso(now))
      .executeTakeFirst();
    if (row?.next) due = Math.min(due, Date.parse(String(row.next)) - now);
    return Math.max(1, due);
  }

  /**
   * Claims work for up to `slots` attempts in a row: each slot is a chain, the next due
   * deliveries of one ordering key for one endpoint (at most CHAIN_MAX, sent one after
   * another, in order), at most an endpoint's free slots per endpoint. Returns the chains with
   * what their attempts need.
   *
   * Two statements. The first leases keys: heads (due deliveries with no earlier pending one of
   * their key and no live lease on their key), in the due index's order (the scan stops once it
   * has enough), capped per endpoint, each given a key lease unless another node took the key
   * meanwhile (an insert that updates only an expired lease). The second reads the leased keys'
   * chains: the first CHAIN_MAX pending deliveries of each key, up to the first that is not due,
   * from a snapshot taken after the leases were committed, so it sees every outcome a previous
   * holder of the key wrote. No delivery row is written.
   */
  private async claim(slots: number): Promise<ClaimedDelivery[][]> {
    const { store, clock, leaseMs } = this.options;
    const nowMs = clock.now();
    const now = iso(nowMs);
    const leaseUntil = iso(nowMs + leaseMs);
    const token = `${this.nodeId}:${randomBytes(6).toString('hex')}`;
    const limits = { ...this.endpointLimits(nowMs), endpointCap: this.endpointCap };
    const leased = await leaseKeys(store, slots, limits, now, leaseUntil, token);
    if (leased.length === 0) return [];
    const chains = chainsOf(await pendingOfKeys(store, leased), now, leaseUntil, token);
    // Keys whose deliveries went meanwhile (another node's chain finished between the two
    // statements) or whose first pending one is not due: their leases go back at once.
    const empty = leased.filter((l) => !chains.has(chainKey(l.endpoint_id, l.lease_key)));
    if (empty.length > 0)
      this.track(this.release(empty.map((l) => ({ ...l, lease_token: token }))));
    return [...chains.values()];
  }

  /**
   * Sends a chain's deliveries one after another; stops at the first that does not succeed, or
   * before one whose attempt the lease would not outlast, and gives the key's lease back with
   * the last outcome (the rest of the chain is simply not sent: nothing was written for it).
   * Resolves once every outcome is written.
   */
  private async runChain(chain: ClaimedDelivery[]) {
    const { clock, timeoutMs } = this.options;
    const endpoint = this.state(chain[0].endpoint_id);
    // The chain holds its slot until its outcomes are written: its key is leased until then,
    // so no claim could take the key's next deliveries anyway.
    endpoint.inFlight++;
    this.sending++;
    const written: Promise<void>[] = [];
    let results: PromiseSettledResult<void>[];
    try {
      for (const [i, delivery] of chain.entries()) {
        this.attempting++;
        let outcome: Outcome;
        try {
          outcome = await this.attempt(delivery, endpoint);
        } finally {
          this.attempting--;
        }
        const leaseEndMs = Date.parse(delivery.lease_until) || 0;
        // The first always goes (as a lone claim would); a later one only if the lease outlasts
        // a whole attempt, else another node could take the key while it is being sent.
        const last =
          !(outcome.success || outcome.status === 'skipped') ||
          i === chain.length - 1 ||
          !this.running ||
          clock.now() + timeoutMs >= leaseEndMs;
        written.push(this.recordHeld(outcome, last));
        if (last) break;
      }
      results = await Promise.allSettled(written);
    } finally {
      endpoint.inFlight--;
      this.sending--;
      // The slot goes to a chain claimed ahead; claim again once enough chains finished (claims
      // in batches), or at once when idle.
      this.startReady();
      this.finishedSinceClaim++;
      if (this.finishedSinceClaim >= this.claimBatch || this.sending === 0) this.nudge();
    }
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  }

  /**
   * Gives keys' leases back (their deliveries are due again at once for any node), in one
   * statement; a lease another claim holds now is left alone.
   */
  private async release(
    leases: Pick<ClaimedDelivery, 'endpoint_id' | 'lease_key' | 'lease_token'>[],
  ) {
    const { store } = this.options;
    const rows = leases.map((l) => [l.endpoint_id, l.lease_key, l.lease_token]);
    await (store.dialect === 'postgres'
      ? sql`delete from webhook_key_leases l
          using json_to_recordset(${JSON.stringify(
            leases.map((l) => ({ e: l.endpoint_id, k: l.lease_key, t: l.lease_token })),
          )}::json) as v(e text, k text, t text)
          where l.endpoint_id = v.e and l.lease_key = v.k and l.lease_token = v.t`
      : sql`delete from webhook_key_leases
          where (endpoint_id, lease_key, lease_token) in (
            select v.value ->> 0, v.value ->> 1, v.value ->> 2 from json_each(${JSON.stringify(rows)}) v)`
    ).execute(store.db);
  }

  /**
   * One attempt (or none, when a switch is off: the delivery is then skipped, and the chain may
   * go on). Returns its outcome, not yet written.
   */
  private async attempt(delivery: ClaimedDelivery, endpoint: EndpointState): Promise<Outcome> {
    const { clock } = this.options;
    if (delivery.webhooks_enabled !== 1 || delivery.enabled !== 1) {
      // Nothing is sent while a switch is off; the delivery stays listed and can be retried.
      return {
        delivery,
        attempt: null,
        status: 'skipped',
        nextAttemptAt: null,
        code: delivery.last_status_code,
        error:
          delivery.webhooks_enabled !== 1
            ? 'webhooks are switched off for the project'
            : 'the endpoint is disabled',
        success: false,
        gone: false,
        nowMs: clock.now(),
      };
    }
    const startedMs = clock.now();
    const result = await this.send(delivery, startedMs);
    const code = result.statusCode;
    const success = code !== undefined && code >= 200 && code < 300;
    if (success) {
      endpoint.failures = 0;
      endpoint.pausedUntil = 0;
      endpoint.degraded = result.latencyMs >= SLOW_MS;
    } else if (!result.refused) {
      endpoint.failures++;
      endpoint.degraded = true;
      if (endpoint.failures >= PAUSE_AFTER_FAILURES) {
        const pauseMs = Math.min(
          MAX_PAUSE_MS,
          1000 * 2 ** (endpoint.failures - PAUSE_AFTER_FAILURES),
        );
        endpoint.pausedUntil = clock.now() + pauseMs;
      }
    }
    return this.outcome(delivery, startedMs, result);
  }

  /**
   * Writes an outcome (with the key's lease given back when `release`). The request was sent:
   * its result is worth keeping through a store outage, so it is written once the store is back,
   * while the lease still holds (after that, another node sends again).
   */
  private recordHeld(outcome: Outcome, release: boolean): Promise<void> {
    const { clock } = this.options;
    const recorded = (async () => {
      for (;;) {
        try {
          await this.record(outcome, release);
          return;
        } catch (err) {
          const leaseEndMs = Date.parse(outcome.delivery.lease_until) || 0;
          if (!unavailableDependency(err) || !this.running || clock.now() >= leaseEndMs) throw err;
          await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS));
        }
      }
    })();
    // Not unhandled while the chain goes on; runChain awaits it.
    recorded.catch(() => {});
    return recorded;
  }

  private async send(delivery: ClaimedDelivery, startedMs: number): Promise<SendResult> {
    const check = await this.cache.target(delivery.url, startedMs);
    if (!check.ok) {
      return { error: `refused before connecting: ${check.detail}`, latencyMs: 0, refused: true };
    }
    const headers = webhookHeaders(
      this.cache.signingKeys(delivery, startedMs),
      delivery.event_id,
      Math.floor(startedMs / 1000),
      delivery.payload,
    );
    const result = await this.sender.send({
      target: check.target,
      headers,
      body: delivery.payload,
      timeoutMs: this.options.timeoutMs,
      nowMs: startedMs,
    });
    this.options.metrics.attemptDuration.observe(result.latencyMs / 1000);
    return result;
  }

  /** The attempt's record and the delivery's next state. */
  private outcome(delivery: ClaimedDelivery, startedMs: number, result: SendResult): Outcome {
    const { clock, retryScheduleMs } = this.options;
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
      (
        result.error ??
        (success
          ? null
          : code !== undefined && code >= 300 && code < 400
            ? `HTTP ${code} (redirects are not followed)`
            : `HTTP ${code}`)
      )?.slice(0, ERROR_LIMIT) ?? null;
    this.options.metrics.attempts.inc({
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
    return {
      delivery,
      attempt: {
        id: newId('wha', nowMs),
        delivery_id: delivery.id,
        attempt,
        attempted_at: iso(startedMs),
        status_code: code ?? null,
        latency_ms: result.latencyMs,
        error,
        response_body: result.body ?? null,
        next_attempt_at: nextAttemptAt,
        node_id: this.nodeId,
      },
      status,
      nextAttemptAt,
      code: code ?? null,
      error,
      success,
      gone,
      nowMs,
    };
  }

  /**
   * Queues the outcome to be written with the others that finish meanwhile; resolves once it is
   * committed.
   */
  private record(outcome: Outcome, release: boolean): Promise<void> {
    outcome.release = release;
    return new Promise<void>((resolve, reject) => {
      this.outcomes.push({ outcome, done: (err) => (err ? reject(err) : resolve()) });
      if (this.outcomes.length >= this.options.concurrency || this.attempting === 0)
        this.gathered?.();
      this.recording ??= this.drainOutcomes().finally(() => {
        this.recording = null;
      });
    });
  }

  /**
   * Writes the queued outcomes, one batch at a time. A batch costs the store nearly the same
   * whatever its size (one statement and commit on PostgreSQL; on SQLite, one transaction whose
   * commit writes the pages it touched, shared by neighbouring deliveries), so under load a few
   * large batches cost far less per delivery than many small ones. Before each batch it waits
   * for the next turn of the event loop (answers that arrive together are written together)
   * and, while attempts are in flight, for more: until as many outcomes as the node has slots
   * are queued, no attempt is in flight any more, or RECORD_GATHER_MS passed. The wait delays
   * only the bookkeeping: a chain sends its next delivery without waiting for the write.
   */
  private async drainOutcomes() {
    while (this.outcomes.length > 0) {
      if (this.attempting > 0 && this.outcomes.length < this.options.concurrency) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => this.gathered?.(), RECORD_GATHER_MS);
          this.gathered = () => {
            clearTimeout(timer);
            this.gathered = null;
            resolve();
          };
        });
      } else await nextTurn();
      const batch = this.outcomes.splice(0, RECORD_BATCH);
      try {
        await this.writeOutcomes(batch.map((b) => b.outcome));
        for (const b of batch) b.done();
      } catch (err) {
        for (const b of batch) b.done(err ?? new Error('webhook outcome not written'));
      }
    }
  }

  /** Writes a batch of outcomes (outcomes.ts), then counts them and reports disabled endpoints. */
  private async writeOutcomes(batch: Outcome[]) {
    const { store, metrics, disableAfterMs = 0 } = this.options;
    const nowMs = this.options.clock.now();
    const { disabled, gone } = await writeOutcomes(store, batch, nowMs, disableAfterMs);
    for (const o of batch) {
      if (o.status !== 'pending') metrics.finished.inc({ status: o.status });
      if (o.success)
        metrics.deliveryLatency.observe(
          Math.max(0, nowMs - Date.parse(o.delivery.created_at)) / 1000,
        );
    }
    for (const id of disabled) {
      metrics.endpointsDisabled.inc({ reason: 'failing' });
      this.options.log.warn(
        { endpointId: id },
        'webhook endpoint disabled: its attempts have failed for too long',
      );
    }
    for (const id of gone) {
      metrics.endpointsDisabled.inc({ reason: 'gone' });
      this.options.log.warn({ endpointId: id }, 'webhook endpoint disabled: it answered 410 Gone');
    }
  }
  /**
   * Retention: deletes leases expired for a lease length, and events written before
   * `nowMs - retentionMs` whose deliveries are all finished, with their deliveries and attempts
   * (foreign keys cascade), {@link PRUNE_BATCH} events per statement, one statement after
   * another, until none is left. Returns how many events went. Pending deliveries are never
   * pruned.
   */
  prune(nowMs = this.options.clock.now()): Promise<number> {
    this.pruning ??= this.pruneBatches(nowMs).finally(() => {
      this.pruning = null;
    });
    return this.pruning;
  }

  private async pruneBatches(nowMs: number) {
    const { store, retentionMs = 0, leaseMs } = this.options;
    // Leases whose holder stopped without giving them back (a crash, or a key whose endpoint
    // was deleted meanwhile): an expired lease is as good as none, so this only keeps the
    // table small. A lease length past its end, no holder still writes under it.
    await store.db
      .deleteFrom('webhook_key_leases')
      .where('lease_until', '<', iso(nowMs - leaseMs))
      .execute();
    if (retentionMs <= 0) return 0;
    const cutoff = iso(nowMs - retentionMs);
    let total = 0;
    for (;;) {
      const old = store.db
        .selectFrom('webhook_events as ev')
        .select('ev.seq')
        .where('ev.created_at', '<', cutoff)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('webhook_deliveries as d')
                .select('d.id')
                .whereRef('d.event_seq', '=', 'ev.seq')
                .where('d.status', '=', PENDING),
            ),
          ),
        )
        .orderBy('ev.created_at')
        .limit(PRUNE_BATCH)
        .$if(store.dialect === 'postgres', (q) => q.forUpdate().skipLocked());
      const result = await store.db
        .deleteFrom('webhook_events')
        .where('seq', 'in', old)
        .executeTakeFirst();
      const n = Number(result.numDeletedRows);
      total += n;
      if (n > 0) this.options.metrics.pruned.inc(n);
      if (n < PRUNE_BATCH) break;
      // Let other work run between batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (total > 0) this.options.log.info({ events: total }, 'webhook retention: pruned');
    return total;
  }
}

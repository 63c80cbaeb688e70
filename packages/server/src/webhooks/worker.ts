import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import { newId } from '../ids.ts';
import type { Sealer } from '../sealing.ts';
import type { Store } from '../storage/db.ts';
import { unavailableDependency } from '../unavailable.ts';
import { EndpointCache } from './endpoint-cache.ts';
import type { WebhookMetrics } from './metrics.ts';
import { type SendResult, WebhookSender } from './sender.ts';
import { webhookHeaders } from './signing.ts';
import type { WebhookAttemptsTable, WebhookDeliveriesTable } from './tables.ts';

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

/** A claimed delivery with what its attempt needs (body, endpoint, project switch). */
export interface ClaimedDelivery extends WebhookDeliveriesTable {
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

/** One attempt's outcome, waiting to be written with others in one transaction. */
interface Outcome {
  delivery: ClaimedDelivery;
  attempt: WebhookAttemptsTable;
  status: WebhookDeliveriesTable['status'];
  nextAttemptAt: string | null;
  code: number | null;
  error: string | null;
  success: boolean;
  gone: boolean;
  nowMs: number;
}

const iso = (ms: number) => new Date(ms).toISOString();
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
/** Deliveries of one ordering key claimed together and sent one after another, at most. */
export const CHAIN_MAX = 32;
/** Outcomes written in one transaction at most. */
const RECORD_BATCH = 256;
/** Rows deleted per statement when pruning; statements run one after another. */
export const PRUNE_BATCH = 500;
const PRUNE_INTERVAL_MS = 10 * 60_000;

/**
 * The delivery worker. It claims due deliveries in batches (one statement: a lease written under
 * `FOR UPDATE SKIP LOCKED` on PostgreSQL, which also returns what the attempts need; on SQLite
 * this process is the only worker), sends them, and writes the attempts' outcomes in batches (one
 * transaction per batch: whatever finished while the previous batch was being written). A
 * delivery is eligible only when no earlier event with the same ordering key is still pending for
 * the same endpoint, so events of one room arrive in order even while an earlier one is being
 * retried. A node that dies mid-attempt leaves a lease that expires after `leaseMs`; another node
 * (or this one, restarted) then retries it: delivery is at least once.
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
      await this.options.store.db
        .updateTable('webhook_deliveries')
        .set({ lease_until: null, lease_token: null })
        .where('status', '=', 'pending')
        .where('lease_until', 'is not', null)
        .execute();
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
   */
  private endpointLimits(nowMs: number) {
    const excluded: string[] = [];
    const caps: Record<string, number> = {};
    for (const [id, s] of this.endpoints) {
      const slots = this.slotsOf(s);
      const free = slots + Math.ceil(slots / 2) - s.inFlight - s.queued;
      if (free <= 0 || s.pausedUntil > nowMs) excluded.push(id);
      else if (free < this.endpointCap) caps[id] = free;
      else if (s.inFlight === 0 && s.queued === 0 && s.failures === 0 && !s.degraded)
        this.endpoints.delete(id);
    }
    return { excluded, caps };
  }

  /**
   * Starts queued chains while slots are free (the node's and their endpoint's), in claim order.
   * A chain whose endpoint is paused, or whose lease would not outlast an attempt, or any chain
   * once the worker stops, is given back (leases cleared) for a later claim here or elsewhere.
   */
  private startReady() {
    if (this.ready.length === 0) return;
    const nowMs = this.options.clock.now();
    const kept: ClaimedDelivery[][] = [];
    const released: ClaimedDelivery[] = [];
    for (const chain of this.ready) {
      const endpoint = this.state(chain[0].endpoint_id);
      const leaseEndMs = Date.parse(chain[0].lease_until ?? '') || 0;
      if (
        !this.running ||
        endpoint.pausedUntil > nowMs ||
        nowMs + this.options.timeoutMs >= leaseEndMs
      ) {
        endpoint.queued--;
        released.push(...chain);
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
   * deliveries of one ordering key for one endpoint (at most {@link CHAIN_MAX}, sent one after
   * another, in order), at most an endpoint's free slots per endpoint. Returns the chains with
   * what their attempts need. A delivery joins a chain only if every earlier pending delivery of
   * its key for its endpoint is in the chain before it.
   */
  private async claim(slots: number): Promise<ClaimedDelivery[][]> {
    const { store, clock, leaseMs } = this.options;
    const nowMs = clock.now();
    const now = iso(nowMs);
    const leaseUntil = iso(nowMs + leaseMs);
    const token = `${this.nodeId}:${randomBytes(6).toString('hex')}`;
    const { excluded, caps } = this.endpointLimits(nowMs);
    const free = (t: 'h' | 'm' | 'd') => {
      const a = sql.raw(t);
      return sql`${a}.status = 'pending' and ${a}.next_attempt_at <= ${now}
        and (${a}.lease_until is null or ${a}.lease_until < ${now})`;
    };
    const postgres = store.dialect === 'postgres';
    const capsTable = postgres
      ? sql`unnest(${Object.keys(caps)}::text[], ${Object.values(caps)}::int[]) as caps(endpoint_id, free)`
      : sql`(select key as endpoint_id, value as free from json_each(${JSON.stringify(caps)})) caps`;
    // Heads first: due deliveries with no earlier pending one of their key, in the due index's
    // order (the scan stops once it has enough), capped per endpoint. Then each chosen head's
    // next CHAIN_MAX - 1 pending deliveries of its key (an index range of at most that many),
    // up to the first that is not due or is leased. Only the chosen rows are locked
    // (PostgreSQL: rows another node is claiming are skipped, and each row's status and lease
    // are checked again as locked); a chain keeps only its rows up to the first it could not
    // lock, so no node ever holds a key's later deliveries without the earlier ones.
    const chosen = sql`
      heads as (
        select h.id, h.endpoint_id, h.ordering_key, h.next_attempt_at, h.event_seq
        from webhook_deliveries h
        where ${free('h')} and ${
          postgres
            ? sql`h.endpoint_id <> all(${excluded}::text[])`
            : sql`h.endpoint_id not in (select value from json_each(${JSON.stringify(excluded)}))`
        }
          and not exists (
            select 1 from webhook_deliveries e
            where e.endpoint_id = h.endpoint_id and e.ordering_key = h.ordering_key
              and e.event_seq < h.event_seq and e.status = 'pending')
        order by h.next_attempt_at, h.event_seq
        limit ${slots * 2}
      ), chosen_heads as (
        select r.* from (
          select heads.*, row_number() over (partition by heads.endpoint_id
            order by heads.next_attempt_at, heads.event_seq) as ern
          from heads
        ) r
        left join ${capsTable} on caps.endpoint_id = r.endpoint_id
        where r.ern <= coalesce(caps.free, ${this.endpointCap})
        order by r.next_attempt_at, r.event_seq
        limit ${slots}
      ), members as (
        select h.id as head, h.id, h.event_seq, 0 as blocked from chosen_heads h
        union all
        select h.id, m.id, m.event_seq, case when ${free('m')} then 0 else 1 end
        from chosen_heads h
        ${
          postgres
            ? sql`cross join lateral (
                select m.id, m.event_seq, m.status, m.next_attempt_at, m.lease_until
                from webhook_deliveries m
                where m.endpoint_id = h.endpoint_id and m.ordering_key = h.ordering_key
                  and m.status = 'pending' and m.event_seq > h.event_seq
                order by m.event_seq limit ${CHAIN_MAX - 1}) m`
            : sql`join webhook_deliveries m on m.endpoint_id = h.endpoint_id
                and m.ordering_key = h.ordering_key and m.status = 'pending'
                and m.event_seq > h.event_seq
                and m.event_seq <= coalesce((
                  select e.event_seq from webhook_deliveries e
                  where e.endpoint_id = h.endpoint_id and e.ordering_key = h.ordering_key
                    and e.status = 'pending' and e.event_seq > h.event_seq
                  order by e.event_seq limit 1 offset ${CHAIN_MAX - 2}), m.event_seq)`
        }
      ), picked as (
        select x.head, x.id, row_number() over (partition by x.head order by x.event_seq) as rn
        from (
          select members.*, min(case when members.blocked = 1 then members.event_seq end)
            over (partition by members.head) as stop
          from members
        ) x
        where x.stop is null or x.event_seq < x.stop
      ), locked as (
        select d.id from picked join webhook_deliveries d on d.id = picked.id
        where ${free('d')}
        ${postgres ? sql`for update of d skip locked` : sql``}
      ), chosen as (
        select id from (
          select picked.id, picked.rn,
            row_number() over (partition by picked.head order by picked.rn) as held
          from picked join locked on locked.id = picked.id
        ) k where k.held = k.rn
      )`;
    let rows: ClaimedDelivery[];
    if (postgres) {
      // One round trip: pick (skipping rows another node is claiming), lease, and join what
      // the attempts need.
      ({ rows } = await sql<ClaimedDelivery>`
        with ${chosen}, claimed as (
          update webhook_deliveries d
          set lease_until = ${leaseUntil}, lease_token = ${token}, updated_at = ${now}
          from chosen where d.id = chosen.id
          returning d.*
        )
        select c.*, ev.payload, e.url, e.enabled, e.secret, e.previous_secret,
          e.previous_secret_expires_at, e.failing_since, p.webhooks_enabled
        from claimed c
        join webhook_events ev on ev.seq = c.event_seq
        join webhook_endpoints e on e.id = c.endpoint_id
        join projects p on p.id = e.project_id
        order by c.event_seq`.execute(store.db));
    } else {
      const { rows: leased } = await sql<{ id: string }>`
        with ${chosen}
        update webhook_deliveries
        set lease_until = ${leaseUntil}, lease_token = ${token}, updated_at = ${now}
        where id in (select id from chosen)
        returning id`.execute(store.db);
      if (leased.length === 0) return [];
      rows = await store.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('webhook_events as ev', 'ev.seq', 'd.event_seq')
        .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
        .innerJoin('projects as p', 'p.id', 'e.project_id')
        .selectAll('d')
        .select([
          'ev.payload',
          'e.url',
          'e.enabled',
          'e.secret',
          'e.previous_secret',
          'e.previous_secret_expires_at',
          'e.failing_since',
          'p.webhooks_enabled',
        ])
        // A fixed text (one prepared statement) whatever the number of rows.
        .where(
          'd.id',
          'in',
          sql<string>`(select value from json_each(${JSON.stringify(leased.map((r) => r.id))}))`,
        )
        .orderBy('d.event_seq')
        .execute();
    }
    // Rows come in sequence order: each chain's in its key's order.
    const chains = new Map<string, ClaimedDelivery[]>();
    for (const row of rows) {
      const key = `${row.endpoint_id} ${row.ordering_key ?? row.id}`;
      const list = chains.get(key);
      if (list) list.push(row);
      else chains.set(key, [row]);
    }
    return [...chains.values()];
  }

  /**
   * Sends a chain's deliveries one after another; stops at the first that does not succeed, and
   * gives back the rest unsent (their leases cleared), as it does those whose lease would run out
   * during an attempt. Resolves once every outcome is written.
   */
  private async runChain(chain: ClaimedDelivery[]) {
    const { clock, timeoutMs } = this.options;
    const endpoint = this.state(chain[0].endpoint_id);
    // The chain holds its slot until its outcomes are written: its key is blocked until then,
    // so a claim made earlier could not take the key's next deliveries anyway.
    endpoint.inFlight++;
    this.sending++;
    const written: Promise<void>[] = [];
    let results: PromiseSettledResult<void>[];
    try {
      let sent = 0;
      for (const delivery of chain) {
        const leaseEndMs = Date.parse(delivery.lease_until ?? '') || 0;
        // The first always goes (as a lone claim would); a later one only if its lease outlasts
        // a whole attempt, else another node could take it while it is being sent.
        if (sent > 0 && (!this.running || clock.now() + timeoutMs >= leaseEndMs)) break;
        const { ok, recorded } = await this.attempt(delivery, endpoint);
        written.push(recorded);
        sent++;
        if (!ok) break;
      }
      if (sent < chain.length) written.push(this.release(chain.slice(sent)));
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
   * Clears the leases of claimed deliveries that were not attempted (due again at once), in one
   * statement; a row whose lease another claim holds now is left alone.
   */
  private async release(deliveries: ClaimedDelivery[]) {
    const { store } = this.options;
    const ids = deliveries.map((d) => d.id);
    const tokens = deliveries.map((d) => d.lease_token ?? '');
    await (store.dialect === 'postgres'
      ? sql`update webhook_deliveries d set lease_until = null, lease_token = null
          from unnest(${ids}::text[], ${tokens}::text[]) as v(id, token)
          where d.id = v.id and d.lease_token = v.token`
      : sql`update webhook_deliveries as d set lease_until = null, lease_token = null
          from json_each(${JSON.stringify(ids.map((id, i) => [id, tokens[i]]))}) v
          where d.id = v.value ->> 0 and d.lease_token = v.value ->> 1`
    ).execute(store.db);
  }

  /**
   * One attempt. `ok` once it succeeded (or was skipped because a switch is off) and the chain
   * may go on; `recorded` settles once its outcome is written.
   */
  private async attempt(
    delivery: ClaimedDelivery,
    endpoint: EndpointState,
  ): Promise<{ ok: boolean; recorded: Promise<void> }> {
    const { clock } = this.options;
    if (delivery.webhooks_enabled !== 1 || delivery.enabled !== 1) {
      // Nothing is sent while a switch is off; the delivery stays listed and can be retried.
      const recorded = this.finish(delivery, {
        status: 'skipped',
        last_error:
          delivery.webhooks_enabled !== 1
            ? 'webhooks are switched off for the project'
            : 'the endpoint is disabled',
      });
      await recorded;
      return { ok: true, recorded };
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
    const outcome = this.outcome(delivery, startedMs, result);
    // The request was sent: its result is worth keeping through a store outage. It is written
    // once the store is back, while the lease still holds (after that, another node sends again).
    const recorded = (async () => {
      for (;;) {
        try {
          await this.record(outcome);
          return;
        } catch (err) {
          const leaseEndMs = Date.parse(delivery.lease_until ?? '') || 0;
          if (!unavailableDependency(err) || !this.running || clock.now() >= leaseEndMs) throw err;
          await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS));
        }
      }
    })();
    // Not unhandled while the chain goes on; runChain awaits it.
    recorded.catch(() => {});
    return { ok: success, recorded };
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
   * committed. One batch is written at a time: under load, a batch is whatever finished while
   * the previous one was being written; alone, an outcome is written at once.
   */
  private record(outcome: Outcome): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.outcomes.push({ outcome, done: (err) => (err ? reject(err) : resolve()) });
      // From the next turn of the event loop: answers that arrive together are written together.
      this.recording ??= new Promise((r) => setImmediate(r))
        .then(() => this.drainOutcomes())
        .finally(() => {
          this.recording = null;
        });
    });
  }

  private async drainOutcomes() {
    while (this.outcomes.length > 0) {
      const batch = this.outcomes.splice(0, RECORD_BATCH);
      try {
        await this.writeOutcomes(batch.map((b) => b.outcome));
        for (const b of batch) b.done();
      } catch (err) {
        for (const b of batch) b.done(err ?? new Error('webhook outcome not written'));
      }
    }
  }

  /** Writes a batch of outcomes: attempts, deliveries' states, endpoints' health, in one go. */
  private async writeOutcomes(batch: Outcome[]) {
    const { store, metrics, disableAfterMs = 0 } = this.options;
    const nowMs = this.options.clock.now();
    const now = iso(nowMs);
    // Endpoint health, from the last outcome per endpoint in this batch (the claim read
    // `failing_since`, so an unchanged endpoint costs no write).
    const last = new Map<string, Outcome>();
    for (const o of batch)
      if (!o.attempt.error?.startsWith('refused')) last.set(o.delivery.endpoint_id, o);
    const recovered: string[] = [];
    const failing: string[] = [];
    const checkDisable: string[] = [];
    const gone = [...new Set(batch.filter((o) => o.gone).map((o) => o.delivery.endpoint_id))];
    for (const [id, o] of last) {
      if (o.success) {
        if (o.delivery.failing_since !== null) recovered.push(id);
      } else {
        if (o.delivery.failing_since === null) failing.push(id);
        else if (disableAfterMs > 0) checkDisable.push(id);
      }
    }
    const cutoff = iso(nowMs - disableAfterMs);
    let disabled: string[] = [];
    const endpointWrites = async (db: Store['db']) => {
      if (recovered.length)
        await db
          .updateTable('webhook_endpoints')
          .set({ failing_since: null })
          .where('id', 'in', recovered)
          .where('failing_since', 'is not', null)
          .execute();
      if (failing.length)
        await db
          .updateTable('webhook_endpoints')
          .set({ failing_since: now })
          .where('id', 'in', failing)
          .where('failing_since', 'is', null)
          .execute();
      if (checkDisable.length) {
        const rows = await db
          .updateTable('webhook_endpoints')
          .set({ enabled: 0, disabled_reason: 'failing', updated_at: now })
          .where('id', 'in', checkDisable)
          .where('enabled', '=', 1)
          .where('failing_since', '<=', cutoff)
          .returning('id')
          .execute();
        disabled = rows.map((r) => r.id);
      }
      if (gone.length)
        await db
          .updateTable('webhook_endpoints')
          .set({ enabled: 0, disabled_reason: 'gone', updated_at: now })
          .where('id', 'in', gone)
          .execute();
    };
    // The batch as two JSON parameters (serialised natively, parsed by the database), the
    // statements' text the same whatever the batch's size.
    const attempts = JSON.stringify(batch.map((o) => o.attempt));
    const states = JSON.stringify(
      batch.map((o) => ({
        id: o.delivery.id,
        token: o.delivery.lease_token ?? '',
        status: o.status,
        attempt_count: o.attempt.attempt,
        next_attempt_at: o.nextAttemptAt,
        code: o.code,
        error: o.error,
      })),
    );
    if (store.dialect === 'postgres') {
      // One statement for the attempts and the deliveries (one round trip, one commit for the
      // batch). Only the lease holder writes: if the lease was lost, another node owns it.
      const statement = sql`
        with sync as (select set_config('synchronous_commit', 'off', true) as off),
        a as (
          insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code,
            latency_ms, error, response_body, next_attempt_at, node_id)
          select * from json_to_recordset(${attempts}::json) as v(id text, delivery_id text,
            attempt int, attempted_at text, status_code int, latency_ms int, error text,
            response_body text, next_attempt_at text, node_id text)
        )
        update webhook_deliveries d set status = v.status, attempt_count = v.attempt_count,
          next_attempt_at = v.next_attempt_at, lease_until = null, lease_token = null,
          last_status_code = v.code, last_error = v.error, updated_at = ${now}
        from json_to_recordset(${states}::json) as v(id text, token text, status text,
          attempt_count int, next_attempt_at text, code int, error text)
        where d.id = v.id and d.lease_token = v.token and (select off from sync) is not null`;
      // Without waiting for the WAL flush (most of an outcome write's time): an outcome lost
      // to a PostgreSQL crash leaves its delivery pending, sent again once its lease expires
      // (at least once, as with a node crash). Endpoint changes commit with the outcomes that
      // caused them (an endpoint that answered 410 is disabled by the time its delivery shows
      // as failed).
      if (recovered.length || failing.length || checkDisable.length || gone.length) {
        await store.db.transaction().execute(async (trx) => {
          await statement.execute(trx);
          await endpointWrites(trx);
        });
      } else await statement.execute(store.db);
    } else {
      // Two statements of fixed text whatever the batch's size (each prepared once).
      await store.db.transaction().execute(async (trx) => {
        await sql`
          insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code,
            latency_ms, error, response_body, next_attempt_at, node_id)
          select v.value ->> 'id', v.value ->> 'delivery_id', v.value ->> 'attempt',
            v.value ->> 'attempted_at', v.value ->> 'status_code', v.value ->> 'latency_ms',
            v.value ->> 'error', v.value ->> 'response_body', v.value ->> 'next_attempt_at',
            v.value ->> 'node_id'
          from json_each(${attempts}) v`.execute(trx);
        await sql`
          update webhook_deliveries as d set status = v.value ->> 'status',
            attempt_count = v.value ->> 'attempt_count',
            next_attempt_at = v.value ->> 'next_attempt_at', lease_until = null,
            lease_token = null, last_status_code = v.value ->> 'code',
            last_error = v.value ->> 'error', updated_at = ${now}
          from json_each(${states}) v
          where d.id = v.value ->> 'id' and d.lease_token = v.value ->> 'token'`.execute(trx);
        await endpointWrites(trx);
      });
    }
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

  /**
   * Retention: deletes events written before `nowMs - retentionMs` whose deliveries are all
   * finished, with their deliveries and attempts (foreign keys cascade), {@link PRUNE_BATCH}
   * events per statement, one statement after another, until none is left. Returns how many
   * events went. Pending deliveries are never pruned.
   */
  prune(nowMs = this.options.clock.now()): Promise<number> {
    this.pruning ??= this.pruneBatches(nowMs).finally(() => {
      this.pruning = null;
    });
    return this.pruning;
  }

  private async pruneBatches(nowMs: number) {
    const { store, retentionMs = 0 } = this.options;
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

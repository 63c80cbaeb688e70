import type { WebhookEvent } from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { type Clock, iso } from '../clock.ts';
import type { DomainEvent } from '../events.ts';
import { newId } from '../ids.ts';
import type { Store } from '../storage/db.ts';
import { unavailableDependency } from '../unavailable.ts';
import type { WebhookMetrics } from './metrics.ts';
import type { WebhookDeliveriesTable, WebhookEventsTable } from './tables.ts';

export interface Enqueued {
  eventId: string;
  deliveryIds: string[];
}

/** Events written in one statement (or transaction) at most. */
export const OUTBOX_BATCH = 500;

interface Waiting {
  event: DomainEvent;
  resolve: (r: Enqueued | null) => void;
  reject: (err: unknown) => void;
}

/**
 * The persisted outbox. `write` stores the event and one pending delivery per matching
 * endpoint, and resolves only once they are committed: whoever emitted the event may acknowledge
 * it then. Writes are grouped: events that arrive while a batch is being written go together in
 * the next one (one statement on PostgreSQL, one transaction on SQLite), in arrival order, so
 * the outbox's sequence follows emission order on this node. `writeMany` writes a batch given at
 * once. Events of a project with webhooks switched off, or with no enabled endpoint wanting the
 * type, are not stored at all.
 */
export class Outbox {
  private waiting: Waiting[] = [];
  private flushing = false;

  constructor(
    private store: Store,
    private clock: Clock,
    private metrics: WebhookMetrics,
    /** The retry schedule's first entry: the delay before the first attempt. */
    private firstDelayMs: number,
    /** Called after each commit (wakes the local worker). */
    private onEnqueued: () => void,
  ) {}

  /** Asks the local worker to look for due deliveries now. */
  wakeWorker() {
    this.onEnqueued();
  }

  write(event: DomainEvent, only?: { endpointId: string }): Promise<Enqueued | null> {
    if (only) return this.writeMany([event], only).then((r) => r[0]);
    return new Promise((resolve, reject) => {
      this.waiting.push({ event, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        // After the current task's synchronous emits have queued theirs.
        queueMicrotask(() => void this.flush());
      }
    });
  }

  private async flush() {
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, OUTBOX_BATCH);
        try {
          const results = await this.writeMany(batch.map((w) => w.event));
          for (const [i, w] of batch.entries()) w.resolve(results[i]);
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /**
   * Writes the events (in this order) with their deliveries in one statement (PostgreSQL) or
   * transaction (SQLite); returns, per event, its id and deliveries, or null when no endpoint
   * wanted it.
   */
  async writeMany(
    events: DomainEvent[],
    only?: { endpointId: string },
  ): Promise<(Enqueued | null)[]> {
    if (events.length === 0) return [];
    const projects = [...new Set(events.map((e) => e.projectId))];
    const rows = this.rowsOf(events, await this.endpointsOf(projects, only), only !== undefined);
    if (rows.events.length === 0) return rows.results;
    if (this.store.dialect === 'postgres') await this.insertPostgres(rows, projects);
    else await this.insertSqlite(rows);
    for (const row of rows.events) this.metrics.enqueued.inc({ type: row.type });
    this.onEnqueued();
    return rows.results;
  }

  /** The projects' enabled endpoints (`only`: that one) with the event types each wants. */
  private async endpointsOf(projects: string[], only?: { endpointId: string }) {
    const endpoints = await this.store.db
      .selectFrom('webhook_endpoints as e')
      .innerJoin('projects as p', 'p.id', 'e.project_id')
      .select(['e.id', 'e.events', 'e.project_id'])
      .where('e.project_id', 'in', projects)
      .where('e.enabled', '=', 1)
      .where('p.webhooks_enabled', '=', 1)
      .$if(only !== undefined, (q) => q.where('e.id', '=', only!.endpointId))
      .orderBy('e.created_at')
      .orderBy('e.id')
      .execute();
    const byProject = new Map<string, { id: string; wanted: string[] }[]>();
    for (const e of endpoints) {
      const list = byProject.get(e.project_id) ?? [];
      list.push({ id: e.id, wanted: JSON.parse(e.events) as string[] });
      byProject.set(e.project_id, list);
    }
    return byProject;
  }

  /**
   * The rows of the events some endpoint wants, and a delivery per such endpoint; `all`: every
   * endpoint given wants every event.
   */
  private rowsOf(
    events: DomainEvent[],
    byProject: Map<string, { id: string; wanted: string[] }[]>,
    all: boolean,
  ): OutboxRows {
    const nowMs = this.clock.now();
    const rows: OutboxRows = {
      results: [],
      events: [],
      deliveries: [],
      now: iso(nowMs),
      nextAttemptAt: iso(nowMs + this.firstDelayMs),
    };
    for (const event of events) {
      const matching = (byProject.get(event.projectId) ?? []).filter(
        (e) => all || e.wanted.length === 0 || e.wanted.includes(event.type),
      );
      if (matching.length === 0) {
        rows.results.push(null);
        continue;
      }
      const id = newId('evt', nowMs);
      const body: WebhookEvent = {
        type: event.type,
        id,
        createdAt: iso(event.occurredAtMs),
        projectId: event.projectId,
        data: event.data,
      };
      const index = rows.events.length;
      rows.events.push({
        id,
        project_id: event.projectId,
        type: event.type,
        ordering_key: event.orderingKey ?? null,
        payload: JSON.stringify(body),
        created_at: rows.now,
      });
      const deliveryIds = matching.map((endpoint) => {
        const deliveryId = newId('whd', nowMs);
        rows.deliveries.push({ id: deliveryId, event: index, endpointId: endpoint.id });
        return deliveryId;
      });
      rows.results.push({ eventId: id, deliveryIds });
    }
    return rows;
  }

  /**
   * One statement (atomic on its own): the events in order (the sequence follows the array's
   * order), then their deliveries joined on the new rows' sequence numbers.
   */
  private async insertPostgres(
    { events, deliveries, now, nextAttemptAt }: OutboxRows,
    projects: string[],
  ) {
    const ev = <K extends keyof (typeof events)[number]>(k: K) => events.map((r) => r[k]);
    const dv = <T>(f: (d: (typeof deliveries)[number]) => T) => deliveries.map(f);
    // The projects and endpoints are locked as the foreign keys' checks would lock them, but
    // first: one deleted since they were read is left out (its rows would have gone with it)
    // instead of failing the whole batch.
    await sql`
      with p as (
        select id from projects where id = any(${projects}::text[]) for key share
      ), e as (
        select id from webhook_endpoints
        where id = any(${[...new Set(dv((d) => d.endpointId))]}::text[]) for key share
      ), ev as (
        insert into webhook_events (id, project_id, type, ordering_key, payload, created_at)
        select u.id, u.project_id, u.type, u.ordering_key, u.payload, u.created_at
        from unnest(${ev('id')}::text[], ${ev('project_id')}::text[], ${ev('type')}::text[],
          ${ev('ordering_key')}::text[], ${ev('payload')}::text[], ${ev('created_at')}::text[])
          with ordinality as u(id, project_id, type, ordering_key, payload, created_at, ord)
        join p on p.id = u.project_id
        order by u.ord
        returning seq, id, project_id, type, ordering_key
      )
      insert into webhook_deliveries (id, event_seq, event_id, event_type, endpoint_id,
        project_id, ordering_key, status, attempt_count, next_attempt_at, created_at, updated_at)
      select v.id, ev.seq, ev.id, ev.type, v.endpoint_id, ev.project_id, ev.ordering_key,
        'pending', 0, ${nextAttemptAt}, ${now}, ${now}
      from unnest(${dv((d) => d.id)}::text[], ${dv((d) => events[d.event].id)}::text[],
        ${dv((d) => d.endpointId)}::text[]) as v(id, event_id, endpoint_id)
      join ev on ev.id = v.event_id
      join e on e.id = v.endpoint_id`.execute(this.store.db);
  }

  /**
   * One transaction: the events, then their deliveries. Endpoints deleted since they were read
   * (with their project, or alone) are left out, with the events no endpoint is left for (their
   * rows would have gone with them): `rows` then keeps only what was written.
   */
  private async insertSqlite(rows: OutboxRows) {
    const { now, nextAttemptAt } = rows;
    await this.store.db.transaction().execute(async (trx) => {
      const live = new Set(
        (
          await trx
            .selectFrom('webhook_endpoints')
            .select('id')
            .where('id', 'in', [...new Set(rows.deliveries.map((d) => d.endpointId))])
            .execute()
        ).map((r) => r.id),
      );
      if (rows.deliveries.some((d) => !live.has(d.endpointId))) keepLive(rows, live);
      const { events, deliveries } = rows;
      if (events.length === 0) return;
      // Rows get their sequence in the order they are listed; RETURNING's order is arbitrary.
      const inserted = await trx
        .insertInto('webhook_events')
        .values(events)
        .returning(['seq', 'id'])
        .execute();
      const seqById = new Map(inserted.map((r) => [r.id, r.seq]));
      const seqs = events.map((r) => seqById.get(r.id)!);
      // SQLite allows 32,766 parameters a statement: 1,000 rows of 18 columns fit.
      for (let i = 0; i < deliveries.length; i += 1000) {
        await trx
          .insertInto('webhook_deliveries')
          .values(
            deliveries.slice(i, i + 1000).map(
              (d): WebhookDeliveriesTable => ({
                id: d.id,
                event_seq: seqs[d.event],
                event_id: events[d.event].id,
                event_type: events[d.event].type,
                endpoint_id: d.endpointId,
                project_id: events[d.event].project_id,
                ordering_key: events[d.event].ordering_key,
                status: 'pending',
                attempt_count: 0,
                next_attempt_at: nextAttemptAt,
                last_status_code: null,
                last_error: null,
                success_attempted_at: null,
                success_latency_ms: null,
                success_response_body: null,
                success_node_id: null,
                created_at: now,
                updated_at: now,
              }),
            ),
          )
          .execute();
      }
    });
  }
}

/** A batch of events as rows, each delivery with the index of its event in `events`. */
interface OutboxRows {
  /** Per event given: its id and deliveries, or null when no endpoint wanted it. */
  results: (Enqueued | null)[];
  events: Omit<WebhookEventsTable, 'seq'>[];
  deliveries: { id: string; event: number; endpointId: string }[];
  now: string;
  nextAttemptAt: string;
}

/** Keeps the deliveries to `live` endpoints and their events, in order. */
function keepLive(rows: OutboxRows, live: Set<string>) {
  const kept = rows.deliveries.filter((d) => live.has(d.endpointId));
  // Events keep their order; deliveries point at their event's new index.
  const newIndex = new Map<number, number>();
  const events: OutboxRows['events'] = [];
  for (const [i, row] of rows.events.entries()) {
    if (!kept.some((d) => d.event === i)) continue;
    newIndex.set(i, events.length);
    events.push(row);
  }
  for (const d of kept) d.event = newIndex.get(d.event)!;
  rows.events = events;
  rows.deliveries = kept;
}

/** Events a node holds at most while the store is unavailable (the oldest are dropped first). */
export const MAX_HELD_EVENTS = 10_000;
const HOLD_RETRY_MS = 1000;

/**
 * The outbox as the domain events' sink, for store outages: an event whose write finds the store
 * unavailable is held in this node's memory and written once the store is back, in emission
 * order (events that come while some are held queue behind them), so the change that raised it
 * (a join committed in Redis, say) is not refused for want of its webhook. Held events are
 * bounded ({@link MAX_HELD_EVENTS}, oldest dropped first) and lost if the node stops before the
 * store is back; both are logged with their count.
 */
export class OutboxHold {
  private queue: DomainEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;

  constructor(
    private outbox: Outbox,
    private log: FastifyBaseLogger,
    private max = MAX_HELD_EVENTS,
  ) {}

  /** Events held now. */
  get size() {
    return this.queue.length;
  }

  /** Writes the event to the outbox, or holds it while the store is unavailable. */
  async write(event: DomainEvent): Promise<void> {
    if (this.queue.length === 0) {
      try {
        await this.outbox.write(event);
        return;
      } catch (err) {
        if (!unavailableDependency(err)) throw err;
      }
    }
    this.queue.push(event);
    if (this.queue.length === 1) this.log.warn('webhook events held: the store is unavailable');
    if (this.queue.length > this.max) {
      this.queue.shift();
      this.log.error({ dropped: 1, held: this.max }, 'webhook event dropped: too many held');
    }
    this.schedule();
  }

  private schedule() {
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.drain();
    }, HOLD_RETRY_MS).unref();
  }

  /** Writes the held events in order; stops at the first that finds the store still away. */
  private drain(): Promise<void> {
    this.draining ??= (async () => {
      while (this.queue.length > 0) {
        const event = this.queue[0]!;
        try {
          await this.outbox.write(event);
        } catch (err) {
          if (unavailableDependency(err)) {
            this.schedule();
            return;
          }
          this.log.error({ err, type: event.type }, 'held webhook event not written');
        }
        if (this.queue[0] === event) this.queue.shift();
      }
      this.log.warn('held webhook events written');
    })().finally(() => {
      this.draining = null;
    });
    return this.draining;
  }

  /** Tries once more to write what is held; what still is, is lost (and logged). */
  async close() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.queue.length > 0) await this.drain();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.queue.length > 0) {
      this.log.error({ dropped: this.queue.length }, 'held webhook events lost at shutdown');
      this.queue = [];
    }
  }
}

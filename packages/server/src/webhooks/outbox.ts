import type { WebhookEvent } from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import type { DomainEvent } from '../events.ts';
import { newId } from '../ids.ts';
import type { Store } from '../storage/db.ts';
import { unavailableDependency } from '../unavailable.ts';
import type { WebhookMetrics } from './metrics.ts';
import type { WebhookDeliveriesTable } from './tables.ts';

export interface Enqueued {
  eventId: string;
  deliveryIds: string[];
}

/**
 * The persisted outbox. `write` stores the event and one pending delivery per matching
 * endpoint in one transaction, and resolves only once they are committed: whoever emitted
 * the event may acknowledge it then. Events of a project with webhooks switched off, or
 * with no enabled endpoint wanting the type, are not stored at all.
 */
export class Outbox {
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

  async write(event: DomainEvent, only?: { endpointId: string }): Promise<Enqueued | null> {
    const endpoints = await this.store.db
      .selectFrom('webhook_endpoints as e')
      .innerJoin('projects as p', 'p.id', 'e.project_id')
      .select(['e.id', 'e.events'])
      .where('e.project_id', '=', event.projectId)
      .where('e.enabled', '=', 1)
      .where('p.webhooks_enabled', '=', 1)
      .$if(only !== undefined, (q) => q.where('e.id', '=', only!.endpointId))
      .execute();
    const matching = endpoints.filter((e) => {
      if (only) return true;
      const wanted = JSON.parse(e.events) as string[];
      return wanted.length === 0 || wanted.includes(event.type);
    });
    if (matching.length === 0) return null;

    const nowMs = this.clock.now();
    const now = new Date(nowMs).toISOString();
    const id = newId('evt', nowMs);
    const body: WebhookEvent = {
      type: event.type,
      id,
      createdAt: new Date(event.occurredAtMs).toISOString(),
      projectId: event.projectId,
      data: event.data,
    };
    const orderingKey = event.orderingKey ?? null;
    const eventRow = {
      id,
      project_id: event.projectId,
      type: event.type,
      ordering_key: orderingKey,
      payload: JSON.stringify(body),
      created_at: now,
    };
    const nextAttemptAt = new Date(nowMs + this.firstDelayMs).toISOString();
    const deliveryIds = matching.map(() => newId('whd', nowMs));
    const deliveryRow = (i: number, seq: number | string): WebhookDeliveriesTable => ({
      id: deliveryIds[i],
      event_seq: seq,
      event_id: id,
      event_type: event.type,
      endpoint_id: matching[i].id,
      project_id: event.projectId,
      ordering_key: orderingKey,
      status: 'pending',
      attempt_count: 0,
      next_attempt_at: nextAttemptAt,
      lease_until: null,
      lease_token: null,
      last_status_code: null,
      last_error: null,
      created_at: now,
      updated_at: now,
    });
    if (this.store.dialect === 'postgres') {
      // One statement (atomic on its own) instead of BEGIN, two INSERTs and COMMIT: an emit
      // costs two round trips instead of five. SQLite has no INSERT inside WITH, and its
      // transactions cost no round trips anyway.
      const template = deliveryRow(0, 0);
      const columns = Object.keys(template) as (keyof WebhookDeliveriesTable)[];
      await sql`with ev as (${this.store.db.insertInto('webhook_events').values(eventRow).returning('seq')})
        insert into webhook_deliveries (${sql.join(columns.map((c) => sql.ref(c)))})
        select ${sql.join(
          columns.map((c) =>
            c === 'event_seq'
              ? sql`ev.seq`
              : c === 'id' || c === 'endpoint_id'
                ? sql.ref(`v.${c}`)
                : sql`${template[c]}`,
          ),
        )}
        from ev, (values ${sql.join(
          matching.map((endpoint, i) => sql`(${deliveryIds[i]}, ${endpoint.id})`),
        )}) as v (id, endpoint_id)`.execute(this.store.db);
    } else {
      await this.store.db.transaction().execute(async (trx) => {
        const { seq } = await trx
          .insertInto('webhook_events')
          .values(eventRow)
          .returning('seq')
          .executeTakeFirstOrThrow();
        await trx
          .insertInto('webhook_deliveries')
          .values(matching.map((_, i) => deliveryRow(i, seq)))
          .execute();
      });
    }
    this.metrics.enqueued.inc({ type: event.type });
    this.onEnqueued();
    return { eventId: id, deliveryIds };
  }
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

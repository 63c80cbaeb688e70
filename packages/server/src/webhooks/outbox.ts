import type { WebhookEvent } from '@svc/protocol';
import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import type { DomainEvent } from '../events.ts';
import { newId } from '../ids.ts';
import type { Store } from '../storage/db.ts';
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

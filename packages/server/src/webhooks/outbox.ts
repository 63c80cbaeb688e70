import type { WebhookEvent } from '@svc/protocol';
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
    const deliveryIds = await this.store.db.transaction().execute(async (trx) => {
      const { seq } = await trx
        .insertInto('webhook_events')
        .values({
          id,
          project_id: event.projectId,
          type: event.type,
          ordering_key: orderingKey,
          payload: JSON.stringify(body),
          created_at: now,
        })
        .returning('seq')
        .executeTakeFirstOrThrow();
      const rows: WebhookDeliveriesTable[] = matching.map((endpoint) => ({
        id: newId('whd', nowMs),
        event_seq: seq,
        event_id: id,
        event_type: event.type,
        endpoint_id: endpoint.id,
        project_id: event.projectId,
        ordering_key: orderingKey,
        status: 'pending',
        attempt_count: 0,
        next_attempt_at: new Date(nowMs + this.firstDelayMs).toISOString(),
        lease_until: null,
        lease_token: null,
        last_status_code: null,
        last_error: null,
        created_at: now,
        updated_at: now,
      }));
      await trx.insertInto('webhook_deliveries').values(rows).execute();
      return rows.map((r) => r.id);
    });
    this.metrics.enqueued.inc({ type: event.type });
    this.onEnqueued();
    return { eventId: id, deliveryIds };
  }
}

import type {
  CreatedWebhookEndpoint,
  CreateWebhookBody,
  UpdateWebhookBody,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookEndpoint,
} from '@svc/protocol';
import type { ProjectService } from '../admin/projects.ts';
import { type Clock, iso } from '../clock.ts';
import { ApiError } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { Sealer } from '../sealing.ts';
import { isForeignKeyViolation, type Store } from '../storage/db.ts';
import type { Outbox } from './outbox.ts';
import { newWebhookSecret } from './signing.ts';
import { checkTarget, type LookupAll, parseWebhookUrl } from './ssrf.ts';
import type { WebhookDeliveriesTable, WebhookEndpointsTable } from './tables.ts';

/** At most this many endpoints per project. */
export const MAX_ENDPOINTS_PER_PROJECT = 20;

const PURPOSE = 'webhooks:endpoint-secrets';

/**
 * A stored signing secret (`secret` or `previous_secret` of endpoint `endpointId`) in clear.
 * Throws when no configured server secret opens it.
 */
export function openEndpointSecret(sealer: Sealer, endpointId: string, stored: string): string {
  if (!Sealer.isSealed(stored)) return stored;
  const opened = sealer.open(PURPOSE, stored, endpointId);
  if (!opened) {
    throw new Error(
      `the secret of webhook endpoint ${endpointId} is sealed with a secret this server does not have`,
    );
  }
  return opened.plaintext;
}

/**
 * Seals every endpoint secret stored in clear (written before sealing) or with a previous server
 * secret. A row is replaced only if unchanged since it was read, so a rotation that happens
 * meanwhile, or another node doing the same, is never overwritten.
 */
export async function sealStoredEndpointSecrets(store: Store, sealer: Sealer): Promise<number> {
  const rows = await store.db
    .selectFrom('webhook_endpoints')
    .select(['id', 'secret', 'previous_secret'])
    .execute();
  let sealed = 0;
  const needsSealing = (id: string, value: string | null) =>
    value !== null && (!Sealer.isSealed(value) || sealer.open(PURPOSE, value, id)?.stale !== false);
  for (const row of rows) {
    if (!needsSealing(row.id, row.secret) && !needsSealing(row.id, row.previous_secret)) continue;
    const reseal = (value: string | null) =>
      value === null
        ? null
        : sealer.seal(PURPOSE, openEndpointSecret(sealer, row.id, value), row.id);
    const result = await store.db
      .updateTable('webhook_endpoints')
      .set({ secret: reseal(row.secret)!, previous_secret: reseal(row.previous_secret) })
      .where('id', '=', row.id)
      .where('secret', '=', row.secret)
      .where((eb) =>
        row.previous_secret === null
          ? eb('previous_secret', 'is', null)
          : eb('previous_secret', '=', row.previous_secret),
      )
      .executeTakeFirst();
    if (result.numUpdatedRows > 0n) sealed++;
  }
  return sealed;
}

function toEndpoint(row: WebhookEndpointsTable, nowMs: number): WebhookEndpoint {
  const overlapping =
    row.previous_secret_expires_at !== null && row.previous_secret_expires_at > iso(nowMs);
  return {
    id: row.id,
    projectId: row.project_id,
    url: row.url,
    description: row.description,
    events: JSON.parse(row.events) as string[],
    enabled: row.enabled === 1,
    disabledReason: (row.disabled_reason as WebhookEndpoint['disabledReason']) ?? null,
    failingSince: row.failing_since,
    previousSecretExpiresAt: overlapping ? row.previous_secret_expires_at : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface EndpointDeps {
  store: Store;
  clock: Clock;
  projects: ProjectService;
  outbox: Outbox;
  /** Seals the signing secrets at rest. */
  sealer: Sealer;
  allowPrivate: boolean;
  /** DNS resolution for the creation-time check (tests may substitute it). */
  lookup?: LookupAll;
}

/** Webhook endpoints of a project, their secrets, test events, and their deliveries. */
export class WebhookEndpoints {
  constructor(private deps: EndpointDeps) {}

  /** Refuses URLs that are not http(s), carry credentials, or resolve to a forbidden address. */
  private async checkUrl(raw: string): Promise<string> {
    const url = parseWebhookUrl(raw);
    if (!url) throw new ApiError('invalid_webhook_url');
    const check = await checkTarget(url, this.deps.allowPrivate, this.deps.lookup);
    if (!check.ok) {
      const hint =
        check.code === 'webhook_url_forbidden' && !this.deps.allowPrivate
          ? ' (an operator can allow loopback and private addresses with SVC_WEBHOOK_ALLOW_PRIVATE=true; link-local and metadata addresses are never allowed)'
          : '';
      throw new ApiError(check.code, `${check.detail}${hint}`);
    }
    return url.toString();
  }

  private async row(projectId: string, id: string) {
    const row = await this.deps.store.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw new ApiError('webhook_endpoint_not_found');
    return row;
  }

  async create(projectId: string, body: CreateWebhookBody): Promise<CreatedWebhookEndpoint> {
    await this.deps.projects.get(projectId);
    const url = await this.checkUrl(body.url);
    const { count } = await this.deps.store.db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    if (Number(count) >= MAX_ENDPOINTS_PER_PROJECT) {
      throw new ApiError(
        'webhook_endpoint_limit',
        `A project has at most ${MAX_ENDPOINTS_PER_PROJECT} webhook endpoints.`,
      );
    }
    const nowMs = this.deps.clock.now();
    const enabled = body.enabled ?? true;
    const id = newId('whe', nowMs);
    const secret = newWebhookSecret();
    const row: WebhookEndpointsTable = {
      id,
      project_id: projectId,
      url,
      description: body.description ?? null,
      events: JSON.stringify(body.events ?? []),
      enabled: enabled ? 1 : 0,
      disabled_reason: enabled ? null : 'manual',
      failing_since: null,
      secret: this.deps.sealer.seal(PURPOSE, secret, id),
      previous_secret: null,
      previous_secret_expires_at: null,
      created_at: iso(nowMs),
      updated_at: iso(nowMs),
    };
    try {
      await this.deps.store.db.insertInto('webhook_endpoints').values(row).execute();
    } catch (err) {
      // The project was deleted since it was read.
      if (isForeignKeyViolation(err)) throw new ApiError('project_not_found');
      throw err;
    }
    return { ...toEndpoint(row, nowMs), secret };
  }

  async list(projectId: string): Promise<WebhookEndpoint[]> {
    await this.deps.projects.get(projectId);
    const rows = await this.deps.store.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    const nowMs = this.deps.clock.now();
    return rows.map((r) => toEndpoint(r, nowMs));
  }

  async get(projectId: string, id: string): Promise<WebhookEndpoint> {
    return toEndpoint(await this.row(projectId, id), this.deps.clock.now());
  }

  async update(projectId: string, id: string, body: UpdateWebhookBody): Promise<WebhookEndpoint> {
    await this.row(projectId, id);
    const patch: Partial<WebhookEndpointsTable> = {
      updated_at: iso(this.deps.clock.now()),
    };
    if (body.url !== undefined) patch.url = await this.checkUrl(body.url);
    if (body.events !== undefined) patch.events = JSON.stringify(body.events);
    if (body.description !== undefined) patch.description = body.description;
    if (body.enabled !== undefined) {
      patch.enabled = body.enabled ? 1 : 0;
      patch.disabled_reason = body.enabled ? null : 'manual';
      // Re-enabled: a new start; an endpoint still failing is disabled again only after the
      // whole SVC_WEBHOOK_DISABLE_AFTER.
      if (body.enabled) patch.failing_since = null;
    }
    await this.deps.store.db
      .updateTable('webhook_endpoints')
      .set(patch)
      .where('id', '=', id)
      .execute();
    return this.get(projectId, id);
  }

  /**
   * Deletes the endpoint with its pending and past deliveries and its keys' leases. Rows are
   * taken in the order a chain's outcome write takes them (lease, delivery, endpoint), so the
   * two wait for each other instead of deadlocking.
   */
  async delete(projectId: string, id: string): Promise<void> {
    await this.row(projectId, id);
    await this.deps.store.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('webhook_key_leases').where('endpoint_id', '=', id).execute();
      await trx.deleteFrom('webhook_deliveries').where('endpoint_id', '=', id).execute();
      await trx.deleteFrom('webhook_endpoints').where('id', '=', id).execute();
    });
  }

  /**
   * A new secret; the previous one keeps signing (as a second signature) for `overlapSeconds`,
   * so receivers can switch without missing a message.
   */
  async rotateSecret(projectId: string, id: string, overlapSeconds: number) {
    const row = await this.row(projectId, id);
    const nowMs = this.deps.clock.now();
    const secret = newWebhookSecret();
    const expires = overlapSeconds > 0 ? iso(nowMs + overlapSeconds * 1000) : null;
    await this.deps.store.db
      .updateTable('webhook_endpoints')
      .set({
        secret: this.deps.sealer.seal(PURPOSE, secret, id),
        previous_secret: expires ? row.secret : null,
        previous_secret_expires_at: expires,
        updated_at: iso(nowMs),
      })
      .where('id', '=', id)
      .execute();
    return { id, secret, previousSecretExpiresAt: expires };
  }

  /** Queues a `webhook.test` event for this endpoint only. */
  async sendTest(projectId: string, id: string) {
    const project = await this.deps.projects.get(projectId);
    const row = await this.row(projectId, id);
    if (!project.webhooksEnabled) throw webhooksDisabled(projectId);
    if (row.enabled !== 1) throw new ApiError('webhook_endpoint_disabled');
    const nowMs = this.deps.clock.now();
    const enqueued = await this.deps.outbox.write(
      {
        projectId,
        type: 'webhook.test',
        data: { endpointId: id, message: 'A test event sent on demand.' },
        occurredAtMs: nowMs,
      },
      { endpointId: id },
    );
    // Both switches were just checked; a concurrent switch-off can still win the race.
    if (!enqueued) throw new ApiError('webhook_endpoint_disabled');
    return { eventId: enqueued.eventId, deliveryId: enqueued.deliveryIds[0] };
  }

  async listDeliveries(
    projectId: string,
    id: string,
    query: { status?: WebhookDeliveryStatus; page?: number; limit?: number },
  ) {
    await this.row(projectId, id);
    const page = query.page ?? 1;
    const limit = query.limit ?? 20;
    const base = this.deps.store.db
      .selectFrom('webhook_deliveries')
      .where('endpoint_id', '=', id)
      .$if(query.status !== undefined, (q) => q.where('status', '=', query.status!));
    const { total } = await base
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .executeTakeFirstOrThrow();
    const rows = await base
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .offset((page - 1) * limit)
      .execute();
    const items = await this.withAttempts(rows);
    return { items, meta: { total: Number(total), page, limit } };
  }

  private async withAttempts(rows: WebhookDeliveriesTable[]): Promise<WebhookDelivery[]> {
    const attempts = rows.length
      ? await this.deps.store.db
          .selectFrom('webhook_attempts')
          .selectAll()
          .where(
            'delivery_id',
            'in',
            rows.map((r) => r.id),
          )
          .orderBy('attempt')
          .execute()
      : [];
    const byDelivery = new Map<string, WebhookAttempt[]>();
    for (const a of attempts) {
      const list = byDelivery.get(a.delivery_id) ?? [];
      list.push({
        attempt: a.attempt,
        attemptedAt: a.attempted_at,
        statusCode: a.status_code,
        latencyMs: a.latency_ms,
        error: a.error,
        responseBody: a.response_body,
        nextAttemptAt: a.next_attempt_at,
      });
      byDelivery.set(a.delivery_id, list);
    }
    // A success is kept on its delivery row (attempt rows are written for failed attempts): it
    // is the delivery's last attempt, listed after the failed ones.
    for (const r of rows) {
      const won = successAttempt(r);
      if (!won) continue;
      const list = byDelivery.get(r.id) ?? [];
      list.push(won);
      byDelivery.set(r.id, list);
    }
    return rows.map((r) => ({
      id: r.id,
      endpointId: r.endpoint_id,
      eventId: r.event_id,
      eventType: r.event_type,
      orderingKey: r.ordering_key,
      status: r.status,
      attemptCount: r.attempt_count,
      nextAttemptAt: r.status === 'pending' ? r.next_attempt_at : null,
      lastStatusCode: r.last_status_code,
      lastError: r.last_error,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      attempts: byDelivery.get(r.id) ?? [],
    }));
  }

  /**
   * Makes the delivery due now. A finished one (succeeded, failed, skipped) gets one more
   * attempt, then continues on the retry schedule only if attempts remain. It keeps its place
   * in its ordering key: later pending events of the key wait for it.
   */
  async retryDelivery(projectId: string, id: string, deliveryId: string) {
    const endpoint = await this.row(projectId, id);
    if (endpoint.enabled !== 1) throw new ApiError('webhook_endpoint_disabled');
    const project = await this.deps.projects.get(projectId);
    if (!project.webhooksEnabled) throw webhooksDisabled(projectId);
    const nowMs = this.deps.clock.now();
    await this.deps.store.db.transaction().execute(async (trx) => {
      const current = await trx
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('id', '=', deliveryId)
        .where('endpoint_id', '=', id)
        // Locked (PostgreSQL) so that a delete (the endpoint's, retention's) waits for it,
        // rather than removing the row this transaction writes an attempt for.
        .$if(this.deps.store.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirst();
      if (!current) throw new ApiError('webhook_delivery_not_found');
      // A success kept on the row becomes an attempt row, so the row is free for the next one.
      const won = successAttempt(current);
      if (won)
        await trx
          .insertInto('webhook_attempts')
          .values({
            id: newId('wha', nowMs),
            delivery_id: deliveryId,
            attempt: won.attempt,
            attempted_at: won.attemptedAt,
            status_code: won.statusCode,
            latency_ms: won.latencyMs,
            error: null,
            response_body: won.responseBody,
            next_attempt_at: null,
            node_id: current.success_node_id ?? '',
          })
          .execute();
      await trx
        .updateTable('webhook_deliveries')
        .set({
          status: 'pending',
          next_attempt_at: iso(nowMs),
          success_attempted_at: null,
          success_latency_ms: null,
          success_response_body: null,
          success_node_id: null,
          updated_at: iso(nowMs),
        })
        .where('id', '=', deliveryId)
        .execute();
    });
    this.deps.outbox.wakeWorker();
    const row = await this.deps.store.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', deliveryId)
      .executeTakeFirst();
    // Deleted right after (with its endpoint).
    if (!row) throw new ApiError('webhook_delivery_not_found');
    return (await this.withAttempts([row]))[0];
  }
}

function webhooksDisabled(projectId: string) {
  return new ApiError(
    'webhooks_disabled',
    `Webhooks are switched off for this project: turn them on with PATCH /v1/admin/projects/${projectId} {"webhooksEnabled": true} (CLI: svc projects update --project ${projectId} --webhooks).`,
  );
}

/** The successful attempt kept on a delivery row, as the API lists attempts; null if none. */
function successAttempt(r: WebhookDeliveriesTable): WebhookAttempt | null {
  if (r.success_attempted_at === null) return null;
  return {
    attempt: r.attempt_count,
    attemptedAt: r.success_attempted_at,
    statusCode: r.last_status_code,
    latencyMs: r.success_latency_ms ?? 0,
    error: null,
    responseBody: r.success_response_body,
    nextAttemptAt: null,
  };
}

import type { FastifyPluginAsync } from 'fastify';
import type { PlatformConfig } from '../config.ts';
import type { Platform } from '../platform.ts';
import type { WebhooksConfig } from './config.ts';
import { sealStoredEndpointSecrets, WebhookEndpoints } from './endpoints.ts';
import { WebhookMetrics } from './metrics.ts';
import { Outbox, OutboxHold } from './outbox.ts';
import { webhookAdminRoutes } from './routes.ts';
import { DeliveryWorker, PENDING } from './worker.ts';

/** What the Webhooks product is given. */
export interface WebhooksDeps
  extends Pick<
    Platform,
    'store' | 'clock' | 'sealer' | 'metrics' | 'projects' | 'events' | 'adminGuard'
  > {
  config: PlatformConfig & { webhooks: WebhooksConfig };
  /** Set by the plugin, for the composition root (tests reach the worker through it). */
  webhooks?: WebhooksArea;
}

/** The webhooks area's parts, as the plugin hands them back. */
export interface WebhooksArea {
  outbox: Outbox;
  endpoints: WebhookEndpoints;
  worker: DeliveryWorker | null;
}

/**
 * The Webhooks area: endpoint admin routes, the outbox (a domain-event sink, so every emitted
 * event is persisted before `emit` resolves) and, unless SVC_WEBHOOK_WORKER=false, this node's
 * delivery worker (started when the app is ready, stopped when it closes).
 */
export const webhooksPlugin: FastifyPluginAsync<{ svc: WebhooksDeps }> = async (app, { svc }) => {
  const { store, clock, sealer } = svc;
  const config = svc.config.webhooks;
  await sealStoredEndpointSecrets(store, sealer);
  const metrics = new WebhookMetrics(
    svc.metrics.registry,
    async () => {
      const rows = await store.db
        .selectFrom('webhook_deliveries')
        .select([
          'project_id',
          (eb) => eb.fn.countAll<number>().as('n'),
          (eb) => eb.fn.min('created_at').as('oldest'),
        ])
        .where('status', '=', PENDING)
        .groupBy('project_id')
        .execute();
      return rows.map((r) => ({
        projectId: r.project_id,
        pending: Number(r.n),
        oldest: String(r.oldest),
      }));
    },
    () => clock.now(),
  );
  const worker = config.worker
    ? new DeliveryWorker({
        store,
        clock,
        metrics,
        log: app.log.child({ area: 'webhooks' }),
        retryScheduleMs: config.retryScheduleMs,
        timeoutMs: config.timeoutMs,
        concurrency: config.concurrency,
        endpointConcurrency: config.endpointConcurrency,
        disableAfterMs: config.disableAfterMs,
        retentionMs: config.retentionMs,
        pollMs: config.pollMs,
        leaseMs: config.leaseMs,
        allowPrivate: config.allowPrivate,
        sealer,
      })
    : null;
  const outbox = new Outbox(store, clock, metrics, config.retryScheduleMs[0], () => worker?.wake());
  const endpoints = new WebhookEndpoints({
    store,
    clock,
    projects: svc.projects,
    outbox,
    sealer,
    allowPrivate: config.allowPrivate,
  });
  svc.webhooks = { outbox, endpoints, worker };
  const hold = new OutboxHold(outbox, app.log.child({ area: 'webhooks' }));
  const removeSink = svc.events.addSink((event) => hold.write(event));

  await app.register(webhookAdminRoutes, {
    prefix: '/v1/admin',
    endpoints,
    adminGuard: svc.adminGuard,
  });

  if (worker) app.addHook('onReady', () => worker.start());
  app.addHook('onClose', async () => {
    removeSink();
    await hold.close();
    await worker?.stop();
  });
};

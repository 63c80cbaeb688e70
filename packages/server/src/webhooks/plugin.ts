import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../app.ts';
import { sealStoredEndpointSecrets, WebhookEndpoints } from './endpoints.ts';
import { WebhookMetrics } from './metrics.ts';
import { Outbox, OutboxHold } from './outbox.ts';
import { webhookAdminRoutes } from './routes.ts';
import { DeliveryWorker, PENDING } from './worker.ts';

declare module '../app.ts' {
  interface Services {
    /** Webhooks: the outbox and the endpoints service (set by the webhooks plugin). */
    webhooks?: { outbox: Outbox; endpoints: WebhookEndpoints; worker: DeliveryWorker | null };
  }
}

/**
 * The Webhooks area: endpoint admin routes, the outbox (a domain-event sink, so every emitted
 * event is persisted before `emit` resolves) and, unless SVC_WEBHOOK_WORKER=false, this node's
 * delivery worker (started when the app is ready, stopped when it closes).
 */
export const webhooksPlugin: FastifyPluginAsync<{ svc: Services }> = async (app, { svc }) => {
  const { config, store, clock, sealer } = svc;
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
  const worker = config.webhookWorker
    ? new DeliveryWorker({
        store,
        clock,
        metrics,
        log: app.log.child({ area: 'webhooks' }),
        retryScheduleMs: config.webhookRetryScheduleMs,
        timeoutMs: config.webhookTimeoutMs,
        concurrency: config.webhookConcurrency,
        endpointConcurrency: config.webhookEndpointConcurrency,
        disableAfterMs: config.webhookDisableAfterMs,
        retentionMs: config.webhookRetentionMs,
        pollMs: config.webhookPollMs,
        leaseMs: config.webhookLeaseMs,
        allowPrivate: config.webhookAllowPrivate,
        sealer,
      })
    : null;
  const outbox = new Outbox(store, clock, metrics, config.webhookRetryScheduleMs[0], () =>
    worker?.wake(),
  );
  const endpoints = new WebhookEndpoints({
    store,
    clock,
    projects: svc.projects,
    outbox,
    sealer,
    allowPrivate: config.webhookAllowPrivate,
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

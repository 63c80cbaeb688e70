import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Webhook metrics, registered on the app's registry (served at /metrics). */
export class WebhookMetrics {
  readonly enqueued: Counter<'type'>;
  readonly attempts: Counter<'result'>;
  readonly finished: Counter<'status'>;
  readonly attemptDuration: Histogram;
  readonly queueDepth: Gauge;

  constructor(registry: Registry, pendingCount: () => Promise<number>) {
    const registers = [registry];
    this.enqueued = new Counter({
      name: 'svc_webhook_events_enqueued_total',
      help: 'Events written to the webhook outbox (with at least one matching endpoint), by type',
      labelNames: ['type'],
      registers,
    });
    this.attempts = new Counter({
      name: 'svc_webhook_attempts_total',
      help: 'Webhook delivery attempts by result (success, failure, gone, refused)',
      labelNames: ['result'],
      registers,
    });
    this.finished = new Counter({
      name: 'svc_webhook_deliveries_total',
      help: 'Webhook deliveries that reached a final status (succeeded, failed, skipped)',
      labelNames: ['status'],
      registers,
    });
    this.attemptDuration = new Histogram({
      name: 'svc_webhook_attempt_duration_seconds',
      help: 'Time from sending a webhook to its answer (or error)',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
      registers,
    });
    this.queueDepth = new Gauge({
      name: 'svc_webhook_queue_depth',
      help: 'Pending webhook deliveries (all nodes: read from the store at scrape time)',
      registers,
      async collect() {
        this.set(await pendingCount());
      },
    });
  }
}

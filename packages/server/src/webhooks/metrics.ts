import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Pending deliveries of one project, as read from the store. */
export interface ProjectBacklog {
  projectId: string;
  pending: number;
  /** `created_at` of its oldest pending delivery. */
  oldest: string;
}

/** How long one read of the backlog serves scrapes (the gauges share it). */
const BACKLOG_TTL_MS = 1000;

/** Webhook metrics, registered on the app's registry (served at /metrics). */
export class WebhookMetrics {
  readonly enqueued: Counter<'type'>;
  readonly attempts: Counter<'result'>;
  readonly finished: Counter<'status'>;
  readonly attemptDuration: Histogram;
  readonly deliveryLatency: Histogram;
  readonly endpointsDisabled: Counter<'reason'>;
  readonly pruned: Counter;
  readonly queueDepth: Gauge;
  readonly backlog: Gauge<'project'>;
  readonly oldestPendingAge: Gauge<'project'>;
  private read: { at: number; rows: Promise<ProjectBacklog[]> } | null = null;

  constructor(
    registry: Registry,
    backlog: () => Promise<ProjectBacklog[]>,
    now: () => number = Date.now,
  ) {
    const registers = [registry];
    // One store query per scrape for the three backlog gauges.
    const rows = () => {
      if (!this.read || now() - this.read.at > BACKLOG_TTL_MS) {
        this.read = { at: now(), rows: backlog() };
        this.read.rows.catch(() => {
          this.read = null;
        });
      }
      return this.read.rows;
    };
    this.enqueued = new Counter({
      name: 'svc_webhook_events_enqueued_total',
      help: 'Events written to the webhook outbox (with at least one matching endpoint), by type',
      labelNames: ['type'],
      registers,
    });
    this.attempts = new Counter({
      name: 'svc_webhook_attempts_total',
      help: 'Webhook delivery attempts by result (success, failure, error, gone, refused)',
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
    this.deliveryLatency = new Histogram({
      name: 'svc_webhook_delivery_latency_seconds',
      help: 'Time from an event entering the outbox to its successful delivery (retries included)',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400],
      registers,
    });
    this.endpointsDisabled = new Counter({
      name: 'svc_webhook_endpoints_disabled_total',
      help: 'Webhook endpoints disabled by this node, by reason (gone: answered 410; failing: failed for too long)',
      labelNames: ['reason'],
      registers,
    });
    this.pruned = new Counter({
      name: 'svc_webhook_events_pruned_total',
      help: 'Finished webhook events deleted by retention (with their deliveries and attempts)',
      registers,
    });
    this.queueDepth = new Gauge({
      name: 'svc_webhook_queue_depth',
      help: 'Pending webhook deliveries (all nodes: read from the store at scrape time)',
      registers,
      async collect() {
        this.set((await rows()).reduce((sum, r) => sum + r.pending, 0));
      },
    });
    this.backlog = new Gauge({
      name: 'svc_webhook_backlog',
      help: 'Pending webhook deliveries per project (all nodes: read from the store at scrape time)',
      labelNames: ['project'],
      registers,
      async collect() {
        this.reset();
        for (const r of await rows()) this.set({ project: r.projectId }, r.pending);
      },
    });
    this.oldestPendingAge = new Gauge({
      name: 'svc_webhook_oldest_pending_age_seconds',
      help: "Age of each project's oldest pending webhook delivery (absent when none is pending)",
      labelNames: ['project'],
      registers,
      async collect() {
        this.reset();
        const t = now();
        for (const r of await rows()) {
          this.set({ project: r.projectId }, Math.max(0, (t - Date.parse(r.oldest)) / 1000));
        }
      },
    });
  }
}

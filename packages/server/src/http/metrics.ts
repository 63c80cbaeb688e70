import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/** The server's Prometheus metrics, one registry per app instance. */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request duration by route',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly authRefusals = new Counter({
    name: 'svc_auth_refusals_total',
    help: 'Requests refused by the key gate, by error code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly rateLimitRefusals = new Counter({
    name: 'svc_rate_limit_refusals_total',
    help: 'Requests refused by a per-key rate limit, by key type',
    labelNames: ['key_type'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }
}

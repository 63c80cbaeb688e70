import { Counter, collectDefaultMetrics, type MetricValueWithName, Registry } from 'prom-client';

const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** One route × method × status: its request count, and its durations as histogram buckets. */
export class RequestSeries {
  count = 0;
  sum = 0;
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  buckets: number[] = new Array(DURATION_BUCKETS.length + 1).fill(0);

  constructor(
    readonly route: string,
    readonly method: string,
    readonly status: string,
  ) {}

  observe(seconds: number) {
    this.count++;
    this.sum += seconds;
    let i = 0;
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]) i++;
    this.buckets[i]++;
  }
}

/**
 * Per-request HTTP metrics, counted in plain objects on the request path and turned into
 * Prometheus series only when scraped. prom-client's own Counter and Histogram hash their label
 * objects on every observation, which costs more than a short-link redirect's own work; here a
 * request costs three map lookups on strings and numbers it already has (no key is built).
 */
class RequestMetrics {
  /** route → method → status → series. */
  private byRoute = new Map<string, Map<string, Map<number, RequestSeries>>>();
  private all: RequestSeries[] = [];

  series(route: string, method: string, statusCode: number): RequestSeries {
    let byMethod = this.byRoute.get(route);
    if (byMethod === undefined) {
      byMethod = new Map();
      this.byRoute.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let s = byStatus.get(statusCode);
    if (s === undefined) {
      s = new RequestSeries(route, method, String(statusCode));
      byStatus.set(statusCode, s);
      this.all.push(s);
    }
    return s;
  }

  private clear() {
    this.byRoute.clear();
    this.all = [];
  }

  /** `svc_http_requests_total`, as prom-client's registry reads a metric. */
  readonly requests = {
    name: 'svc_http_requests_total',
    help: 'HTTP requests by route, method and status',
    type: 'counter',
    aggregator: 'sum',
    get: async () => ({
      name: this.requests.name,
      help: this.requests.help,
      type: 'counter',
      aggregator: 'sum',
      values: this.all.map((s) => ({
        labels: { route: s.route, method: s.method, status: s.status },
        value: s.count,
      })),
    }),
    reset: () => this.clear(),
  };

  /** `svc_http_request_duration_seconds` by route, as prom-client's registry reads a metric. */
  readonly duration = {
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request duration by route',
    type: 'histogram',
    aggregator: 'sum',
    get: async () => {
      const byRoute = new Map<string, { buckets: number[]; sum: number; count: number }>();
      for (const s of this.all) {
        let r = byRoute.get(s.route);
        if (!r) {
          r = { buckets: new Array(s.buckets.length).fill(0), sum: 0, count: 0 };
          byRoute.set(s.route, r);
        }
        for (let i = 0; i < s.buckets.length; i++) r.buckets[i] += s.buckets[i];
        r.sum += s.sum;
        r.count += s.count;
      }
      const name = this.duration.name;
      const values: MetricValueWithName<string>[] = [];
      for (const [route, r] of byRoute) {
        let cumulative = 0;
        for (let i = 0; i < r.buckets.length; i++) {
          cumulative += r.buckets[i];
          const le = i < DURATION_BUCKETS.length ? DURATION_BUCKETS[i] : '+Inf';
          values.push({ metricName: `${name}_bucket`, labels: { le, route }, value: cumulative });
        }
        values.push({ metricName: `${name}_sum`, labels: { route }, value: r.sum });
        values.push({ metricName: `${name}_count`, labels: { route }, value: r.count });
      }
      return { name, help: this.duration.help, type: 'histogram', aggregator: 'sum', values };
    },
    reset: () => this.clear(),
  };
}

/** The server's Prometheus metrics, one registry per app instance. */
export class Metrics {
  readonly registry = new Registry();
  private http = new RequestMetrics();
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
    this.registry.registerMetric(this.http.requests as never);
    this.registry.registerMetric(this.http.duration as never);
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** Counts one answered request (the onResponse hook calls it for every request). */
  request(route: string, method: string, statusCode: number, seconds: number) {
    this.http.series(route, method, statusCode).observe(seconds);
  }
}

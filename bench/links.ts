import autocannon from 'autocannon';
import { fmt, startChild } from './lib.ts';

interface ServerInfo {
  port: number;
  path: string;
}

const UA = {
  desktop:
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  android:
    'Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36',
};

interface Measured {
  requestsPerSecond: number;
  /** Server CPU time per request, microseconds. */
  cpuMicrosPerRequest: number;
  p99Ms: number;
  redirects: number;
  total: number;
}

/** autocannon for `seconds`, counting 302 answers (the ones we want). */
async function measure(url: string, userAgent: string, seconds: number): Promise<Measured> {
  const options = { url, connections: 50, headers: { 'user-agent': userAgent } };
  const cpuUrl = new URL('/__bench/cpu', url).toString();
  const cpu = async () => ((await (await fetch(cpuUrl)).json()) as { micros: number }).micros;
  const before = await cpu();
  const r = await autocannon({ ...options, duration: seconds });
  const used = (await cpu()) - before;
  const stats = (r as unknown as { statusCodeStats?: Record<string, { count: number }> })
    .statusCodeStats;
  return {
    requestsPerSecond: r.requests.average,
    cpuMicrosPerRequest: used / Math.max(1, r.requests.total),
    p99Ms: r.latency.p99,
    redirects: stats?.['302']?.count ?? 0,
    total: r.requests.total,
  };
}

async function oneRedirect(url: string, userAgent: string) {
  const res = await fetch(url, { headers: { 'user-agent': userAgent }, redirect: 'manual' });
  if (res.status !== 302) throw new Error(`${url} answered ${res.status}, not 302`);
  return res.headers.get('location')!;
}

/**
 * Redirect throughput: `GET /l/{slug}` on the full Svc server (link lookup, platform detection,
 * click recording with a keyed fingerprint, store URL with the click id) against a bare Fastify
 * route answering 302 to a fixed URL. Both servers run at once, each in its own child process,
 * and are measured in alternating rounds so that background load hits both alike; the ratio is
 * the median of the rounds' ratios. Target ≥ 0.8.
 */
export async function run(): Promise<string> {
  const target = 0.8;
  const rounds = 3;
  const seconds = 3;
  const rows: string[] = [];
  const backends: [string, Record<string, string>][] = [
    ['SQLite + in-process', { DATABASE_URL: '', REDIS_URL: '' }],
  ];
  if (process.env.DATABASE_URL && process.env.REDIS_URL) {
    backends.push([
      'PostgreSQL + Redis',
      { DATABASE_URL: process.env.DATABASE_URL, REDIS_URL: process.env.REDIS_URL },
    ]);
  }
  for (const [backend, env] of backends) {
    const [bare, svc] = await Promise.all([
      startChild<ServerInfo>('bench/links-server.ts', { LINKS_BENCH_MODE: 'bare' }),
      startChild<ServerInfo>('bench/links-server.ts', {
        LINKS_BENCH_MODE: 'svc',
        SVC_SECRET: 'bench-secret',
        SVC_ADMIN_TOKEN: 'bench-admin',
        ...env,
      }),
    ]);
    try {
      const bareUrl = `http://127.0.0.1:${bare.info.port}${bare.info.path}`;
      const svcUrl = `http://127.0.0.1:${svc.info.port}${svc.info.path}`;
      for (const [name, ua] of Object.entries(UA)) {
        await oneRedirect(bareUrl, ua);
        const location = await oneRedirect(svcUrl, ua);
        await measure(bareUrl, ua, 1);
        await measure(svcUrl, ua, 1);
        const b: Measured[] = [];
        const m: Measured[] = [];
        for (let i = 0; i < rounds; i++) {
          b.push(await measure(bareUrl, ua, seconds));
          m.push(await measure(svcUrl, ua, seconds));
        }
        for (const r of m) {
          if (r.redirects < r.total * 0.99) {
            throw new Error(
              `${backend} ${name}: only ${r.redirects} of ${r.total} answers were 302`,
            );
          }
        }
        const ratio = median(m.map((r, i) => r.requestsPerSecond / b[i].requestsPerSecond));
        const cpuRatio = median(m.map((r, i) => b[i].cpuMicrosPerRequest / r.cpuMicrosPerRequest));
        const bareCpu = median(b.map((r) => r.cpuMicrosPerRequest));
        const svcCpu = median(m.map((r) => r.cpuMicrosPerRequest));
        const bareRps = median(b.map((r) => r.requestsPerSecond));
        const svcRps = median(m.map((r) => r.requestsPerSecond));
        rows.push(
          `| ${backend} | ${name} → ${new URL(location).host} | ${fmt(bareRps)} | ${fmt(median(b.map((r) => r.p99Ms)))} | ${fmt(svcRps)} | ${fmt(median(m.map((r) => r.p99Ms)))} | **${fmt(ratio, 2)}** | ${fmt(bareCpu)} / ${fmt(svcCpu)} = ${fmt(cpuRatio, 2)} | ≥ ${target} ${ratio >= target ? '✅' : '❌'} |`,
        );
      }
    } finally {
      await Promise.all([bare.stop(), svc.stop()]);
    }
  }
  return [
    '### Links: short-link redirect vs a bare Fastify redirect',
    '',
    `50 connections, ${rounds} alternating rounds of ${seconds} s per server after a 1 s warm-up (medians), autocannon in the bench process, each server in its own child process. Every Svc redirect records a click (batched writes). The CPU column (server CPU time per request, from process.cpuUsage) is steadier than req/s on a shared machine.`,
    '',
    '| store | request | bare req/s | bare p99 ms | Svc req/s | Svc p99 ms | ratio | server CPU µs/req bare / Svc = ratio | target (req/s ratio) |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

function median(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

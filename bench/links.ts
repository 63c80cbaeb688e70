import {
  cpuRatio,
  fmt,
  fmtRatio,
  type Measured,
  measure,
  median,
  rpsRatio,
  spinning,
  startChild,
} from './lib.ts';
import { measureVisitors } from './visitors.ts';

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

async function oneRedirect(url: string, userAgent: string) {
  const res = await fetch(url, { headers: { 'user-agent': userAgent }, redirect: 'manual' });
  if (res.status !== 302) throw new Error(`${url} answered ${res.status}, not 302`);
  return res.headers.get('location')!;
}

/**
 * Redirect throughput: `GET /l/{slug}` on the full Svc server (link lookup, platform detection,
 * click recording with a keyed fingerprint, store URL with the click id) against a bare Fastify
 * route answering 302 to a fixed URL, in its own process (the issue's baseline). A third column
 * runs that same bare handler inside the Svc app, which separates the platform's per-request
 * cost (request ids, key-gate hook, metrics, per-request logger) from the redirect's own. All
 * servers run at once in child processes and are measured in alternating rounds so that
 * background load hits each alike; ratios are medians of the rounds' ratios. Target ≥ 0.6.
 *
 * `LINKS_BENCH_ROWS=sqlite,many,android` runs only the rows whose store, traffic or request
 * names contain every one of those words (case-insensitive); the report is then partial.
 */
export async function run(): Promise<string> {
  const target = 0.6;
  const processes = 4;
  const rounds = 8;
  const seconds = 3;
  /** Warm-up per server before the first pass of fresh processes, then 1 s per pass. */
  const warmFresh = 5;
  const rows: string[] = [];
  /**
   * Whether the client is kept awake (`spinning`, bench/lib.ts) while it drives a server of the
   * backend. A sleeping client must be woken by the server's writes, which on this VM costs the
   * server an interrupt to the other CPU, and the slower server pays it most. A client kept
   * awake holds one core instead, which suits a server alone, but takes from PostgreSQL and
   * Redis the CPU they would have on their own machines (the gate bench's Redis row fell from
   * 0.82 to 0.63-0.70 with it): with them, the client sleeps.
   */
  const backends: [string, Record<string, string>, boolean][] = [
    ['SQLite + in-process', { DATABASE_URL: '', REDIS_URL: '' }, true],
  ];
  if (process.env.DATABASE_URL && process.env.REDIS_URL) {
    backends.push([
      'PostgreSQL + Redis',
      { DATABASE_URL: process.env.DATABASE_URL, REDIS_URL: process.env.REDIS_URL },
      false,
    ]);
  }
  /**
   * One visitor: every request the same bytes (autocannon), so a batch holds one IP and agent,
   * one fingerprint to hash and one candidate key. Many visitors: every request from another
   * address (`X-Forwarded-For` through a trusted proxy, bench/visitors.ts), each click its own
   * fingerprint and key: what a link shared widely sees.
   */
  const traffics = [
    {
      name: 'one visitor',
      env: {},
      load: (url: string, ua: string, s: number) => measure(url, { 'user-agent': ua }, s),
    },
    {
      name: 'many visitors',
      env: { SVC_TRUST_PROXY: '127.0.0.1' },
      load: (url: string, ua: string, s: number) => measureVisitors(url, ua, s),
    },
  ];
  const words = (process.env.LINKS_BENCH_ROWS ?? '').toLowerCase().split(',').filter(Boolean);
  const wanted = (...names: string[]) =>
    words.every((w) => names.some((n) => n.toLowerCase().includes(w)));
  for (const [backend, env, awake] of backends) {
    for (const traffic of traffics) {
      const requests = Object.entries(UA).filter(([ua]) => wanted(backend, traffic.name, ua));
      if (requests.length === 0) continue;
      const load = (url: string, ua: string, s: number) =>
        awake ? spinning(traffic.load(url, ua, s)) : traffic.load(url, ua, s);
      // Several processes of each kind, taking turns by round: a process can be slower than its
      // twin for its whole life, every function alike (the in-app bare route included), by up
      // to 30%, so one process's luck must not decide a row.
      const pairs = await Promise.all(
        Array.from({ length: processes }, async () => {
          const [bare, svc] = await Promise.all([
            startChild<ServerInfo>('bench/links-server.ts', { LINKS_BENCH_MODE: 'bare' }),
            startChild<ServerInfo>('bench/links-server.ts', {
              LINKS_BENCH_MODE: 'svc',
              // Eight servers starting at once on two cores can stall a healthy Redis call
              // past the 1 s default, which would fail the start.
              SVC_STATE_TIMEOUT_MS: '5000',
              ...env,
              ...traffic.env,
            }),
          ]);
          return {
            bare,
            svc,
            bareUrl: `http://127.0.0.1:${bare.info.port}${bare.info.path}`,
            inAppUrl: `http://127.0.0.1:${svc.info.port}/__bench/bare/x`,
            svcUrl: `http://127.0.0.1:${svc.info.port}${svc.info.path}`,
          };
        }),
      );
      try {
        for (const [pass, [name, ua]] of requests.entries()) {
          let location = '';
          // Fresh processes warm up for longer: a fresh PostgreSQL + Redis process stays
          // measurably slower through its first seconds of load. A server runs for days; the
          // bench measures it warm.
          const warmSeconds = pass === 0 ? warmFresh : 1;
          for (const p of pairs) {
            await oneRedirect(p.bareUrl, ua);
            await oneRedirect(p.inAppUrl, ua);
            location = await oneRedirect(p.svcUrl, ua);
            for (const url of [p.bareUrl, p.inAppUrl, p.svcUrl]) await load(url, ua, warmSeconds);
          }
          const b: Measured[] = [];
          const a: Measured[] = [];
          const m: Measured[] = [];
          for (let i = 0; i < rounds; i++) {
            const p = pairs[i % pairs.length];
            b.push(await load(p.bareUrl, ua, seconds));
            a.push(await load(p.inAppUrl, ua, seconds));
            m.push(await load(p.svcUrl, ua, seconds));
          }
          for (const r of m) {
            const redirects = r.statuses['302'] ?? 0;
            if (redirects < r.total * 0.99) {
              throw new Error(
                `${backend} ${name}: only ${redirects} of ${r.total} answers were 302`,
              );
            }
          }
          const rps = (x: Measured[]) => fmt(median(x.map((r) => r.requestsPerSecond)));
          const cpu = (x: Measured[]) =>
            `${fmt(median(x.map((r) => r.cpuMicrosPerRequest)))}, main ${fmt(median(x.map((r) => r.mainMicrosPerRequest)))}`;
          const p99 = (x: Measured[]) => fmt(median(x.map((r) => r.p99Ms)));
          const vsBare = rpsRatio(m, b);
          // Each row also goes to stderr as it is measured, so a run that fails later keeps it.
          rows.push(
            `| ${backend} | ${traffic.name} | ${name} → ${new URL(location).host} | ${rps(b)} (${cpu(b)} µs) | ${rps(a)} (${cpu(a)} µs) | ${rps(m)} (${cpu(m)} µs) | **${fmtRatio(vsBare, target)}** (CPU ${fmt(cpuRatio(m, b), 2)}) | ${fmt(rpsRatio(a, b), 2)} (CPU ${fmt(cpuRatio(a, b), 2)}) | ${fmt(rpsRatio(m, a), 2)} (CPU ${fmt(cpuRatio(m, a), 2)}) | ${p99(b)} / ${p99(m)} | ≥ ${target} ${vsBare >= target ? '✅' : '❌'} |`,
          );
          process.stderr.write(`${rows.at(-1)}\n`);
        }
      } finally {
        await Promise.all(pairs.flatMap((p) => [p.bare.stop(), p.svc.stop()]));
      }
    }
  }
  return [
    '## Links: short-link redirect vs a bare Fastify redirect',
    '',
    `50 connections, ${rounds} alternating rounds of ${seconds} s per server after a warm-up (${warmFresh} s per server for fresh processes, 1 s before their second pass; medians), the client in the bench process (autocannon for one visitor; for many visitors bench/visitors.ts, every request from another address through a trusted proxy, the servers started with SVC_TRUST_PROXY=127.0.0.1) kept awake while it drives a SQLite server (bench/lib.ts, spinning: a sleeping client made the slower server pay the VM's wake-ups) and sleeping for PostgreSQL + Redis (kept awake, it would take the CPU they need), servers in child processes: ${processes} of each kind, taking turns by round, so that one process's luck does not decide the result. req/s with server CPU µs per request in brackets, all threads and the main thread's (process.cpuUsage and /proc/thread-self/stat; steadier than req/s on a shared machine). Every Svc redirect records a click (queued, written in batches; the database's and Redis's CPU time is not counted, but they share the machine's two cores). "In-app bare" is the bare handler mounted inside the Svc app: the platform's own per-request cost.`,
    '',
    '| store | traffic | request | bare Fastify | in-app bare | Svc redirect | Svc / bare | in-app bare / bare | Svc / in-app bare | p99 ms (bare / Svc) | target (Svc / bare req/s) |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

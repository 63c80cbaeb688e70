import { Redis } from 'ioredis';
import {
  cpuRatio,
  fmt,
  fmtRatio,
  type Measured,
  measure,
  median,
  rpsRatio,
  startChild,
} from './lib.ts';

const ROUNDS = 5;
const SECONDS = 4;

interface ServerInfo {
  port: number;
  projectId: string;
  clientKeys: string[];
}

/**
 * Key gate overhead: an authenticated route (client key, cached, rate-limited) against the
 * same handler with no auth, on the same server, in-process state and Redis. Targets: ≥ 0.90
 * of the baseline's throughput in-process, ≥ 0.80 with Redis.
 */
export async function run(): Promise<string> {
  const rows: string[] = [];
  const notes: string[] = [];
  const backends: [string, Record<string, string | undefined>, number][] = [
    ['in-process', { REDIS_URL: '', DATABASE_URL: '' }, 0.9],
  ];
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  backends.push(['Redis', { REDIS_URL: redisUrl, DATABASE_URL: '' }, 0.8]);
  for (const [name, env, target] of backends) {
    const server = await startChild<ServerInfo>('bench/gate-server.ts', {
      ...env,
      GATE_BENCH_KEYS: String(ROUNDS + 1),
    });
    try {
      const base = `http://127.0.0.1:${server.info.port}`;
      // Both routes get the same request (headers included), so only the gate differs; rounds
      // alternate and the median of the paired rounds' ratios is kept, so background noise
      // hits both alike.
      const headers = (round: number) => ({
        authorization: `Bearer ${server.info.clientKeys[round]}`,
        'x-project-id': server.info.projectId,
      });
      const bareUrl = `${base}/bench/bare`;
      const authUrl = `${base}/v1/bench/auth`;
      // The client sleeps between answers here: kept awake (`spinning`), it holds a core that
      // Redis needs, and the Redis row fell from 0.82 to 0.63-0.70 (2026-11-26).
      const load = (url: string, round: number, seconds: number) =>
        measure(url, headers(round), seconds);
      await load(bareUrl, ROUNDS, 2);
      await load(authUrl, ROUNDS, 2);
      const bares: Measured[] = [];
      const auths: Measured[] = [];
      // With Redis: how many script calls the authenticated rounds cost (Redis's own count).
      const redis = env.REDIS_URL ? new Redis(env.REDIS_URL) : null;
      let scripts = 0;
      try {
        for (let round = 0; round < ROUNDS; round++) {
          bares.push(await load(bareUrl, round, SECONDS));
          const before = redis ? await scriptCalls(redis) : 0;
          auths.push(await load(authUrl, round, SECONDS));
          if (redis) scripts += (await scriptCalls(redis)) - before;
        }
      } finally {
        redis?.disconnect();
      }
      if (redis) {
        const requests = auths.reduce((n, r) => n + r.total, 0);
        notes.push(
          `With Redis the authenticated rounds cost ${fmt(scripts)} script calls for ${fmt(requests)} requests: one per ${fmt(requests / Math.max(1, scripts))} requests (Redis counts every client's calls, so this is an upper bound on a shared Redis).`,
        );
      }
      const refused = auths.reduce((n, r) => n + r.total - (r.statuses['200'] ?? 0), 0);
      if (refused > 0) throw new Error(`${refused} non-200 answers on the authenticated route`);
      const ratio = rpsRatio(auths, bares);
      const col = (x: Measured[], f: (r: Measured) => number, digits = 0) =>
        fmt(median(x.map(f)), digits);
      rows.push(
        `| ${name} | ${col(bares, (r) => r.requestsPerSecond)} (${col(bares, (r) => r.cpuMicrosPerRequest)} µs) | ${col(bares, (r) => r.p99Ms)} | ${col(auths, (r) => r.requestsPerSecond)} (${col(auths, (r) => r.cpuMicrosPerRequest)} µs) | ${col(auths, (r) => r.p99Ms)} | **${fmtRatio(ratio, target)}** (CPU ${fmt(cpuRatio(auths, bares), 2)}) | ≥ ${target} ${ratio >= target ? '✅' : '❌'} |`,
      );
    } finally {
      await server.stop();
    }
  }
  return [
    '## Key gate: authenticated route vs the same handler without auth',
    '',
    `50 connections; after a 2 s warm-up per route, ${ROUNDS} alternating rounds of ${SECONDS} s per route; ratios are medians of the paired rounds' ratios. The same request headers on both routes, a client key of its own per round (the API's highest rate limit is 1,000,000 a minute); autocannon in the bench process, server in a child process (no embedded Janus). req/s with the server's CPU µs per request in brackets (process.cpuUsage, all threads; Redis's own CPU not included).`,
    '',
    '| shared state | bare req/s | bare p99 ms | authenticated req/s | auth p99 ms | ratio (req/s) | target |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    ...notes,
  ].join('\n');
}

/** Lua script calls Redis has served so far (`EVALSHA` and `EVAL`, every client). */
async function scriptCalls(redis: Redis) {
  const info = await redis.info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(m[1]);
  return calls;
}

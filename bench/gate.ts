import { fmt, type LoadResult, load, startChild } from './lib.ts';

const ROUNDS = 3;
const SECONDS = 4;

function median(results: LoadResult[]): LoadResult {
  const sorted = [...results].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond);
  return sorted[Math.floor(sorted.length / 2)];
}

interface ServerInfo {
  port: number;
  projectId: string;
  clientKey: string;
}

/**
 * Key gate overhead: an authenticated route (client key, cached, rate-limited) against the
 * same handler with no auth, on the same server, in-process state and Redis. Targets: ≥ 0.90
 * of the baseline's throughput in-process, ≥ 0.80 with Redis.
 */
export async function run(): Promise<string> {
  const rows: string[] = [];
  const backends: [string, Record<string, string | undefined>, number][] = [
    ['in-process', { REDIS_URL: '', DATABASE_URL: '' }, 0.9],
  ];
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  backends.push(['Redis', { REDIS_URL: redisUrl, DATABASE_URL: '' }, 0.8]);
  for (const [name, env, target] of backends) {
    const server = await startChild<ServerInfo>('bench/gate-server.ts', env);
    try {
      const base = `http://127.0.0.1:${server.info.port}`;
      // Both routes get the same request (headers included), so only the gate differs; rounds
      // alternate and medians are kept, so background noise hits both alike.
      const headers = {
        authorization: `Bearer ${server.info.clientKey}`,
        'x-project-id': server.info.projectId,
      };
      const bares: LoadResult[] = [];
      const auths: LoadResult[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        bares.push(await load(`${base}/bench/bare`, headers, SECONDS));
        auths.push(await load(`${base}/v1/bench/auth`, headers, SECONDS));
      }
      const bare = median(bares);
      const authed = median(auths);
      const non2xx = auths.reduce((n, r) => n + r.non2xx, 0);
      if (non2xx > 0) throw new Error(`${non2xx} non-2xx answers on the authenticated route`);
      const ratio = authed.requestsPerSecond / bare.requestsPerSecond;
      rows.push(
        `| ${name} | ${fmt(bare.requestsPerSecond)} | ${fmt(bare.p99Ms)} | ${fmt(authed.requestsPerSecond)} | ${fmt(authed.p99Ms)} | **${fmt(ratio, 2)}** | ≥ ${target} ${ratio >= target ? '✅' : '❌'} |`,
      );
    } finally {
      await server.stop();
    }
  }
  return [
    '### Key gate: authenticated route vs the same handler without auth',
    '',
    `50 connections; ${ROUNDS} alternating rounds of ${SECONDS} s per route after a 2 s warm-up each (medians); the same request headers on both routes; autocannon in the bench process, server in a child process.`,
    '',
    '| shared state | bare req/s | bare p99 ms | authenticated req/s | auth p99 ms | ratio | target |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

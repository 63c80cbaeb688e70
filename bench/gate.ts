import { fmt, load, startChild } from './lib.ts';

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
      const bare = await load(`${base}/bench/bare`);
      const authed = await load(`${base}/v1/bench/auth`, {
        authorization: `Bearer ${server.info.clientKey}`,
        'x-project-id': server.info.projectId,
      });
      if (authed.non2xx > 0)
        throw new Error(`${authed.non2xx} non-2xx answers on the authenticated route`);
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
    '50 connections, 8 s after a 2 s warm-up, autocannon in the bench process, server in a child process.',
    '',
    '| shared state | bare req/s | bare p99 ms | authenticated req/s | auth p99 ms | ratio | target |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

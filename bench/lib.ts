import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import readline from 'node:readline';
import autocannon from 'autocannon';

export const ROOT = path.resolve(import.meta.dirname, '..');

/** Starts a TypeScript script as a child process; resolves with its first stdout line as JSON. */
export async function startChild<T>(script: string, env: Record<string, string | undefined> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout! });
  const [line] = await once(lines, 'line');
  return {
    info: JSON.parse(String(line)) as T,
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

/** Runs autocannon against `url` for `seconds` after a short warm-up. */
export async function load(
  url: string,
  headers: Record<string, string> = {},
  seconds = 8,
  connections = 50,
): Promise<LoadResult> {
  await autocannon({ url, headers, connections, duration: 2 });
  const r = await autocannon({ url, headers, connections, duration: seconds });
  return {
    requestsPerSecond: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx,
  };
}

export function fmt(n: number, digits = 0) {
  return n.toLocaleString('en-US', {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

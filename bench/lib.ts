import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import autocannon from 'autocannon';

export const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * Starts a TypeScript script as a child process; resolves with its stdout line that has a `port`,
 * or rejects when the child exits before printing it.
 */
export async function startChild<T>(script: string, env: Record<string, string | undefined> = {}) {
  // BENCH_NODE_ARGS: extra flags for the children (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
  const flags = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...flags, '--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout! });
  // The server's own log lines (JSON too) may come first: the info line is the one with a port.
  let info: T | undefined;
  const exit = once(child, 'exit');
  while (info === undefined) {
    const line = await Promise.race([once(lines, 'line').then(([l]) => l), exit.then(() => null)]);
    if (line === null) throw new Error(`${script} exited before it was ready`);
    let parsed: { port?: unknown } | null = null;
    try {
      parsed = JSON.parse(String(line));
    } catch {
      // Not JSON: a log line of another format.
    }
    if (typeof parsed?.port === 'number') info = parsed as T;
    else process.stderr.write(`${line}\n`);
  }
  return {
    info,
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** One autocannon run against a server that reports its CPU time at `/__bench/cpu`. */
export interface Measured {
  requestsPerSecond: number;
  /** Server process CPU time (user + system, all threads) per request, microseconds. */
  cpuMicrosPerRequest: number;
  /** The same, of the server's main thread alone (NaN where `/proc` is not there). */
  mainMicrosPerRequest: number;
  p99Ms: number;
  total: number;
  /** Answers by status code. */
  statuses: Record<string, number>;
}

/**
 * CPU time this process has used, in microseconds, all threads and the calling (main) thread's
 * own: bench servers serve it at `/__bench/cpu`. The main thread's is read from
 * `/proc/thread-self/stat` (in ticks of 10 ms: fine over a round of many thousand requests).
 */
export function cpuMicros() {
  const { user, system } = process.cpuUsage();
  let main = Number.NaN;
  try {
    const stat = fs.readFileSync('/proc/thread-self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    main = (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    // Not Linux: no per-thread figure.
  }
  return { micros: user + system, mainMicros: main };
}

type CpuTimes = { micros: number; mainMicros: number | null };

/** Reads a bench server's CPU times (see {@link cpuMicros}) from `/__bench/cpu` on `url`'s host. */
export function serverCpu(url: string) {
  const cpuUrl = new URL('/__bench/cpu', url).toString();
  return async () => (await (await fetch(cpuUrl)).json()) as CpuTimes;
}

/** The server's CPU per request between two readings of {@link serverCpu}. */
export function cpuPerRequest(before: CpuTimes, after: CpuTimes, requests: number) {
  const n = Math.max(1, requests);
  return {
    cpuMicrosPerRequest: (after.micros - before.micros) / n,
    // JSON has no NaN: a missing figure arrives as null.
    mainMicrosPerRequest:
      ((after.mainMicros ?? Number.NaN) - (before.mainMicros ?? Number.NaN)) / n,
  };
}

/**
 * autocannon (50 connections) against `url` for `seconds`, with the server's CPU time per
 * request read from `/__bench/cpu` on the same host before and after.
 */
export async function measure(
  url: string,
  headers: Record<string, string>,
  seconds: number,
): Promise<Measured> {
  const cpu = serverCpu(url);
  const before = await cpu();
  const r = await autocannon({ url, headers, connections: 50, duration: seconds });
  const after = await cpu();
  const stats =
    (r as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {};
  return {
    requestsPerSecond: r.requests.average,
    ...cpuPerRequest(before, after, r.requests.total),
    p99Ms: r.latency.p99,
    total: r.requests.total,
    statuses: Object.fromEntries(Object.entries(stats).map(([code, s]) => [code, s.count])),
  };
}

/**
 * Runs `work` with this process's event loop kept from sleeping (an immediate always pending,
 * so libuv polls without blocking). For a client sharing the machine with the server it drives:
 * a client that sleeps between answers must be woken by the server's every write that finds it
 * asleep, and on this VM that wake-up (an interrupt to the other CPU) costs the writing server
 * microseconds in the kernel. The slower server pays it most, because its client waits more: in
 * one profile it was 13% of a Svc process's main thread and absent from the faster twin's, which
 * turned 10% more CPU into 30% less throughput. With the client awake, a server's throughput
 * follows its own CPU cost; the client then holds one core, as it would on a machine of its own.
 * Not for a server that leans on other local processes (Redis, PostgreSQL): that core would be
 * theirs, and a Redis-backed route measured 0.63–0.70 of its baseline with it, 0.82 without.
 */
export async function spinning<T>(work: Promise<T>): Promise<T> {
  let on = true;
  const spin = () => {
    if (on) setImmediate(spin);
  };
  setImmediate(spin);
  try {
    return await work;
  } finally {
    on = false;
  }
}

export function median(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Median over rounds of `x[i] / y[i]` req/s: paired rounds, so background load hits both. */
export function rpsRatio(x: Measured[], y: Measured[]) {
  return median(x.map((r, i) => r.requestsPerSecond / y[i].requestsPerSecond));
}

/** Median over rounds of the CPU-per-request ratio, as a throughput ratio (y's cost / x's). */
export function cpuRatio(x: Measured[], y: Measured[]) {
  return median(x.map((r, i) => y[i].cpuMicrosPerRequest / r.cpuMicrosPerRequest));
}

export function fmt(n: number, digits = 0) {
  return n.toLocaleString('en-US', {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}

/**
 * A ratio to two digits, or to three where two would round it onto `target` from either side (a
 * ratio of 0.597 against a target of 0.6 reads 0.597, not 0.60).
 */
export function fmtRatio(ratio: number, target: number) {
  const two = fmt(ratio, 2);
  return Math.sign(Number(two) - target) === Math.sign(ratio - target) ? two : fmt(ratio, 3);
}

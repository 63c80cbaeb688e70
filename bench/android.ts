import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import v8 from 'node:v8';
import vm from 'node:vm';
import WebSocket from 'ws';
import { SvcClient } from '../packages/client/src/index.ts';
import { fmt, ROOT } from './lib.ts';

/**
 * The Kotlin client (JVM, android/) against `@svc/client` (Node), in one run against one server
 * (embedded default, media off): time from connect() to joined (a new client and room each time),
 * message round trip p50/p99 (send over the socket, receive it back from the room), and heap per
 * connected client (100 clients in one room). Target: Kotlin within 1.2× of TypeScript on each.
 * Needs a JDK and Maven (it compiles android/ tests if needed).
 */

/**
 * Connects measured in a fresh process (reported, no target), then, after CONNECT_WARMUP more, measured
 * again warm (the gate): a JVM takes about 150 connects to compile the path (the TypeScript side runs the same).
 */
const CONNECTS = 30;
const CONNECT_WARMUP = 120;
const WARMUP = 300;
const MESSAGES = 300;
const IDLE_CLIENTS = 100;
/** Clients that warm the message path up together before it is measured, each with WARMUP messages. */
const WARM_CLIENTS = 20;
/** One message per 25 ms at most: the server allows 50 frames per second per connection. */
const PACE_MS = 25;

interface Result {
  coldConnectP50: number;
  connectP50: number;
  connectP99: number;
  rttP50: number;
  rttP99: number;
  rawRttP50: number;
  rawRttP99: number;
  bytesPerClient: number;
}

const pct = (values: number[], p: number) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) * p)]!;
};

async function startServer() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-android-'));
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/server/src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: '',
      REDIS_URL: '',
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
      SVC_MEDIA: 'off',
      // 160 connects + 200 tokens in a minute: well over a client key's default 120 requests/min
      SVC_CLIENT_KEY_RATE_LIMIT: '100000',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const keys: Record<string, string> = {};
  const lines = readline.createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    child.once('exit', () => reject(new Error('the server exited')));
    lines.on('line', (line) => {
      const m = /^\s+(project id|client key):\s+(\S+)/.exec(line);
      if (m) keys[m[1]!] = m[2]!;
      if (keys['project id'] && keys['client key']) resolve();
    });
  });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    projectId: keys['project id']!,
    clientKey: keys['client key']!,
    stop() {
      child.kill('SIGTERM');
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function typescript(server: Awaited<ReturnType<typeof startServer>>): Promise<Result> {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const make = () =>
    new SvcClient(
      { projectId: server.projectId, apiKey: server.clientKey, baseUrl: server.baseUrl },
      { heartbeatIntervalMs: 0 },
    );
  const tag = Date.now();
  const opts = (room: string, userId: string) => ({
    roomName: room,
    participant: { userId, name: userId },
    liveType: 'VIDEO_CONFERENCE' as const,
  });
  const connectTimes = async (pass: string, count = CONNECTS) => {
    const times: number[] = [];
    for (let i = 1; i <= count; i++) {
      const c = make();
      const t0 = performance.now();
      await c.connect(opts(`bench-ts-connect-${tag}-${pass}-${i}`, `u${i}`));
      times.push(performance.now() - t0);
      await c.disconnect();
    }
    return times;
  };
  const cold = await connectTimes('cold');
  await connectTimes('warm-up', CONNECT_WARMUP);
  const connects = await connectTimes('warm');
  // The message path is warmed up by several clients at once first (one alone, paced by the
  // server's rate limit, would still be optimizing while it is measured), as on the Kotlin side.
  await Promise.all(
    Array.from({ length: WARM_CLIENTS }, async (_, n) => {
      const w = make();
      const waits = new Map<string, () => void>();
      w.onMessageReceived = (m) => {
        waits.get(m.message)?.();
        waits.delete(m.message);
      };
      const r = await w.connect(opts(`bench-ts-warm-${tag}-${n}`, `warm${n}`));
      await roundTrips(async (i) => {
        const done = new Promise<void>((resolve) => waits.set(`m${i}`, resolve));
        await r.sendMessage(`m${i}`);
        await done;
      }, 0);
      await w.disconnect();
    }),
  );
  const c = make();
  const waiting = new Map<string, () => void>();
  c.onMessageReceived = (m) => {
    waiting.get(m.message)?.();
    waiting.delete(m.message);
  };
  const room = await c.connect(opts(`bench-ts-rtt-${tag}`, 'sender'));
  const rtts = await roundTrips(async (i) => {
    const done = new Promise<void>((resolve) => waiting.set(`m${i}`, resolve));
    await room.sendMessage(`m${i}`);
    await done;
  });
  await c.disconnect();
  const raw = await rawRoundTrips(make);
  gc();
  const before = process.memoryUsage().heapUsed;
  const idle: SvcClient[] = [];
  for (let i = 1; i <= IDLE_CLIENTS; i++) {
    const x = make();
    await x.connect(opts(`bench-ts-idle-${tag}`, `idle${i}`));
    idle.push(x);
  }
  gc();
  const bytesPerClient = (process.memoryUsage().heapUsed - before) / IDLE_CLIENTS;
  for (const x of idle) await x.disconnect();
  return {
    coldConnectP50: pct(cold, 0.5),
    connectP50: pct(connects, 0.5),
    connectP99: pct(connects, 0.99),
    rttP50: pct(rtts, 0.5),
    rttP99: pct(rtts, 0.99),
    rawRttP50: pct(raw, 0.5),
    rawRttP99: pct(raw, 0.99),
    bytesPerClient,
  };
}

/**
 * Times `trip(i)` for WARMUP + `measured` messages and returns the last `measured`, in ms, pausing
 * between them to stay under the server's per-connection rate (50 frames/s).
 */
async function roundTrips(
  trip: (i: number) => Promise<void>,
  measured = MESSAGES,
): Promise<number[]> {
  const rtts: number[] = [];
  for (let i = 1; i <= WARMUP + measured; i++) {
    const t0 = performance.now();
    await trip(i);
    const rtt = performance.now() - t0;
    if (i > WARMUP) rtts.push(rtt);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, PACE_MS - rtt)));
  }
  return rtts;
}

/** The same round trips over a bare `ws` socket, with no client library: Node's floor. */
async function rawRoundTrips(make: () => SvcClient): Promise<number[]> {
  const token = await make().getToken({
    roomName: `bench-ts-raw-${Date.now()}`,
    participant: { userId: 'raw', name: 'raw' },
    liveType: 'VIDEO_CONFERENCE',
  });
  const socket = new WebSocket(token.wsUrl);
  let received: (() => void) | undefined;
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('open', () =>
      socket.send(JSON.stringify({ id: 'join', type: 'session.join', data: {} })),
    );
    socket.on('message', (data) => {
      const text = String(data);
      if (text.includes('"session.joined"')) resolve();
      if (text.includes('"message.received"')) received?.();
    });
  });
  const rtts = await roundTrips(async (i) => {
    const done = new Promise<void>((resolve) => {
      received = resolve;
    });
    socket.send(
      JSON.stringify({ id: String(i), type: 'message.send', data: { message: `m${i}` } }),
    );
    await done;
  });
  socket.close();
  return rtts;
}

function kotlin(server: Awaited<ReturnType<typeof startServer>>): Result {
  const sdk = path.join(ROOT, 'android', 'sdk');
  const mvn = (...args: string[]) =>
    execFileSync('mvn', ['-B', '-q', '-Dkotlin.compiler.daemon=false', ...args], {
      cwd: path.join(ROOT, 'android'),
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  if (
    !fs.existsSync(
      path.join(sdk, 'target', 'test-classes', 'dev', 'svc', 'android', 'AndroidBench.class'),
    )
  ) {
    mvn('-pl', 'sdk', '-am', 'test-compile');
  }
  const cpFile = path.join(sdk, 'target', 'bench.classpath');
  // -am with generate-resources: aar-deps attaches its unpacked AAR jars there (they are in no repository)
  mvn(
    '-pl',
    'sdk',
    '-am',
    'generate-resources',
    'dependency:build-classpath',
    '-Dmdep.includeScope=test',
    `-Dmdep.outputFile=${cpFile}`,
  );
  const cp = [
    path.join(sdk, 'target', 'test-classes'),
    path.join(sdk, 'target', 'classes'),
    ...fs
      .readFileSync(cpFile, 'utf8')
      .trim()
      .split(path.delimiter)
      .filter((p) => !/android-all|com\/google\/android\/android\//.test(p)),
  ].join(path.delimiter);
  const out = execFileSync(
    'java',
    ['-cp', cp, 'dev.svc.android.AndroidBench', server.baseUrl, server.projectId, server.clientKey],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return JSON.parse(out.trim().split('\n').pop()!) as Result;
}

export async function run(): Promise<string> {
  const server = await startServer();
  try {
    const ts = await typescript(server);
    const kt = kotlin(server);
    const row = (label: string, k: number, t: number, unit: string, digits = 1) =>
      `| ${label} | ${fmt(k, digits)} ${unit} | ${fmt(t, digits)} ${unit} | ${fmt(k / t, 2)} |`;
    return [
      '## Android (Kotlin JVM client) vs @svc/client',
      '',
      `One server (embedded default, media off). Connect: ${CONNECTS} clients, each a new room, measured in the fresh process (reported without a target), then again after ${CONNECT_WARMUP} more (the gate); round trip: ${MESSAGES} messages after ${WARMUP} warm-up, one per ${PACE_MS} ms at most (the server's rate limit); memory: ${IDLE_CLIENTS} connected clients in one room (Kotlin: live JVM heap after a full GC, the clients sharing the process's OkHttp client; TypeScript: V8 heap after gc()). Each side measures from one thread that its clients' handlers also run on (Kotlin: a main-thread-like executor; TypeScript: the event loop). Target: Kotlin ≤ 1.2 × TypeScript.`,
      '',
      '| | Kotlin | TypeScript | Kotlin / TS |',
      '| --- | --- | --- | --- |',
      row(
        'connect() → joined p50, fresh process (no target)',
        kt.coldConnectP50,
        ts.coldConnectP50,
        'ms',
      ),
      row('connect() → joined p50', kt.connectP50, ts.connectP50, 'ms'),
      row('connect() → joined p99', kt.connectP99, ts.connectP99, 'ms'),
      row('message round trip p50', kt.rttP50, ts.rttP50, 'ms', 2),
      row('message round trip p99', kt.rttP99, ts.rttP99, 'ms', 2),
      row(
        'round trip p50, bare socket, no library (no target)',
        kt.rawRttP50,
        ts.rawRttP50,
        'ms',
        2,
      ),
      row(
        'round trip p99, bare socket, no library (no target)',
        kt.rawRttP99,
        ts.rawRttP99,
        'ms',
        2,
      ),
      row('heap per connected client', kt.bytesPerClient / 1024, ts.bytesPerClient / 1024, 'KiB'),
    ].join('\n');
  } finally {
    server.stop();
  }
}

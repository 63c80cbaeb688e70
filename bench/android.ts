import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import v8 from 'node:v8';
import vm from 'node:vm';
import WebSocket from 'ws';
import { SvcClient } from '../packages/client/src/index.ts';
import { fmt, fmtRatio, median, ROOT } from './lib.ts';

/**
 * The Kotlin client (JVM, android/) against `@svc/client` (Node), in one run against one server
 * (embedded default, media off): time from connect() to joined (a new client and room each time),
 * message round trip p50/p99 (send over the socket, receive it back from the room), and heap per
 * connected client (100 clients in one room). Target: Kotlin within 1.2× of TypeScript on each.
 * Both halves are warmed up, then measured in rounds: connects and memory a half after the other
 * (the order swapping each round), round trips with the halves taking turns trip by trip; a gate
 * is the median of the rounds' Kotlin / TypeScript ratios, so that a stall of the shared machine in
 * one half's window does not decide it. Needs a JDK and Maven (it compiles android/
 * tests if needed).
 */

/** Connects measured in a fresh process (reported, no target). */
const COLD_CONNECTS = 30;
/** Connects before the rounds: a JVM takes about 150 to compile the path (Node runs the same). */
const CONNECT_WARMUP = 120;
const ROUNDS = 7;
/**
 * Per round and half: connects, then round trips after a warm-up on the round's new client. A p99
 * of 100 connects is the second-slowest one, a single stall of the shared machine; of 300, the
 * fourth-slowest. The round trips' p99 is the tenth-slowest of 900: of 300, whether it fell among
 * the few that a late thread wake-up or a collection happened to delay decided a round.
 */
const CONNECTS = 300;
const WARMUP = 50;
const MESSAGES = 900;
const HEAP_ROUNDS = 3;
const IDLE_CLIENTS = 100;
/** Clients that warm the message path up together before the rounds, each with WARM_MESSAGES. */
const WARM_CLIENTS = 20;
const WARM_MESSAGES = 300;
/** One message per 25 ms at most: the server allows 50 frames per second per connection. */
const PACE_MS = 25;

/** What each half measures; the TypeScript one runs in this process, the Kotlin one in a JVM. */
interface Half {
  connects(count: number): Promise<number[]>;
  warm(): Promise<void>;
  /** A connected sender in a room of its own: through the library, or over a bare socket. */
  sender(kind: 'rtt' | 'raw'): Promise<Sender>;
  heapPerClient(clients: number): Promise<number>;
  close(): Promise<void>;
}

/** Times message round trips on one connection. */
interface Sender {
  roundTrips(warmup: number, measured: number): Promise<number[]>;
  close(): Promise<void>;
}

const pct = (values: number[], p: number) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) * p)]!;
};

type Server = Awaited<ReturnType<typeof startServer>>;

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

function typescriptHalf(server: Server): Half {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const make = () =>
    new SvcClient(
      { projectId: server.projectId, apiKey: server.clientKey, baseUrl: server.baseUrl },
      { heartbeatIntervalMs: 0 },
    );
  const tag = Date.now();
  let rooms = 0;
  const roomName = (kind: string) => `bench-ts-${kind}-${tag}-${++rooms}`;
  const opts = (room: string, userId: string) => ({
    roomName: room,
    participant: { userId, name: userId },
    liveType: 'VIDEO_CONFERENCE' as const,
  });
  /** A client whose round trip is `sendMessage` awaited, then the message's own handler. */
  const librarySender = async (kind = 'rtt'): Promise<Sender> => {
    const c = make();
    const waiting = new Map<string, () => void>();
    c.onMessageReceived = (m) => {
      waiting.get(m.message)?.();
      waiting.delete(m.message);
    };
    const room = await c.connect(opts(roomName(kind), 'sender'));
    let sent = 0;
    return {
      roundTrips: (warmup, measured) =>
        roundTrips(warmup, measured, async () => {
          const message = `m${++sent}`;
          const done = new Promise<void>((resolve) => waiting.set(message, resolve));
          await room.sendMessage(message);
          await done;
        }),
      close: () => c.disconnect(),
    };
  };
  return {
    async connects(count) {
      const times: number[] = [];
      for (let i = 1; i <= count; i++) {
        const c = make();
        const t0 = performance.now();
        await c.connect(opts(roomName('connect'), `u${i}`));
        times.push(performance.now() - t0);
        await c.disconnect();
      }
      return times;
    },
    // Several clients at once, as on the Kotlin side (one alone, paced by the server's rate limit,
    // would still be optimizing while it is measured).
    async warm() {
      await Promise.all(
        Array.from({ length: WARM_CLIENTS }, async () => {
          const s = await librarySender('warm');
          await s.roundTrips(WARM_MESSAGES, 0);
          await s.close();
        }),
      );
    },
    sender: (kind) => (kind === 'raw' ? rawSender(make, roomName('raw')) : librarySender()),
    async heapPerClient(clients) {
      gc();
      const before = process.memoryUsage().heapUsed;
      const idle: SvcClient[] = [];
      const room = roomName('idle');
      for (let i = 1; i <= clients; i++) {
        const x = make();
        await x.connect(opts(room, `idle${i}`));
        idle.push(x);
      }
      gc();
      const perClient = (process.memoryUsage().heapUsed - before) / clients;
      for (const x of idle) await x.disconnect();
      return perClient;
    },
    async close() {},
  };
}

/**
 * Times `trip` for `warmup` + `measured` messages and returns the last `measured`, in ms,
 * each after a pause of PACE_MS: under the server's per-connection rate, and from a process that
 * slept, as an app's message is.
 */
async function roundTrips(
  warmup: number,
  measured: number,
  trip: () => Promise<void>,
): Promise<number[]> {
  const rtts: number[] = [];
  for (let i = 1; i <= warmup + measured; i++) {
    await new Promise((resolve) => setTimeout(resolve, PACE_MS));
    const t0 = performance.now();
    await trip();
    if (i > warmup) rtts.push(performance.now() - t0);
  }
  return rtts;
}

/** The same round trips over a bare `ws` socket, with no client library: Node's floor. */
async function rawSender(make: () => SvcClient, roomName: string): Promise<Sender> {
  const token = await make().getToken({
    roomName,
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
  let sent = 0;
  return {
    roundTrips: (warmup, measured) =>
      roundTrips(warmup, measured, async () => {
        const i = ++sent;
        const done = new Promise<void>((resolve) => {
          received = resolve;
        });
        socket.send(
          JSON.stringify({ id: String(i), type: 'message.send', data: { message: `m${i}` } }),
        );
        await done;
      }),
    async close() {
      socket.close();
    },
  };
}

/** The Kotlin half: dev.svc.android.AndroidBench in a JVM, one command a line (see its KDoc). */
function kotlinHalf(server: Server): Half & {
  handoffs(warmup: number, measured: number): Promise<number[]>;
} {
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
  const jvm = spawn(
    'java',
    ['-cp', cp, 'dev.svc.android.AndroidBench', server.baseUrl, server.projectId, server.clientKey],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = readline.createInterface({ input: jvm.stdout! });
  const exited = once(jvm, 'exit').then(([code]) => {
    throw new Error(`the Kotlin bench exited (${code})`);
  });
  exited.catch(() => {});
  const ask = async <T>(command: string): Promise<T> => {
    jvm.stdin!.write(`${command}\n`);
    const [line] = (await Promise.race([once(lines, 'line'), exited])) as [string];
    return JSON.parse(line) as T;
  };
  const samples = async (command: string) => (await ask<{ samples: number[] }>(command)).samples;
  return {
    connects: (count) => samples(`connect ${count}`),
    warm: () => ask('warm'),
    async sender(kind) {
      await ask(`open ${kind}`);
      return {
        roundTrips: (warmup, measured) => samples(`trips ${warmup} ${measured}`),
        close: () => ask('shut'),
      };
    },
    handoffs: (warmup, measured) => samples(`handoff ${warmup} ${measured}`),
    heapPerClient: async (clients) => (await ask<{ bytes: number }>(`heap ${clients}`)).bytes,
    async close() {
      jvm.stdin!.end('quit\n');
      await once(jvm, 'exit');
    },
  };
}

/** A metric's pooled value for each half and the median of its rounds' Kotlin / TypeScript ratios. */
interface Compared {
  kt: number;
  ts: number;
  ratio: number;
  /** Each round's Kotlin / TypeScript ratio, in round order. */
  rounds: number[];
}

/** Each round's samples, for each half. */
interface Rounds {
  kt: number[][];
  ts: number[][];
}

/** Runs `measure` on both halves in `rounds` rounds, one after the other (TypeScript first in odd rounds). */
async function alternate(
  kt: Half,
  ts: Half,
  rounds: number,
  measure: (half: Half) => Promise<number[]>,
): Promise<Rounds> {
  const all: Rounds = { kt: [], ts: [] };
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (['ts', 'kt'] as const) : (['kt', 'ts'] as const);
    for (const side of order) all[side].push(await measure(side === 'kt' ? kt : ts));
  }
  return all;
}

/**
 * Round trips in ROUNDS rounds: in each, a new sender on each half makes WARMUP round trips, then
 * MESSAGES, the halves taking turns trip by trip (TypeScript first in odd rounds). A burst of the
 * shared machine's noise, which slows every hop of a round trip several-fold for a while, then falls
 * on both halves alike, where turns of a whole round (23 s) would let it fall on one half only and
 * decide that round's p99 ratio.
 */
async function interleave(kt: Half, ts: Half, kind: 'rtt' | 'raw'): Promise<Rounds> {
  const all: Rounds = { kt: [], ts: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const senders = { ts: await ts.sender(kind), kt: await kt.sender(kind) };
    const samples = { ts: [] as number[], kt: [] as number[] };
    for (const side of ['ts', 'kt'] as const) await senders[side].roundTrips(WARMUP, 0);
    const order = round % 2 === 0 ? (['ts', 'kt'] as const) : (['kt', 'ts'] as const);
    for (let trip = 0; trip < MESSAGES; trip++) {
      for (const side of order) samples[side].push(...(await senders[side].roundTrips(0, 1)));
    }
    for (const side of ['ts', 'kt'] as const) {
      await senders[side].close();
      all[side].push(samples[side]);
    }
  }
  return all;
}

/** `stat` of each half's pooled samples, and the median of the rounds' Kotlin / TypeScript ratios. */
function compare(
  all: Rounds,
  stats: Record<string, (samples: number[]) => number>,
): Record<string, Compared> {
  return Object.fromEntries(
    Object.entries(stats).map(([name, stat]) => {
      const rounds = all.kt.map((k, i) => stat(k) / stat(all.ts[i]!));
      return [
        name,
        { kt: stat(all.kt.flat()), ts: stat(all.ts.flat()), ratio: median(rounds), rounds },
      ];
    }),
  );
}

export async function run(): Promise<string> {
  const server = await startServer();
  const ts = typescriptHalf(server);
  const kt = kotlinHalf(server);
  try {
    const coldTs = await ts.connects(COLD_CONNECTS);
    const coldKt = await kt.connects(COLD_CONNECTS);
    for (const half of [ts, kt]) {
      await half.connects(CONNECT_WARMUP);
      await half.warm();
    }
    const p50 = (v: number[]) => pct(v, 0.5);
    const p99 = (v: number[]) => pct(v, 0.99);
    const connect = compare(await alternate(kt, ts, ROUNDS, (h) => h.connects(CONNECTS)), {
      p50,
      p99,
    });
    const rtt = compare(await interleave(kt, ts, 'rtt'), { p50, p99 });
    const raw = compare(await interleave(kt, ts, 'raw'), { p50, p99 });
    // What two thread wake-ups cost here (a token there and back): a Kotlin round trip wakes three
    // threads (the writer, the reader, the callback thread), a Node one its event loop; a round trip
    // over OkHttp's own WebSocket (the bare row) up to four, its task runner's two for the write.
    const handoff = await kt.handoffs(WARMUP, MESSAGES);
    // A room of IDLE_CLIENTS once on each half before the rounds, a warm-up as for the other
    // metrics: the Kotlin half's first such room reads up to half as much again as later ones.
    for (const half of [ts, kt]) await half.heapPerClient(IDLE_CLIENTS);
    const heap = compare(
      await alternate(kt, ts, HEAP_ROUNDS, async (h) => [
        (await h.heapPerClient(IDLE_CLIENTS)) / 1024,
      ]),
      { median },
    );
    const row = (label: string, c: Compared, unit: string, digits: number, target: boolean) =>
      `| ${label} | ${fmt(c.kt, digits)} ${unit} | ${fmt(c.ts, digits)} ${unit} | ${target ? `**${fmtRatio(c.ratio, 1.2)}**` : fmt(c.ratio, 2)} | ${c.rounds.map((r) => fmt(r, 2)).join(' ') || '—'} | ${target ? (c.ratio <= 1.2 ? '≤ 1.2 ✅' : '≤ 1.2 ❌') : '—'} |`;
    const cold = { kt: p50(coldKt), ts: p50(coldTs), ratio: p50(coldKt) / p50(coldTs), rounds: [] };
    return [
      '## Android (Kotlin JVM client) vs @svc/client',
      '',
      `One server (embedded default, media off). Connect: ${COLD_CONNECTS} clients in the fresh process (no target), then ${CONNECT_WARMUP} more and ${WARM_CLIENTS} clients warming the message path up together (${WARM_MESSAGES} messages each); then ${ROUNDS} alternating rounds (the order swapping each round) of ${CONNECTS} connects (a new client and room each); ${ROUNDS} rounds of ${MESSAGES} round trips after ${WARMUP} on a new client of each half (each after a pause of ${PACE_MS} ms: the server's rate limit), the halves taking turns trip by trip, and the same over a bare socket without the library (OkHttp's WebSocket; \`ws\`), then ${MESSAGES} hand-offs of a token to another JVM thread and back after ${WARMUP}, paced the same (two thread wake-ups, no socket; Kotlin only); memory: ${IDLE_CLIENTS} connected clients in one room, once unmeasured, then ${HEAP_ROUNDS} alternating rounds (Kotlin: live JVM heap after a full GC, the clients sharing the process's OkHttp client; TypeScript: V8 heap after gc()). Each side measures from one thread that its clients' handlers also run on (Kotlin: a main-thread-like executor; TypeScript: the event loop). Values are over all rounds' samples; the ratio is the median of the rounds' ratios. Target: Kotlin ≤ 1.2 × TypeScript.`,
      '',
      '| | Kotlin | TypeScript | Kotlin / TS (median of rounds) | rounds | target |',
      '| --- | --- | --- | --- | --- | --- |',
      row('connect() → joined p50, fresh process', cold, 'ms', 1, false),
      row('connect() → joined p50', connect.p50!, 'ms', 1, true),
      row('connect() → joined p99', connect.p99!, 'ms', 1, true),
      row('message round trip p50', rtt.p50!, 'ms', 2, true),
      row('message round trip p99', rtt.p99!, 'ms', 2, true),
      row('round trip p50, bare socket, no library', raw.p50!, 'ms', 2, false),
      row('round trip p99, bare socket, no library', raw.p99!, 'ms', 2, false),
      `| thread hand-off there and back p50 (JVM, two wake-ups, no socket) | ${fmt(p50(handoff), 2)} ms | — | — | — | — |`,
      `| thread hand-off there and back p99 | ${fmt(p99(handoff), 2)} ms | — | — | — | — |`,
      row('heap per connected client', heap.median!, 'KiB', 1, true),
    ].join('\n');
  } finally {
    await kt.close().catch(() => {});
    server.stop();
  }
}

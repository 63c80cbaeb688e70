import { once } from 'node:events';
import { WebSocket } from 'ws';
import { fmt, fmtRatio } from './lib.ts';
import { joinSession, startWsChild, type WsChild } from './ws-child.ts';

/**
 * Room controller fan-out (issue 22): one room of 200 participants on Svc (embedded default;
 * also Redis when REDIS_URL is set). Baseline, in the same run and the same room size: every
 * participant sends 1 plain message per second (`message.send`). Controller load: every
 * participant raises a hand and answers a poll, then sends 1 reaction per second
 * (`reaction.send`, fanned out in `reaction.batch` frames). Reports reactions (or messages)
 * delivered per second and p50/p99 from send to delivery (the two loads take turns, both rooms
 * open on one node), and the server memory per participant (growth over the node warmed by a room
 * of 20) idle and once every participant holds controller state (hand, vote), in the room of 200
 * and, on a fresh node, in 2,000 connections in rooms of 100 as the realtime bench measures idle
 * connections.
 * Targets: ≥ 0.8 × the plain fan-out's throughput, and memory < 2 × 9 KiB per participant.
 */

/** `BENCH_CONTROLLER_PARTICIPANTS` / `BENCH_CONTROLLER_MEASURE_MS` shrink it for a smoke run. */
const PARTICIPANTS = Number(process.env.BENCH_CONTROLLER_PARTICIPANTS ?? 200);
const WARMUP_MS = 2000;
const MEASURE_MS = Number(process.env.BENCH_CONTROLLER_MEASURE_MS ?? 5000);
/** Alternating rounds of each load (medians reported). */
const ROUNDS = Number(process.env.BENCH_CONTROLLER_ROUNDS ?? 3);
/** The poll's results visibility (`live`, the default, puts the results in every update). */
const VISIBILITY = process.env.BENCH_CONTROLLER_POLL_VISIBILITY ?? 'live';
/** The realtime bench's idle measure: 2,000 connections in rooms of 100. */
const IDLE_CONNECTIONS = Number(process.env.BENCH_CONTROLLER_IDLE_CONNECTIONS ?? 2000);
const IDLE_ROOM_SIZE = 100;

/** Opens and joins `count` sockets in `room` (the first holds a host token). */
async function openRoom(child: WsChild, room: string, count: number) {
  const { tokens } = await child.call<{ tokens: string[] }>({
    cmd: 'tokens',
    room,
    count,
    hostFirst: true,
  });
  const sockets: WebSocket[] = [];
  for (let i = 0; i < tokens.length; i += 50) {
    const batch = tokens.slice(i, i + 50).map(async (t) => {
      const ws = new WebSocket(`ws://127.0.0.1:${child.port}/v1/realtime/ws?access_token=${t}`);
      await once(ws, 'open');
      await withTimeout('session.join', joinSession(ws));
      return ws;
    });
    sockets.push(...(await Promise.all(batch)));
  }
  return sockets;
}

/** A request or join without an answer within this fails the run (a hang would hide the cause). */
const ANSWER_TIMEOUT_MS = 30_000;

function withTimeout<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer to ${what} within ${ANSWER_TIMEOUT_MS} ms`)),
      ANSWER_TIMEOUT_MS,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Sends a request and resolves with its answer frame. */
function request(ws: WebSocket, id: string, type: string, data: unknown): Promise<any> {
  return withTimeout(type, requestOnce(ws, id, type, data));
}

function requestOnce(ws: WebSocket, id: string, type: string, data: unknown): Promise<any> {
  return new Promise((resolve) => {
    const onMessage = (raw: Buffer) => {
      const text = raw.toString();
      if (!text.includes(`"id":"${id}"`)) return;
      const frame = JSON.parse(text);
      if ((frame.type === 'ack' || frame.type === 'error') && frame.id === id) {
        ws.off('message', onMessage);
        resolve(frame);
      }
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ id, type, data }));
  });
}

interface MemPer {
  rss: number;
  heap: number;
}

interface FanOut {
  deliveredPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

/** 1 send per participant per second for MEASURE_MS; `kind` picks messages or reactions. */
async function fanOut(sockets: WebSocket[], kind: 'message' | 'reaction'): Promise<FanOut> {
  const latencies: number[] = [];
  let measuring = false;
  let delivered = 0;
  // Reactions carry no timestamp of ours: each sender's last send time stands for it.
  const sentAt = new Map<string, number>();
  for (const ws of sockets) {
    ws.on('message', (raw: Buffer) => {
      if (!measuring) return;
      const text = raw.toString('latin1');
      if (kind === 'message') {
        if (!text.startsWith('{"type":"message.received"')) return;
        const at = text.indexOf('"message":"');
        delivered += 1;
        latencies.push(performance.now() - Number(text.slice(at + 11, text.indexOf('"', at + 11))));
        return;
      }
      if (!text.startsWith('{"type":"reaction.batch"')) return;
      const now = performance.now();
      for (const m of text.matchAll(/"userId":"(u\d+)"/g)) {
        delivered += 1;
        const t = sentAt.get(m[1]!);
        if (t !== undefined) latencies.push(now - t);
      }
    });
  }
  const timers: NodeJS.Timeout[] = [];
  let id = 0;
  sockets.forEach((ws, i) => {
    const start = setTimeout(
      () => {
        timers.push(
          setInterval(() => {
            id += 1;
            if (kind === 'message') {
              ws.send(
                `{"id":"m${id}","type":"message.send","data":{"message":"${performance.now().toFixed(3)}"}}`,
              );
            } else {
              sentAt.set(`u${i}`, performance.now());
              ws.send(`{"id":"r${id}","type":"reaction.send","data":{"emoji":"clap"}}`);
            }
          }, 1000),
        );
      },
      (i * 1000) / sockets.length,
    );
    timers.push(start);
  });
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, MEASURE_MS));
  measuring = false;
  const elapsed = performance.now() - t0;
  for (const t of timers) clearInterval(t);
  for (const ws of sockets) ws.removeAllListeners('message');
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return { deliveredPerSec: (delivered * 1000) / elapsed, p50Ms: pct(0.5), p99Ms: pct(0.99) };
}

async function memory(child: WsChild) {
  return (await child.call<{ memory: NodeJS.MemoryUsage }>({ cmd: 'memory' })).memory;
}

/** Every participant raises a hand and answers a poll the host (the first socket) created. */
async function holdState(sockets: WebSocket[], tag: string) {
  const poll = await request(sockets[0]!, `p${tag}`, 'poll.create', {
    question: 'Bench?',
    options: ['a', 'b', 'c'],
    visibility: VISIBILITY,
  });
  await Promise.all(sockets.map((ws, i) => request(ws, `h${tag}-${i}`, 'hand.raise', {})));
  await Promise.all(
    sockets.map((ws, i) =>
      request(ws, `v${tag}-${i}`, 'poll.respond', { pollId: poll.data.pollId, option: i % 3 }),
    ),
  );
}

/**
 * A room of 20 with controller state, left open: a fresh node's first room also pays the node's
 * one-time costs (modules loaded and code compiled on first use, about 2 MB), which a room of 200
 * would otherwise count as 10 KiB per participant. Memory is measured from after it.
 */
const WARM_ROOM_SIZE = 20;
async function warmUp(svc: WsChild) {
  const sockets = await openRoom(svc, 'warm-up', WARM_ROOM_SIZE);
  await holdState(sockets, 'warm');
  return sockets;
}

/** KiB per connection of heap+external and RSS growth over `before`. */
function perConnection(before: NodeJS.MemoryUsage, after: NodeJS.MemoryUsage, count: number) {
  return {
    rss: (after.rss - before.rss) / count / 1024,
    heap: (after.heapUsed + after.external - before.heapUsed - before.external) / count / 1024,
  };
}

/** The realtime bench's measure (rooms of 100, on a fresh node), idle and then with controller state. */
async function idleConnections(env: Record<string, string>) {
  const svc = await startWsChild('bench/realtime-server.ts', env);
  try {
    const warm = await warmUp(svc);
    const before = await memory(svc);
    const rooms: WebSocket[][] = [];
    for (let r = 0; r < IDLE_CONNECTIONS / IDLE_ROOM_SIZE; r++) {
      rooms.push(await openRoom(svc, `idle-${r}`, IDLE_ROOM_SIZE));
    }
    const idle = perConnection(before, await memory(svc), IDLE_CONNECTIONS);
    for (const [r, sockets] of rooms.entries()) await holdState(sockets, String(r));
    const withState = perConnection(before, await memory(svc), IDLE_CONNECTIONS);
    for (const ws of [...warm, ...rooms.flat()]) ws.terminate();
    return { idle, withState };
  } finally {
    await svc.stop();
  }
}

export async function run(): Promise<string> {
  const rows: string[] = [];
  const memRows: string[] = [];
  const variants: [string, Record<string, string>][] = [
    ['Svc, in-process state', { REDIS_URL: '', DATABASE_URL: '' }],
  ];
  if (process.env.REDIS_URL)
    variants.push(['Svc, Redis', { REDIS_URL: process.env.REDIS_URL, DATABASE_URL: '' }]);
  for (const [name, env] of variants) {
    // No SFU: the controller's frames only (a Janus restarting beside the node would add noise).
    const rates = {
      SVC_MEDIA: 'off',
      SVC_REALTIME_RATE_PER_SEC: '1000',
      SVC_REALTIME_RATE_BURST: '1000',
    };
    const svc = await startWsChild('bench/realtime-server.ts', { ...env, ...rates });
    try {
      await measureVariant(name, env, rates, svc, rows, memRows);
    } catch (err) {
      rows.push(`| ${name}: failed | ${(err as Error).message} | | | | | ❌ |`);
    } finally {
      await svc.stop();
    }
  }
  return report(rows, memRows);
}

async function measureVariant(
  name: string,
  env: Record<string, string>,
  rates: Record<string, string>,
  svc: WsChild,
  rows: string[],
  memRows: string[],
) {
  // Memory first, on the fresh node once warm: the room idle, then with every participant's hand
  // and vote (the controller state), each against the node before the room.
  const warm = await warmUp(svc);
  const before = await memory(svc);
  const sockets = await openRoom(svc, 'controller', PARTICIPANTS);
  const idle = await memory(svc);
  await holdState(sockets, 'big');
  const withState = await memory(svc);
  // Both rooms stay open; the loads take turns, so that the machine's other tenants weigh on
  // both alike; ratios are per pair of rounds, and the medians are reported.
  const plainRoom = await openRoom(svc, 'plain', PARTICIPANTS);
  const plains: FanOut[] = [];
  const ctls: FanOut[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    plains.push(await fanOut(plainRoom, 'message'));
    ctls.push(await fanOut(sockets, 'reaction'));
  }
  for (const ws of [...warm, ...sockets, ...plainRoom]) ws.terminate();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const pick = (runs: FanOut[]) => ({
    deliveredPerSec: median(runs.map((r) => r.deliveredPerSec)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
  });
  const plain = pick(plains);
  const ctl = pick(ctls);
  const ratio = median(ctls.map((c, i) => c.deliveredPerSec / plains[i]!.deliveredPerSec));
  const p99Ratio = median(ctls.map((c, i) => c.p99Ms / plains[i]!.p99Ms));
  rows.push(
    `| ${name}: plain messages (baseline) | ${fmt(plain.deliveredPerSec)} | ${fmt(plain.p50Ms, 1)} | ${fmt(plain.p99Ms, 1)} | 1.00 | — | — |`,
    `| ${name}: reactions (hands and votes held) | ${fmt(ctl.deliveredPerSec)} | ${fmt(ctl.p50Ms, 1)} | ${fmt(ctl.p99Ms, 1)} | **${fmtRatio(ratio, 0.8)}** | ${fmt(p99Ratio, 2)} | ${ratio >= 0.8 ? '✅' : '❌'} |`,
  );
  const row = (what: string, idleKiB: MemPer, ctlKiB: MemPer) =>
    `| ${name} | ${what} | ${fmt(idleKiB.rss, 1)} | ${fmt(idleKiB.heap, 1)} | ${fmt(ctlKiB.rss, 1)} | ${fmt(ctlKiB.heap, 1)} | ${fmt(ctlKiB.heap - idleKiB.heap, 1)} | ${ctlKiB.heap < 2 * 9 ? '✅' : '❌'} |`;
  memRows.push(
    row(
      `one room of ${PARTICIPANTS}`,
      perConnection(before, idle, PARTICIPANTS),
      perConnection(before, withState, PARTICIPANTS),
    ),
  );
  const many = await idleConnections({ ...env, ...rates });
  memRows.push(
    row(`${fmt(IDLE_CONNECTIONS)} in rooms of ${IDLE_ROOM_SIZE}`, many.idle, many.withState),
  );
}

function report(rows: string[], memRows: string[]): string {
  return [
    '## Room controller fan-out',
    '',
    `One room, ${PARTICIPANTS} participants, each sending 1 request/s (offered: ${fmt(PARTICIPANTS * PARTICIPANTS)} deliveries/s); ${ROUNDS} alternating rounds per load of ${MEASURE_MS / 1000} s measured after ${WARMUP_MS / 1000} s warm-up, both rooms open on the same node; medians, ratios per pair of rounds. Latency is from send to delivery in this process (one clock); for reactions, from the sender's last send. Reactions are batched per node every 100 ms (SVC_REALTIME_REACTION_BATCH_MS), which adds up to 100 ms by design. Target: ≥ 0.8 × the plain fan-out's throughput.`,
    '',
    '| Load | delivered/s | p50 ms | p99 ms | vs plain (delivered/s) | p99 vs plain | target |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `Memory per participant (server, after a full GC, growth over the node after a warm-up room of ${WARM_ROOM_SIZE} with controller state, which stays open: a fresh node's first room would also count the node's one-time costs, about 2 MB): joined and idle, then with every participant holding a raised hand and an answer to a \`${VISIBILITY}\` poll; in the room of ${PARTICIPANTS} above, and on a fresh node as the realtime bench measures idle connections. Target: heap+external with the controller state < 2 × 9 KiB (the realtime bench's idle connection).`,
    '',
    '| Server | rooms | idle RSS KiB | idle heap+external KiB | with state RSS KiB | with state heap+external KiB | state adds KiB | target |',
    '|---|---|---|---|---|---|---|---|',
    ...memRows,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${await run()}\n`);
}

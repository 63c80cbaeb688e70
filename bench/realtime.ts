import { once } from 'node:events';
import { WebSocket } from 'ws';
import { fmt, fmtRatio } from './lib.ts';
import { joinSession, startWsChild, type WsChild } from './ws-child.ts';

/**
 * Realtime fan-out: one room of 100 participants, each sending 5 messages per second, through
 * Svc (embedded default; and Redis when REDIS_URL is set) against a bare `ws` broadcast server
 * doing the same fan-out in the same run. Reports delivered messages per second, p50/p99
 * delivery latency (sender and receivers are in this process, so one clock), and server memory
 * per idle connection with 2,000 connections. Targets: ≥ 0.7 × the bare server's throughput,
 * p99 < 2 × the bare server's, < 64 KiB per idle connection.
 */

const PARTICIPANTS = 100;
const RATE_PER_SEC = 5;
const WARMUP_MS = 2000;
const MEASURE_MS = 10_000;
const IDLE_CONNECTIONS = 2000;
const IDLE_ROOM_SIZE = 100;

interface Target {
  /** Opens `count` sockets in `room`, ready to send (joined, for Svc). */
  open(room: string, count: number): Promise<WebSocket[]>;
  send(ws: WebSocket, id: number, text: string): void;
}

async function openAll(urls: string[], ready: (ws: WebSocket) => Promise<void>) {
  const sockets: WebSocket[] = [];
  for (let i = 0; i < urls.length; i += 100) {
    const batch = urls.slice(i, i + 100).map(async (url) => {
      const ws = new WebSocket(url);
      await once(ws, 'open');
      await ready(ws);
      return ws;
    });
    sockets.push(...(await Promise.all(batch)));
  }
  return sockets;
}

function svcTarget(child: WsChild): Target {
  return {
    async open(room, count) {
      const { tokens } = await child.call<{ tokens: string[] }>({ cmd: 'tokens', room, count });
      const urls = tokens.map(
        (t) => `ws://127.0.0.1:${child.port}/v1/realtime/ws?access_token=${t}`,
      );
      return openAll(urls, joinSession);
    },
    send(ws, id, text) {
      ws.send(`{"id":"${id}","type":"message.send","data":{"message":"${text}"}}`);
    },
  };
}

function bareTarget(child: WsChild): Target {
  return {
    open: (_room, count) =>
      openAll(
        Array.from({ length: count }, () => `ws://127.0.0.1:${child.port}`),
        async () => {},
      ),
    send(ws, id, text) {
      ws.send(`{"id":"${id}","type":"message.send","data":{"message":"${text}"}}`);
    },
  };
}

interface FanOut {
  deliveredPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

async function fanOut(target: Target, room: string): Promise<FanOut> {
  const sockets = await target.open(room, PARTICIPANTS);
  const latencies: number[] = [];
  let measuring = false;
  let delivered = 0;
  for (const ws of sockets) {
    ws.on('message', (raw: Buffer) => {
      // No JSON.parse: the load generator must stay cheaper than the servers it measures.
      if (!measuring || raw[9] !== 0x6d /* m of "message.received" */) return;
      const text = raw.toString('latin1');
      const at = text.indexOf('"message":"');
      if (at < 0 || !text.startsWith('{"type":"message.received"')) return;
      delivered += 1;
      latencies.push(performance.now() - Number(text.slice(at + 11, text.indexOf('"', at + 11))));
    });
  }
  const timers: NodeJS.Timeout[] = [];
  let id = 0;
  sockets.forEach((ws, i) => {
    // Spread the senders over the period so the load is steady.
    const start = setTimeout(
      () => {
        timers.push(
          setInterval(
            () => target.send(ws, ++id, performance.now().toFixed(3)),
            1000 / RATE_PER_SEC,
          ),
        );
      },
      (i * 1000) / RATE_PER_SEC / PARTICIPANTS,
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
  for (const ws of sockets) ws.terminate();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return { deliveredPerSec: (delivered * 1000) / elapsed, p50Ms: pct(0.5), p99Ms: pct(0.99) };
}

/** Server memory (RSS) added per idle connection, after a full GC on both sides of the measure. */
async function memoryPerConnection(child: WsChild, target: Target, prefix: string) {
  const before = (await child.call<{ memory: NodeJS.MemoryUsage }>({ cmd: 'memory' })).memory;
  const sockets: WebSocket[] = [];
  for (let r = 0; r < IDLE_CONNECTIONS / IDLE_ROOM_SIZE; r++) {
    sockets.push(...(await target.open(`${prefix}-${r}`, IDLE_ROOM_SIZE)));
  }
  const after = (await child.call<{ memory: NodeJS.MemoryUsage }>({ cmd: 'memory' })).memory;
  for (const ws of sockets) ws.terminate();
  return {
    rssPerConn: (after.rss - before.rss) / sockets.length,
    heapPerConn:
      (after.heapUsed + after.external - before.heapUsed - before.external) / sockets.length,
  };
}

export async function run(): Promise<string> {
  const rows: string[] = [];
  const memRows: string[] = [];
  const bare = await startWsChild('bench/realtime-bare.ts', {});
  let baseline: FanOut;
  try {
    baseline = await fanOut(bareTarget(bare), 'bare');
    const mem = await memoryPerConnection(bare, bareTarget(bare), 'idle');
    rows.push(
      `| bare \`ws\` broadcast (baseline) | ${fmt(baseline.deliveredPerSec)} | ${fmt(baseline.p50Ms, 1)} | ${fmt(baseline.p99Ms, 1)} | 1.00 | — |`,
    );
    memRows.push(
      `| bare \`ws\` | ${fmt(mem.rssPerConn / 1024, 1)} | ${fmt(mem.heapPerConn / 1024, 1)} | — |`,
    );
  } finally {
    await bare.stop();
  }
  const variants: [string, Record<string, string>][] = [
    ['Svc, in-process state', { REDIS_URL: '', DATABASE_URL: '' }],
  ];
  if (process.env.REDIS_URL)
    variants.push(['Svc, Redis', { REDIS_URL: process.env.REDIS_URL, DATABASE_URL: '' }]);
  for (const [name, env] of variants) {
    const svc = await startWsChild('bench/realtime-server.ts', env);
    try {
      const r = await fanOut(svcTarget(svc), 'fanout');
      const ratio = r.deliveredPerSec / baseline.deliveredPerSec;
      const ok = ratio >= 0.7 && r.p99Ms < 2 * baseline.p99Ms;
      rows.push(
        `| ${name} | ${fmt(r.deliveredPerSec)} | ${fmt(r.p50Ms, 1)} | ${fmt(r.p99Ms, 1)} | **${fmtRatio(ratio, 0.7)}** | ${ok ? '✅' : '❌'} (p99 ${fmt(r.p99Ms / Math.max(baseline.p99Ms, 0.001), 2)}× bare) |`,
      );
      const mem = await memoryPerConnection(svc, svcTarget(svc), 'idle');
      memRows.push(
        `| ${name} | ${fmt(mem.rssPerConn / 1024, 1)} | ${fmt(mem.heapPerConn / 1024, 1)} | ${mem.rssPerConn < 64 * 1024 ? '✅' : '❌'} |`,
      );
    } finally {
      await svc.stop();
    }
  }
  return [
    '## Realtime fan-out',
    '',
    `One room, ${PARTICIPANTS} participants, each sending ${RATE_PER_SEC} messages/s (offered: ${fmt(PARTICIPANTS * RATE_PER_SEC * PARTICIPANTS)} deliveries/s); ${MEASURE_MS / 1000} s measured after ${WARMUP_MS / 1000} s warm-up. Targets: ≥ 0.7 × bare throughput, p99 < 2 × bare.`,
    '',
    '| Server | delivered msg/s | p50 ms | p99 ms | vs bare | target |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `Memory per idle connection (${fmt(IDLE_CONNECTIONS)} connections, rooms of ${IDLE_ROOM_SIZE}, joined; server RSS and heap+external growth after GC). Target: < 64 KiB.`,
    '',
    '| Server | RSS KiB/conn | heap+external KiB/conn | target |',
    '|---|---|---|---|',
    ...memRows,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${await run()}\n`);
}

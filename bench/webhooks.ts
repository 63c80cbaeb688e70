/**
 * Webhook delivery throughput: deliveries per second from the outbox to a local receiver that
 * answers 200 at once, against a baseline of plain keep-alive POSTs to the same receiver with
 * the same concurrency (what the network path alone allows), plus what a delivery costs in CPU
 * (the server processes' and their PostgreSQL backends'). Cases: one node on SQLite, one node on
 * PostgreSQL, two nodes on PostgreSQL, and one node on PostgreSQL delivering to a healthy
 * endpoint beside a dead one (connection refused) or a slow one (answers after 10 s). Nodes are
 * child processes (packages/server/test/webhooks/node-process.ts); the receiver and the baseline
 * client run in this process. Every case runs ROUNDS times, the cases taking turns, and the
 * table shows medians with the range.
 */

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/areas.ts';
import { fmt, fmtRatio, ROOT } from './lib.ts';

const EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS) || 3000;
/**
 * Requests before the measured ones, on both sides: the baseline's client sends them untimed, and
 * a case's nodes deliver them before its span starts. A fresh process runs its first few thousand
 * requests partly interpreted (a bare client pays 3–5 times its warm CPU per request over its
 * first 3,000), and a node serves for much longer than that, so both are measured warm.
 */
const WARMUP = Number(process.env.BENCH_WEBHOOK_WARMUP ?? 3000);
const ROUNDS = Number(process.env.BENCH_WEBHOOK_ROUNDS) || 3;
const ROOMS = 50;
const CONCURRENCY = 16;
const CASE_LIMIT_MS = 20_000;
const ENQUEUE_BATCH = 100;
/** Sequential single emits measured (a smaller sample: they are slow on PostgreSQL). */
const SINGLE_EMITS = 500;

/** CPU seconds of a process (user + system, all threads) from /proc; 0 when it is gone. */
function cpuOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

class CountingReceiver {
  count = 0;
  /** performance.now() of the first and latest request since `expect`. */
  firstAt = 0;
  lastAt = 0;
  onFirst: (() => void) | null = null;
  /** Called once when `count` reaches `at`. */
  onCount: { at: number; fn: () => void } | null = null;
  private target = Number.POSITIVE_INFINITY;
  private done: (() => void) | null = null;
  readonly server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200).end();
      this.count++;
      this.lastAt = performance.now();
      if (this.firstAt === 0) {
        this.firstAt = this.lastAt;
        this.onFirst?.();
      }
      if (this.onCount && this.count >= this.onCount.at) {
        const { fn } = this.onCount;
        this.onCount = null;
        fn();
      }
      if (this.count >= this.target) this.done?.();
    });
  });
  async start() {
    this.server.keepAliveTimeout = 30_000;
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  /** Resolves when `n` more requests arrived, or CASE_LIMIT_MS after the first of them. */
  expect(n: number, onFirst: () => void = () => {}) {
    this.target = this.count + n;
    this.firstAt = 0;
    this.onFirst = onFirst;
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const check = setInterval(() => {
        if (this.firstAt && !timer) timer = setTimeout(finish, CASE_LIMIT_MS);
      }, 50);
      const finish = () => {
        clearInterval(check);
        clearTimeout(timer);
        resolve();
      };
      this.done = finish;
    });
  }
  /** Requests per second between the first and the latest request since `expect`. */
  rate(delivered: number) {
    return delivered > 1 ? ((delivered - 1) / (this.lastAt - this.firstAt)) * 1000 : 0;
  }
  close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}

/** A receiver that answers 200 after 10 s. */
async function slowReceiver() {
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    req.resume();
    const t = setTimeout(() => {
      timers.delete(t);
      res.writeHead(200).end();
    }, 10_000);
    timers.add(t);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow`,
    close() {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      server.close();
    },
  };
}

/** A local address where nothing listens: connections are refused. */
async function deadUrl() {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}/dead`;
}

const body = JSON.stringify({
  type: 'participant.joined',
  id: 'evt_bench',
  createdAt: new Date().toISOString(),
  projectId: 'prj_bench',
  data: { room: 'r', identity: 'alice' },
});

/** Plain keep-alive POSTs, CONCURRENCY at a time: the ceiling for the HTTP path alone. */
async function baseline(url: string, receiver: CountingReceiver) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let started = performance.now();
  let sent = 0;
  let target = WARMUP;
  const worker = async () => {
    while (sent < target && performance.now() - started < CASE_LIMIT_MS) {
      sent++;
      await new Promise<void>((resolve, reject) => {
        const req = http.request(
          url,
          { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            res.on('end', resolve);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  sent = 0;
  target = EVENTS;
  started = performance.now();
  const before = receiver.count;
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  agent.destroy();
  return ((receiver.count - before) / (performance.now() - started)) * 1000;
}

async function dropSchema(databaseUrl: string, schema: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(`drop schema if exists ${schema} cascade`);
  await client.end();
}

interface Store {
  env: Record<string, string>;
  /** CPU seconds of this store's server-side processes so far (PostgreSQL backends of the bench). */
  cpu(): Promise<number>;
  drop(): Promise<void>;
}

function sqliteStore(): Store {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wh-'));
  return {
    env: { DATA_DIR: dir, DATABASE_URL: '' },
    cpu: async () => 0,
    drop: async () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

function postgresStore(databaseUrl: string): Store {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const url = new URL(databaseUrl);
  // Names the bench's backends, so that their CPU can be read (and no other tenant's).
  url.searchParams.set('application_name', schema);
  const seen = new Map<number, number>();
  return {
    env: { DATABASE_URL: url.toString(), SVC_TEST_PG_SCHEMA: schema },
    async cpu() {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        const { rows } = await client.query<{ pid: number }>(
          `select pid from pg_stat_activity where application_name = $1 or backend_type = 'walwriter'`,
          [schema],
        );
        for (const { pid } of rows) seen.set(pid, Math.max(seen.get(pid) ?? 0, cpuOf(pid)));
        // Backends that ended keep the CPU they were last seen with.
        for (const pid of seen.keys()) seen.set(pid, Math.max(seen.get(pid)!, cpuOf(pid)));
        return [...seen.values()].reduce((a, b) => a + b, 0);
      } finally {
        await client.end();
      }
    },
    drop: () => dropSchema(databaseUrl, schema),
  };
}

/**
 * Fills the outbox with `total` events (ROOMS rooms) through svc.events on a node whose worker is
 * off, in batches of ENQUEUE_BATCH (svc.events.emitMany), after SINGLE_EMITS sequential single
 * emits to a second project (their rate is reported too; their deliveries are not drained).
 */
async function fill(env: Record<string, string>, urls: string[], total: number) {
  const config = loadConfig({
    LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP: 'false',
    SVC_MEDIA: 'off',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    ...env,
    SVC_WEBHOOK_WORKER: 'false',
  });
  const app = await buildApp({
    config,
    adminToken: 'bench',
    secret: 'bench',
    pgSchema: env.SVC_TEST_PG_SCHEMA,
  });
  await app.ready();
  try {
    const single = await app.svc.projects.create({ name: 'single', webhooksEnabled: true });
    const singleEndpoint = await app.svc.webhooks!.endpoints.create(single.id, { url: urls[0] });
    let started = performance.now();
    for (let n = 0; n < SINGLE_EMITS; n++) {
      await app.svc.events.emit({
        projectId: single.id,
        type: 'participant.joined',
        data: { n, room: `r${n % ROOMS}` },
        orderingKey: `room:${single.id}:r${n % ROOMS}`,
        occurredAtMs: Date.now(),
      });
    }
    const singlePerSecond = (SINGLE_EMITS / (performance.now() - started)) * 1000;
    // Those are not delivered (deleted with their endpoint): the drain is the batched ones.
    await app.svc.webhooks!.endpoints.delete(single.id, singleEndpoint.id);
    const project = await app.svc.projects.create({ name: 'bench', webhooksEnabled: true });
    for (const url of urls) await app.svc.webhooks!.endpoints.create(project.id, { url });
    started = performance.now();
    for (let from = 0; from < total; from += ENQUEUE_BATCH) {
      const batch = [];
      for (let n = from; n < Math.min(total, from + ENQUEUE_BATCH); n++) {
        batch.push({
          projectId: project.id,
          type: 'participant.joined',
          data: { n, room: `r${n % ROOMS}` },
          orderingKey: `room:${project.id}:r${n % ROOMS}`,
          occurredAtMs: Date.now(),
        });
      }
      await app.svc.events.emitMany(batch);
    }
    const batchedPerSecond = (total / (performance.now() - started)) * 1000;
    return { singlePerSecond, batchedPerSecond };
  } finally {
    await app.close();
  }
}

async function startNode(env: Record<string, string>, root = ROOT) {
  const child = spawn(
    process.execPath,
    // BENCH_NODE_ARGS: extra flags for the nodes (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
    [
      ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      '--import',
      'tsx',
      'packages/server/test/webhooks/node-process.ts',
    ],
    {
      cwd: root,
      env: {
        ...process.env,
        LOG_LEVEL: 'warn',
        SVC_BOOTSTRAP: 'false',
        SVC_ADMIN_TOKEN: 'bench-admin-token-of-32-characters',
        SVC_SECRET: 'bench-server-secret-of-32-characters',
        SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
        // Each endpoint gets the baseline's concurrency (an endpoint's cap is a share of a node's).
        SVC_WEBHOOK_CONCURRENCY: String(2 * CONCURRENCY),
        SVC_WEBHOOK_ENDPOINT_CONCURRENCY: String(CONCURRENCY),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = readline.createInterface({ input: child.stdout! });
  await new Promise<void>((resolve) => {
    lines.on('line', (line) => {
      if (line.startsWith('listening ')) resolve();
    });
  });
  return {
    cpu: () => cpuOf(child.pid!),
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

interface Result {
  enqueueSingle: number;
  enqueueBatched: number;
  deliveriesPerSecond: number;
  delivered: number;
  /** Deliveries the case asked for (warm-up and measured). */
  expected: number;
  /** CPU µs per delivery: server processes, and the store's backends. */
  serverCpuUs: number;
  storeCpuUs: number;
}

/**
 * Fills a fresh store (endpoints: the receiver, plus `extra`), starts `nodes` worker nodes and
 * times the receiver's EVENTS deliveries per node after WARMUP per node (every node warm, and
 * each doing the same work as a lone node); CPU is read at the first and the last delivery.
 */
async function runCase(
  store: Store,
  nodes: number,
  receiver: CountingReceiver,
  url: string,
  extra: string[] = [],
  root = ROOT,
): Promise<Result> {
  try {
    const warmup = WARMUP * nodes;
    const expected = warmup + EVENTS * nodes;
    const { singlePerSecond, batchedPerSecond } = await fill(store.env, [url, ...extra], expected);
    const before = receiver.count;
    const started: Awaited<ReturnType<typeof startNode>>[] = [];
    const cpus = async (): Promise<[number, number]> => [
      started.reduce((sum, n) => sum + n.cpu(), 0),
      await store.cpu(),
    ];
    // The measured span starts after the warm-up's last delivery once every node is up (a node's
    // start-up and warm-up CPU is not a delivery's): at that delivery, or when the last node is
    // up if the warm-up was over before.
    let mark: { count: number; at: number; cpu: Promise<[number, number]> } | null = null;
    const take = () => ({ count: receiver.count, at: performance.now(), cpu: cpus() });
    const arrived = receiver.expect(expected);
    receiver.onCount = {
      at: before + warmup,
      fn: () => {
        if (started.length === nodes) mark = take();
      },
    };
    await store.cpu();
    started.push(
      ...(await Promise.all(Array.from({ length: nodes }, () => startNode(store.env, root)))),
    );
    if (!mark && receiver.count - before >= Math.max(1, warmup)) mark = take();
    try {
      await arrived;
      const [serverEnd, storeEnd] = await cpus();
      const from = (mark ?? take()) as NonNullable<typeof mark>;
      const [serverStart, storeStart] = await from.cpu;
      const delivered = receiver.count - before;
      const measured = receiver.count - from.count;
      return {
        enqueueSingle: singlePerSecond,
        enqueueBatched: batchedPerSecond,
        deliveriesPerSecond: measured > 0 ? (measured / (receiver.lastAt - from.at)) * 1000 : 0,
        delivered,
        expected,
        serverCpuUs: ((serverEnd - serverStart) * 1e6) / Math.max(1, measured),
        storeCpuUs: ((storeEnd - storeStart) * 1e6) / Math.max(1, measured),
      };
    } finally {
      await Promise.all(started.map((n) => n.stop()));
    }
  } finally {
    await store.drop();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const spread = (xs: number[], digits = 0) =>
  xs.length > 1
    ? `${fmt(median(xs), digits)} (${fmt(Math.min(...xs), digits)}–${fmt(Math.max(...xs), digits)})`
    : fmt(xs[0] ?? 0, digits);

export async function run(): Promise<string> {
  const receiver = new CountingReceiver();
  const url = await receiver.start();
  const slow = await slowReceiver();
  const dead = await deadUrl();
  const databaseUrl = process.env.DATABASE_URL;
  const cases: { name: string; run: (root?: string) => Promise<Result> }[] = [
    { name: 'one node, SQLite', run: (root) => runCase(sqliteStore(), 1, receiver, url, [], root) },
  ];
  if (databaseUrl) {
    cases.push(
      {
        name: 'one node, PostgreSQL',
        run: (root) => runCase(postgresStore(databaseUrl), 1, receiver, url, [], root),
      },
      {
        name: 'two nodes (processes), PostgreSQL',
        run: (root) => runCase(postgresStore(databaseUrl), 2, receiver, url, [], root),
      },
      {
        name: 'one node, PostgreSQL: healthy endpoint beside a dead one (connection refused)',
        run: (root) => runCase(postgresStore(databaseUrl), 1, receiver, url, [dead], root),
      },
      {
        name: 'one node, PostgreSQL: healthy endpoint beside a slow one (answers after 10 s)',
        run: (root) => runCase(postgresStore(databaseUrl), 1, receiver, url, [slow.url], root),
      },
    );
  }
  // BENCH_WEBHOOK_CASES=<regular expression>: only the cases it matches (no gate table then).
  const only = process.env.BENCH_WEBHOOK_CASES;
  const all = cases.length;
  if (only) cases.splice(0, all, ...cases.filter((c) => new RegExp(only).test(c.name)));
  // BENCH_WEBHOOK_AB=<another checkout>: each case runs a second time per round with nodes from
  // that checkout, on extra rows, for an A/B comparison under the same load. This checkout fills
  // the store, so both must have the same migrations (a node refuses a schema with one it lacks).
  const other = process.env.BENCH_WEBHOOK_AB;
  if (other) {
    for (const c of [...cases]) {
      cases.push({ name: `${c.name} [B]`, run: () => c.run(other) });
    }
  }
  const results = new Map<string, Result[]>(cases.map((c) => [c.name, []]));
  const bases: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      bases.push(await baseline(url, receiver));
      for (const c of cases) {
        process.stderr.write(`webhooks: round ${round + 1}/${ROUNDS}: ${c.name}\n`);
        results.get(c.name)!.push(await c.run());
      }
    }
  } finally {
    receiver.close();
    slow.close();
  }
  const rows = [`| baseline: plain keep-alive POSTs | — | — | ${spread(bases)} | 1.00 | — | — |`];
  const ratio = (name: string) => {
    const rs = results.get(name) ?? [];
    return rs.map((r, i) => r.deliveriesPerSecond / bases[i]);
  };
  for (const c of cases) {
    const rs = results.get(c.name)!;
    const short = rs.filter((r) => r.delivered < r.expected).length;
    rows.push(
      `| ${c.name} | ${spread(rs.map((r) => r.enqueueSingle))} | ${spread(rs.map((r) => r.enqueueBatched))} | ${spread(rs.map((r) => r.deliveriesPerSecond))}${short ? ` (${short} round(s) cut at 20 s)` : ''} | **${spread(ratio(c.name), 2)}** | ${spread(rs.map((r) => r.serverCpuUs))} | ${c.name.includes('SQLite') ? '—' : spread(rs.map((r) => r.storeCpuUs))} |`,
    );
  }
  const perDelivery = (name: string) =>
    median((results.get(name) ?? []).map((r) => r.serverCpuUs + r.storeCpuUs));
  const one = 'one node, PostgreSQL';
  const two = 'two nodes (processes), PostgreSQL';
  const alone = results.get(one)?.map((r) => r.deliveriesPerSecond) ?? [];
  const withDead = results.get(cases[3]?.name ?? '')?.map((r) => r.deliveriesPerSecond) ?? [];
  const withSlow = results.get(cases[4]?.name ?? '')?.map((r) => r.deliveriesPerSecond) ?? [];
  const gates =
    databaseUrl && !only
      ? [
          '',
          '| gate | measured (median of rounds) | target |',
          '|---|---|---|',
          `| one node, PostgreSQL vs baseline | ${fmtRatio(median(ratio(one)), 0.5)} | ≥ 0.5 ${median(ratio(one)) >= 0.5 ? '✅' : '❌'} |`,
          `| one node, SQLite vs baseline | ${fmtRatio(median(ratio('one node, SQLite')), 0.6)} | ≥ 0.6 ${median(ratio('one node, SQLite')) >= 0.6 ? '✅' : '❌'} |`,
          `| enqueue in batches of ${ENQUEUE_BATCH}, PostgreSQL (events/s) | ${fmt(median(results.get(one)!.map((r) => r.enqueueBatched)))} | ≥ 5,000 ${median(results.get(one)!.map((r) => r.enqueueBatched)) >= 5000 ? '✅' : '❌'} |`,
          `| two nodes / one node, deliveries/s | ${fmtRatio(median(results.get(two)!.map((r) => r.deliveriesPerSecond)) / median(alone), 1)} | ≥ 1 ${median(results.get(two)!.map((r) => r.deliveriesPerSecond)) >= median(alone) ? '✅' : '❌'} |`,
          `| two nodes / one node, CPU per delivery (servers + PostgreSQL backends) | ${fmtRatio(perDelivery(two) / perDelivery(one), 1.2)} (${fmt(perDelivery(two))} / ${fmt(perDelivery(one))} µs) | ≤ 1.2 ${perDelivery(two) / perDelivery(one) <= 1.2 ? '✅' : '❌'} |`,
          `| healthy endpoint beside a dead one / alone | ${fmtRatio(median(withDead) / median(alone), 0.8)} | ≥ 0.8 ${median(withDead) / median(alone) >= 0.8 ? '✅' : '❌'} |`,
          `| healthy endpoint beside a slow one / alone | ${fmtRatio(median(withSlow) / median(alone), 0.8)} | (≥ 0.8) ${median(withSlow) / median(alone) >= 0.8 ? '✅' : '❌'} |`,
        ]
      : [];
  return [
    '## Webhooks: deliveries per second to a local receiver answering 200',
    '',
    `Each case fills a fresh outbox with ${fmt(WARMUP + EVENTS)} events per node over ${ROOMS} rooms (ordering keys) from a node whose worker is off, in batches of ${ENQUEUE_BATCH} (\`svc.events.emitMany\`, "batched enqueue/s"; before them ${SINGLE_EMITS} sequential \`svc.events.emit\` calls, each awaited, "single enqueue/s"); then worker node(s), child processes, drain it: at most ${CONCURRENCY} attempts in flight per endpoint (${2 * CONCURRENCY} per node), each signed and recorded. Baseline: plain keep-alive POSTs of the same body with the same concurrency from the bench process. Both sides are measured warm: the baseline's client sends ${fmt(WARMUP)} requests before its timed ${fmt(EVENTS)}, and each drain is timed from the healthy receiver's ${fmt(WARMUP)}-th delivery per node once every node is up (start-up and warm-up excluded: two nodes share the deliveries, and each must be as warm as a lone node) to its last (${fmt(EVENTS)} deliveries per node), cut at 20 s after the first. CPU per delivery over the same span: the server processes' (/proc), and PostgreSQL's (the bench's backends, named by application_name, plus the WAL writer, which other tenants share). ${ROUNDS} rounds, the cases taking turns; median (min–max).`,
    '',
    '| case | single enqueue/s | batched enqueue/s | deliveries/s | vs baseline | server CPU µs/delivery | PostgreSQL CPU µs/delivery |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    ...gates,
  ].join('\n');
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { Sealer } from '../../src/sealing.ts';
import { cachingStatements, SQLITE_STATEMENT_CACHE } from '../../src/storage/db.ts';
import { EndpointCache, TARGET_TTL_MS } from '../../src/webhooks/endpoint-cache.ts';
import { WebhookSender } from '../../src/webhooks/sender.ts';
import { newWebhookSecret, signWebhook } from '../../src/webhooks/signing.ts';
import { checkTarget, type LookupAll } from '../../src/webhooks/ssrf.ts';
import { DeliveryWorker, type WorkerOptions } from '../../src/webhooks/worker.ts';
import { Receiver } from './receiver.ts';

const PURPOSE = 'webhooks:endpoint-secrets';

describe('webhooks: what the delivery hot path keeps between attempts', () => {
  test('an endpoint’s keys are opened once, and again when its stored secrets change', () => {
    const sealer = new Sealer('hot-path-secret');
    let opened = 0;
    const open = sealer.open.bind(sealer);
    sealer.open = (...args: Parameters<Sealer['open']>) => {
      opened++;
      return open(...args);
    };
    const cache = new EndpointCache(sealer, true);
    const first = newWebhookSecret();
    const second = newWebhookSecret();
    const endpoint = {
      endpoint_id: 'whe_1',
      secret: sealer.seal(PURPOSE, first, 'whe_1'),
      previous_secret: null,
      previous_secret_expires_at: null,
    };
    const now = Date.now();
    const sign = (keys: Buffer[]) => keys.map((k) => signWebhook(k, 'evt_1', 1, '{}'));
    assert.deepEqual(sign(cache.signingKeys(endpoint, now)), [
      signWebhook(first, 'evt_1', 1, '{}'),
    ]);
    cache.signingKeys(endpoint, now);
    assert.equal(opened, 1, 'opened once for two attempts');

    // A rotation: the new secret signs, and the previous one too until it expires.
    const later = new Date(Date.now() + 60_000).toISOString();
    const rotated = {
      ...endpoint,
      secret: sealer.seal(PURPOSE, second, 'whe_1'),
      previous_secret: endpoint.secret,
      previous_secret_expires_at: later,
    };
    assert.deepEqual(sign(cache.signingKeys(rotated, now)), [
      signWebhook(second, 'evt_1', 1, '{}'),
      signWebhook(first, 'evt_1', 1, '{}'),
    ]);
    assert.equal(opened, 3);
    const afterExpiry = Date.now() + 120_000;
    assert.deepEqual(sign(cache.signingKeys(rotated, afterExpiry)), [
      signWebhook(second, 'evt_1', 1, '{}'),
    ]);
    assert.equal(opened, 3);
  });

  test('a checked target is reused for TARGET_TTL_MS, then its name is resolved and checked again', async () => {
    const answers = ['93.184.215.14', '127.0.0.1'];
    let lookups = 0;
    const lookup: LookupAll = async () => [{ address: answers[lookups++]!, family: 4 }];
    const cache = new EndpointCache(new Sealer('x'), false, lookup);
    const url = 'https://hooks.example.com/in';
    const first = await cache.target(url, 1000);
    assert.ok(first.ok && first.target.address === '93.184.215.14');
    assert.equal(await cache.target(url, 1000 + TARGET_TTL_MS - 1), first);
    assert.equal(lookups, 1);
    // The name now resolves to loopback: refused, as checkTarget itself refuses it.
    const second = await cache.target(url, 1000 + TARGET_TTL_MS);
    assert.equal(lookups, 2);
    assert.equal(second.ok, false);
    assert.deepEqual(
      second,
      await checkTarget(new URL(url), false, async () => [{ address: '127.0.0.1', family: 4 }]),
    );
    const invalid = await cache.target('ftp://x/y', 0);
    assert.equal(invalid.ok, false);
  });

  test('attempts past the timeout end together under one timer, each with its own error', async () => {
    const receiver = await Receiver.start(() => ({ status: 0, hold: true }));
    const sender = new WebhookSender();
    try {
      const check = await checkTarget(new URL(receiver.url), true);
      assert.ok(check.ok);
      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: 5 }, () =>
          sender.send({
            target: check.target,
            headers: { 'webhook-id': 'evt_t' },
            body: '{}',
            timeoutMs: 300,
            nowMs: Date.now(),
          }),
        ),
      );
      const elapsed = performance.now() - started;
      for (const r of results) {
        assert.equal(r.statusCode, undefined);
        assert.equal(r.error, 'timed out after 300 ms');
        assert.ok(r.latencyMs >= 300, `latency ${r.latencyMs}`);
      }
      assert.ok(elapsed < 2000, `all ended by ${elapsed} ms`);
      assert.equal(receiver.requests.length, 5);
    } finally {
      sender.close();
      await receiver.close();
    }
  });

  test('a refused connection is an error in words, and the next attempt to a live one works', async () => {
    const receiver = await Receiver.start(() => ({ status: 201, body: 'x'.repeat(5000) }));
    const sender = new WebhookSender();
    try {
      const dead = await checkTarget(new URL('http://127.0.0.1:1/hook'), true);
      assert.ok(dead.ok);
      const refused = await sender.send({
        target: dead.target,
        headers: {},
        body: '{}',
        timeoutMs: 5000,
        nowMs: Date.now(),
      });
      assert.match(refused.error ?? '', /ECONNREFUSED/);
      const live = await checkTarget(new URL(receiver.url), true);
      assert.ok(live.ok);
      const answered = await sender.send({
        target: live.target,
        headers: {},
        body: '{}',
        timeoutMs: 5000,
        nowMs: Date.now(),
      });
      assert.equal(answered.statusCode, 201);
      assert.equal(answered.body, 'x'.repeat(2048), 'read up to the limit');
    } finally {
      sender.close();
      await receiver.close();
    }
  });

  test('a NUL in an answer is kept as U+FFFD (PostgreSQL text cannot hold it)', async () => {
    const receiver = await Receiver.start(() => ({ status: 500, body: 'a\0b' }));
    const sender = new WebhookSender();
    try {
      const check = await checkTarget(new URL(receiver.url), true);
      assert.ok(check.ok);
      const r = await sender.send({
        target: check.target,
        headers: {},
        body: '{}',
        timeoutMs: 5000,
        nowMs: Date.now(),
      });
      assert.equal(r.statusCode, 500);
      assert.equal(r.body, 'a\uFFFDb');
    } finally {
      sender.close();
      await receiver.close();
    }
  });

  test('SQLite statements are prepared once per text, at most SQLITE_STATEMENT_CACHE kept', () => {
    const database = new SQLite(':memory:');
    let prepared = 0;
    const prepare = database.prepare.bind(database);
    database.prepare = ((text: string) => {
      prepared++;
      return prepare(text);
    }) as typeof database.prepare;
    const cached = cachingStatements(database);
    const a = cached.prepare('select 1 as one');
    assert.equal(cached.prepare('select 1 as one'), a);
    assert.equal(prepared, 1);
    for (let n = 0; n < SQLITE_STATEMENT_CACHE; n++) cached.prepare(`select ${n + 2} as n`);
    assert.equal(prepared, SQLITE_STATEMENT_CACHE + 1);
    // The least recently used went first: preparing it again is a new statement.
    assert.notEqual(cached.prepare('select 1 as one'), a);
    assert.equal(prepared, SQLITE_STATEMENT_CACHE + 2);
    cached.close();
  });

  test('a claim looks for as many keys as the endpoints can take, not as many as the node has slots', () => {
    // 32 slots, 16 per endpoint (and 8 more claimed ahead).
    const worker = new DeliveryWorker({
      concurrency: 32,
      endpointConcurrency: 16,
      sealer: new Sealer('claims'),
      allowPrivate: true,
    } as WorkerOptions) as unknown as {
      state(id: string): { inFlight: number; queued: number; pausedUntil: number };
      endpointLimits(nowMs: number): {
        excluded: string[];
        caps: Record<string, number>;
        takes: number;
      };
    };
    const now = Date.now();
    // Nothing known: one endpoint's worth, for an endpoint this node has not seen yet.
    assert.equal(worker.endpointLimits(now).takes, 16);
    // A busy endpoint (16 running, 4 queued) can take 4 more; a paused one none; a full one none.
    Object.assign(worker.state('whe_busy'), { inFlight: 16, queued: 4 });
    Object.assign(worker.state('whe_paused'), { inFlight: 1, pausedUntil: now + 60_000 });
    Object.assign(worker.state('whe_full'), { inFlight: 16, queued: 8 });
    const limits = worker.endpointLimits(now);
    assert.deepEqual(limits.caps, { whe_busy: 4 });
    assert.deepEqual(limits.excluded.sort(), ['whe_full', 'whe_paused']);
    // A key the node could not start is not worth finding: a claim stops after 4 + 16 heads
    // instead of scanning the backlog for the 2 × 32 the node's slots would ask for.
    assert.equal(limits.takes, 20);
  });
});

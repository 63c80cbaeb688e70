import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { CandidateIndex } from '../../src/links/candidates.ts';
import { packRecent } from '../../src/links/recent.mjs';
import { RedisState } from '../../src/state/redis.ts';
import { freshState, LogCapture, REDIS_URL } from '../helpers.ts';

const KINDS = ['memory', ...(REDIS_URL ? ['redis' as const] : [])] as const;
const HOUR = 3_600_000;
const t = Date.parse('2026-06-01T10:00:00.000Z');
const entry = (member: string, ms: number) => ({ key: 'links:fp:k', member, ms, ttlMs: HOUR });
/** A recorder with nothing queued and no candidates of its own (they are in the index). */
const NO_RECORDER = { flush: async () => {}, recall: async () => [] };

for (const kind of KINDS) {
  test(`a node that does not answer in time is left out, and said so (${kind})`, async () => {
    const fresh = freshState(kind);
    const logs = new LogCapture();
    const index = CandidateIndex.of(fresh.state, pino({ level: 'warn' }, logs), 100, 50);
    const detach = await index.attach(NO_RECORDER);
    // A listener that never answers: another node, as far as publish counts.
    const silent = kind === 'redis' ? new RedisState(REDIS_URL!, fresh.prefix) : fresh.state;
    const unsubscribe = await silent.subscribe('links:candidates:ask', () => {});
    try {
      index.remember(packRecent([entry('clk_1 lnk_1', t)]), t);
      assert.deepEqual(await index.recall('links:fp:k', 0, 10), [{ member: 'clk_1 lnk_1', ms: t }]);
      assert.match(logs.text, /some nodes did not answer in time/);
      assert.match(logs.text, /"expected":2,"answered":1/);
      // Once it is gone, nobody is waited for.
      await unsubscribe();
      logs.lines = [];
      assert.equal((await index.recall('links:fp:k', 0, 10)).length, 1);
      assert.equal(logs.text, '');
    } finally {
      await detach();
      if (silent !== fresh.state) await silent.close();
      await fresh.drop();
    }
  });
}

for (const kind of KINDS) {
  test(`malformed questions and answers are logged and ignored (${kind})`, async () => {
    const fresh = freshState(kind);
    const logs = new LogCapture();
    const index = CandidateIndex.of(fresh.state, pino({ level: 'warn' }, logs), 100, 5000);
    const detach = await index.attach(NO_RECORDER);
    try {
      index.remember(packRecent([entry('clk_1 lnk_1', t)]), t);
      const node = (index as unknown as { node: string }).node;
      await fresh.state.publish('links:candidates:ask', 'not json');
      await fresh.state.publish('links:candidates:ask', '{"node":"x","id":1}');
      await fresh.state.publish(`links:candidates:reply:${node}`, 'not json either');
      await fresh.state.publish(`links:candidates:reply:${node}`, '{"id":424242,"found":[]}');
      // Answered in time, by the one node, despite what came before on both channels.
      assert.deepEqual(await index.recall('links:fp:k', 0, 10), [{ member: 'clk_1 lnk_1', ms: t }]);
      assert.match(logs.text, /a question could not be answered/);
      assert.match(logs.text, /an answer that is not JSON was ignored/);
      assert.doesNotMatch(logs.text, /did not answer in time/);
    } finally {
      await detach();
      await fresh.drop();
    }
  });
}

test('a recall merges the nodes’ answers: newest first, a member held twice once, the limit over all', {
  skip: !REDIS_URL && 'needs REDIS_URL',
}, async () => {
  const a = freshState('redis');
  const bState = new RedisState(REDIS_URL!, a.prefix);
  const log = pino({ level: 'silent' });
  const nodeA = CandidateIndex.of(a.state, log);
  const nodeB = CandidateIndex.of(bState, log);
  assert.notEqual(nodeA, nodeB);
  assert.equal(CandidateIndex.of(a.state, log), nodeA, 'one index per node');
  // B's recorder (its writer thread) holds clk_6, and clk_2 again; it is asked after a flush.
  const asked: string[] = [];
  const recorderB = {
    flush: async () => {
      asked.push('flush');
    },
    recall: async (key: string, sinceMs: number) => {
      asked.push('recall');
      return [
        { member: 'clk_6 l', ms: t + 6 },
        { member: 'clk_2 l', ms: t + 2 },
      ].filter((r) => key === 'links:fp:k' && r.ms >= sinceMs);
    },
  };
  const detach = [await nodeA.attach(NO_RECORDER), await nodeB.attach(recorderB)];
  try {
    nodeA.remember(
      packRecent([entry('clk_1 l', t), entry('clk_3 l', t + 3), entry('clk_4 l', t + 4)]),
      t + 4,
    );
    // B holds clk_3 too (both put it back from the log at start).
    nodeB.remember(
      packRecent([entry('clk_2 l', t + 2), entry('clk_3 l', t + 3), entry('clk_5 l', t + 5)]),
      t + 5,
    );
    assert.deepEqual(
      (await nodeB.recall('links:fp:k', t + 2, 10)).map((r) => r.member),
      ['clk_6 l', 'clk_5 l', 'clk_4 l', 'clk_3 l', 'clk_2 l'],
    );
    assert.deepEqual(asked, ['flush', 'recall']);
    assert.deepEqual(await nodeA.recall('links:fp:k', 0, 2), [
      { member: 'clk_6 l', ms: t + 6 },
      { member: 'clk_5 l', ms: t + 5 },
    ]);
    assert.deepEqual(await nodeA.recall('links:fp:other', 0, 2), []);
  } finally {
    for (const d of detach) await d();
    await bState.close();
    await a.drop();
  }
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId } from '../../src/ids.ts';
import { newClickId } from '../../src/links/click-id.ts';

const ULID = /^clk_[0-9ABCDEFGHJKMNPQRSTVWXYZ]{26}$/;

test('click ids are ULIDs: the time part as newId writes it, 80 random bits, never repeated', () => {
  const t0 = Date.parse('2026-11-26T02:00:00.000Z');
  const seen = new Set<string>();
  for (let i = 0; i < 5000; i++) {
    const now = t0 + Math.floor(i / 10);
    const id = newClickId(now);
    assert.match(id, ULID);
    // Same time prefix as the general id generator for the same millisecond.
    assert.equal(id.slice(0, 14), newId('clk', now).slice(0, 14));
    seen.add(id);
  }
  assert.equal(seen.size, 5000);
  // Sortable by time: a later millisecond sorts after.
  assert.ok(newClickId(t0 + 1000) > newClickId(t0));
  // Every random character position takes many values (the bits are not stuck).
  const ids = [...seen];
  for (let p = 14; p < 30; p++) {
    assert.ok(new Set(ids.map((id) => id[p])).size > 20, `position ${p}`);
  }
});

test('every random character of click ids is uniform over the 32 characters (every bit used)', () => {
  const n = 64_000;
  const t0 = Date.parse('2026-11-26T02:00:00.000Z');
  const counts = Array.from({ length: 16 }, () => new Map<string, number>());
  for (let i = 0; i < n; i++) {
    const id = newClickId(t0 + (i >> 8));
    for (let p = 0; p < 16; p++) {
      const c = id[14 + p];
      counts[p].set(c, (counts[p].get(c) ?? 0) + 1);
    }
  }
  for (const [p, count] of counts.entries()) {
    assert.equal(count.size, 32, `position ${14 + p}`);
    // Chi-square with 31 degrees of freedom: above 80 once in about 500,000 uniform draws.
    const chi = [...count.values()].reduce((sum, x) => sum + (x - n / 32) ** 2 / (n / 32), 0);
    assert.ok(chi < 80, `position ${14 + p}: chi-square ${chi.toFixed(1)}`);
  }
});

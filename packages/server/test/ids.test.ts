import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { idTime, newId } from '../src/ids.ts';

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('ids', () => {
  test('a prefix, an underscore and a ULID whose time reads back', () => {
    for (const ms of [0, 1, 1_796_187_303_033, 2 ** 48 - 1]) {
      const id = newId('clk', ms);
      assert.equal(id.slice(0, 4), 'clk_');
      assert.match(id.slice(4), ULID);
      assert.equal(idTime(id), ms);
    }
    assert.equal(newId('clk', 0).slice(4, 14), '0000000000');
    assert.equal(newId('clk', 2 ** 48 - 1).slice(4, 14), '7ZZZZZZZZZ');
    assert.match(newId('verification'), /^verification_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  test('ids sort by time, and no two are alike', () => {
    const ids = Array.from({ length: 20_000 }, (_, i) => newId('x', 1_700_000_000_000 + i));
    assert.deepEqual([...ids].sort(), ids);
    assert.equal(new Set(ids).size, ids.length);
    // The random part uses every digit in every position over many ids (no stuck bits).
    for (let at = 12; at < 28; at++) {
      assert.equal(new Set(ids.map((id) => id[at])).size, 32, `position ${at}`);
    }
  });
});

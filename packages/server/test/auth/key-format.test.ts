import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  displayParts,
  generateKey,
  hashKey,
  isLegacyKey,
  parseKey,
} from '../../src/auth/key-format.ts';

test('generated keys have the documented shape and a valid checksum', () => {
  for (const type of ['client', 'server'] as const) {
    const key = generateKey(type);
    assert.match(key, type === 'client' ? /^svc_pk_[0-9A-Za-z]{49}$/ : /^svc_sk_[0-9A-Za-z]{49}$/);
    assert.deepEqual(parseKey(key), { ok: true, type });
  }
});

test('a key with one changed character fails its checksum', () => {
  const key = generateKey('client');
  const i = 20;
  const changed = key.slice(0, i) + (key[i] === 'a' ? 'b' : 'a') + key.slice(i + 1);
  assert.deepEqual(parseKey(changed), { ok: false });
  assert.deepEqual(parseKey(`${key.slice(0, -1)}${key.endsWith('0') ? '1' : '0'}`), { ok: false });
});

test('wrong prefixes and lengths are rejected', () => {
  const key = generateKey('server');
  for (const bad of [
    '',
    'svc_',
    'sk_live_abc',
    key.slice(0, -1),
    `${key}x`,
    `svc_pk_${'a'.repeat(49)}`,
  ]) {
    assert.equal(parseKey(bad).ok, false, bad);
  }
});

test('legacy keys are svc_ without pk_/sk_ and carry no checksum', () => {
  assert.deepEqual(parseKey('svc_legacy_0123456789abcdef'), { ok: true, type: 'legacy' });
  assert.equal(isLegacyKey('svc_pk_0123456789abcdef'), false);
  assert.equal(isLegacyKey('svc_shortkey'), true);
  assert.equal(
    parseKey(generateKey('server').replace('svc_sk_', 'svc_xx_')).ok,
    true,
    'other svc_ keys are legacy',
  );
  assert.equal(isLegacyKey('svc_x'), false);
});

test('hash and display parts never expose the secret part', () => {
  const key = generateKey('client');
  assert.match(hashKey(key), /^[0-9a-f]{64}$/);
  const { prefix, last4 } = displayParts(key);
  assert.equal(prefix, key.slice(0, 11));
  assert.equal(last4, key.slice(-4));
});

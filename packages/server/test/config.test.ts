import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';

test('the deferred-link candidate bound has a default, is read from the environment and checked', () => {
  assert.equal(loadConfig({}).linksMaxCandidates, 1_000_000);
  assert.equal(loadConfig({ SVC_LINKS_MAX_CANDIDATES: '20000' }).linksMaxCandidates, 20_000);
  for (const bad of ['10', '1e99', '2.5', 'many', '-1']) {
    assert.throws(
      () => loadConfig({ SVC_LINKS_MAX_CANDIDATES: bad }),
      (err: Error) => err instanceof ConfigError && /SVC_LINKS_MAX_CANDIDATES/.test(err.message),
      bad,
    );
  }
});

// The packed packages work for another project: scripts/pack-check.mjs installs the tarballs in a
// clean folder, starts the server with `npx svc-server`, and calls it with @svc/server-sdk and
// @svc/client from Node and with @svc/client's browser build from headless Chromium.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(import.meta.dirname, '../../..');

test('the packed tarballs install and work from a clean folder', { timeout: 600_000 }, () => {
  const run = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'pack-check.mjs')], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
    // spawnSync blocks the test runner's own timeout: bound the check here.
    timeout: 540_000,
    killSignal: 'SIGKILL',
  });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  assert.match(run.stdout, /pack-check: ok/);
});

// The OpenAPI document passes Redocly's recommended rules (redocly.yaml) with no error and no
// warning, so that generators and validating proxies can trust it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startTestServer, type TestServer } from '../helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../../../..');
let s: TestServer;
before(async () => {
  s = await startTestServer({ name: 'sqlite+memory', db: 'sqlite', state: 'memory' });
});
after(() => s.close());

test('redocly lint finds no error and no warning in /openapi.json', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-openapi-'));
  const file = path.join(dir, 'openapi.json');
  fs.writeFileSync(file, (await s.app.inject({ url: '/openapi.json' })).body);
  const cli = path.join(ROOT, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');
  const run = spawnSync(
    process.execPath,
    [cli, 'lint', file, '--config', path.join(ROOT, 'redocly.yaml'), '--format', 'summary'],
    { encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off', NO_COLOR: '1' } },
  );
  fs.rmSync(dir, { recursive: true, force: true });
  const output = `${run.stdout}${run.stderr}`;
  assert.equal(run.status, 0, output);
  assert.doesNotMatch(output, /^(warning|error) /m, output);
});

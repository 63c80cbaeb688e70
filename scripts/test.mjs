// Runs every packages/*/test/**/*.test.ts with node's test runner (Node 20 has no glob support).
// Extra arguments are passed on (e.g. a path filter: `npm test -- verify`).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const files = [];
for (const pkg of fs.readdirSync(path.join(root, 'packages'))) {
  const dir = path.join(root, 'packages', pkg, 'test');
  if (!fs.existsSync(dir)) continue;
  for (const entry of fs.readdirSync(dir, { recursive: true })) {
    const file = path.join(dir, String(entry));
    // Filters match the path from the repository root (a checkout's own path may contain them).
    if (file.endsWith('.test.ts') && filters.every((f) => path.relative(root, file).includes(f)))
      files.push(path.relative(root, file));
  }
}
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
files.sort();
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', ...flags, ...files],
  { cwd: root, stdio: 'inherit' },
);
process.exit(result.status ?? 1);

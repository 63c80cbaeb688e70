// Builds every package to JavaScript with type declarations (dist/), in dependency order, and the
// browser bundle of @svc/client. Run by `npm install` (prepare) and `npm run build`.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
for (const pkg of ['protocol', 'client', 'server', 'server-sdk']) {
  const dir = path.join(root, 'packages', pkg);
  fs.rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
    cwd: dir,
    stdio: 'inherit',
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

// One ESM file a page loads as is (<script type="module">): @svc/client with @svc/protocol and
// TypeBox inside; `ws` is left out by the client's `browser` field (browsers have WebSocket).
const out = path.join(root, 'packages', 'client', 'dist', 'browser', 'svc-client.js');
await build({
  entryPoints: [path.join(root, 'packages', 'client', 'dist', 'index.js')],
  outfile: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  logLevel: 'warning',
});
const bytes = fs.statSync(out).size;
console.log(
  `@svc/client browser bundle: ${(bytes / 1024).toFixed(1)} KiB (${path.relative(root, out)})`,
);

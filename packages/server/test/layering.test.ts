import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

// The server's layering (ARCHITECTURE.md): platform areas know no product, a product knows no
// other product, and nothing but the composition root (app.ts, areas.ts, main.ts, cli.ts) imports
// the composition root. The other files at the top of src/ (config.ts, platform.ts, clock.ts,
// env.ts, events.ts, ids.ts, sealing.ts, secret.ts, unavailable.ts) are platform modules.

const SRC = path.resolve(import.meta.dirname, '../src');

/** Platform areas: what every product builds on ('' is the platform modules at the top of src/). */
const PLATFORM = new Set(['', 'admin', 'auth', 'http', 'state', 'storage', 'tokens']);
/** The composition root: the files that build the server out of every area. */
const ROOT = new Set(['app.ts', 'areas.ts', 'main.ts', 'cli.ts']);
/** Products, by folder. Media and recordings are parts of the Realtime product. */
const PRODUCT_OF: Record<string, string> = {
  links: 'links',
  verify: 'verify',
  webhooks: 'webhooks',
  realtime: 'realtime',
  media: 'realtime',
  recordings: 'realtime',
};

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return filesUnder(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

/** The top folder of src/ a file is in ('' for the platform modules at the top, 'root' for the root). */
function areaOf(file: string) {
  const rel = path.relative(SRC, file).split(path.sep);
  if (rel.length > 1) return rel[0]!;
  return ROOT.has(rel[0]!) ? 'root' : '';
}

/** Relative imports of a file (static and dynamic, types included), resolved to files. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const specs = [
    ...text.matchAll(/\bfrom\s+'(\.[^']+)'/g),
    ...text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g),
    ...text.matchAll(/\bdeclare module\s+'(\.[^']+)'/g),
  ].map((m) => m[1]!);
  return specs.map((s) => path.resolve(path.dirname(file), s));
}

function violations() {
  const found: string[] = [];
  for (const file of filesUnder(SRC)) {
    const from = areaOf(file);
    for (const target of importsOf(file)) {
      if (!target.startsWith(SRC)) continue;
      const to = areaOf(target);
      if (to === from) continue;
      const where = `${path.relative(SRC, file)} → ${path.relative(SRC, target)}`;
      // A product's part declaring its tables on storage's Database type is the intended way in.
      if (to === 'storage' && path.basename(target) === 'schema.ts') continue;
      if (from !== 'root' && to === 'root') {
        found.push(`${where}: an area imports the composition root`);
      } else if (PLATFORM.has(from) && PRODUCT_OF[to]) {
        found.push(`${where}: a platform area imports a product`);
      } else if (PRODUCT_OF[from] && PRODUCT_OF[to] && PRODUCT_OF[from] !== PRODUCT_OF[to]) {
        found.push(`${where}: a product imports another product`);
      }
    }
  }
  return found;
}

test('platform areas import no product, products import no other product, only the root imports the root', () => {
  assert.deepEqual(violations(), []);
});

test('the checker sees imports: a known import is found', () => {
  // app.ts imports the links plugin; if the parsing broke, the test above would pass vacuously.
  const app = importsOf(path.join(SRC, 'app.ts')).map((t) => path.relative(SRC, t));
  assert.ok(app.includes(path.join('links', 'plugin.ts')), app.join(', '));
});

// Links is kept plain: a size budget that machinery added only for speed would break.
test('Links stays under 2,000 lines', () => {
  const lines = filesUnder(path.join(SRC, 'links')).reduce(
    (n, file) => n + fs.readFileSync(file, 'utf8').split('\n').length - 1,
    0,
  );
  assert.ok(lines < 2000, `packages/server/src/links has ${lines} lines`);
});

// Runs every packages/*/test/**/*.test.ts with node's test runner (Node 20 has no glob support),
// then the Android library's Maven build and JUnit tests (android/), which start the real server.
// Extra arguments are passed on (e.g. a path filter: `npm test -- verify`); with a filter the Maven
// build runs only when the filter is `android` (`npm test -- android` runs the Maven build alone).
// SVC_SKIP_ANDROID=1 skips the Maven build (machines without a JDK 17+ and Maven).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const androidOnly = filters.length === 1 && filters[0] === 'android';
const runAndroid =
  fs.existsSync(path.join(root, 'android', 'pom.xml')) &&
  process.env.SVC_SKIP_ANDROID !== '1' &&
  (filters.length === 0 || androidOnly);

const files = [];
for (const pkg of androidOnly ? [] : fs.readdirSync(path.join(root, 'packages'))) {
  const dir = path.join(root, 'packages', pkg, 'test');
  if (!fs.existsSync(dir)) continue;
  for (const entry of fs.readdirSync(dir, { recursive: true })) {
    const file = path.join(dir, String(entry));
    // Filters match the path from the repository root (a checkout's own path may contain them).
    if (file.endsWith('.test.ts') && filters.every((f) => path.relative(root, file).includes(f)))
      files.push(path.relative(root, file));
  }
}
if (files.length === 0 && !androidOnly) {
  console.error('no test files found');
  process.exit(1);
}
files.sort();
// Tests that start the server as users do (`npm start`, the packed tarballs) need a fresh build.
const built = spawnSync(process.execPath, [path.join(root, 'scripts', 'build.mjs')], {
  cwd: root,
  stdio: 'inherit',
});
if (built.status !== 0) process.exit(built.status ?? 1);

// Tests run the TypeScript sources: the `svc-source` condition makes @svc/* resolve to src/
// (in every child process too, through NODE_OPTIONS).
const env = {
  // Server processes the tests start: a loaded machine may stall a healthy Redis call past the
  // 1 s default (the outage tests set their own deadlines).
  SVC_STATE_TIMEOUT_MS: '5000',
  ...process.env,
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --conditions=svc-source`.trim(),
};
if (files.length > 0) {
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-concurrency=2', ...flags, ...files],
    { cwd: root, stdio: 'inherit', env },
  );
  if (result.status !== 0) process.exit(result.status ?? 1);
}

if (runAndroid) {
  // verify = compile, JUnit 5 + Robolectric tests against the real server, ABI dump check, AAR + D8
  // check, ktlint. No Kotlin daemon: nothing outlives the build.
  console.log('\n# android: mvn verify (Kotlin library, JUnit against the real server)');
  const mvn = spawnSync(
    'mvn',
    ['-B', '-q', '-Dkotlin.compiler.daemon=false', '-f', 'android/pom.xml', 'verify'],
    { cwd: root, stdio: 'inherit', env },
  );
  if (mvn.error) {
    console.error(
      `android: cannot run mvn (${mvn.error.message}); install a JDK 17+ and Maven, or set SVC_SKIP_ANDROID=1`,
    );
    process.exit(1);
  }
  if (mvn.status !== 0) process.exit(mvn.status ?? 1);
  console.log('# android: ok');
}

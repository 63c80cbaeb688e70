// Installs the packed packages in a clean folder, as another project would, and uses them:
// `npx svc-server` starts the server, @svc/server-sdk and @svc/client call it from Node, and a
// page in headless Chromium (another origin) loads @svc/client's browser build and joins a room.
// Exits 0 when everything worked. Run by npm test (packages/server/test/packaging.test.ts).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-pack-'));
const app = path.join(work, 'app');
fs.mkdirSync(app);
const log = (line) => console.log(`pack-check: ${line}`);

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

const freePort = () =>
  new Promise((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });

let server;
let pageServer;
let context;
try {
  const packages = ['protocol', 'client', 'server', 'server-sdk'];
  const packed = JSON.parse(
    run(
      'npm',
      ['pack', '--json', '--pack-destination', work, ...packages.map((p) => `-w=packages/${p}`)],
      root,
    ),
  );
  const tarballs = packed.map((p) => path.join(work, p.filename));
  log(
    `packed ${packed.map((p) => `${p.filename} (${(p.size / 1024).toFixed(0)} KiB)`).join(', ')}`,
  );
  fs.writeFileSync(
    path.join(app, 'package.json'),
    JSON.stringify({
      name: 'svc-pack-check',
      private: true,
      type: 'module',
      allowScripts: { 'better-sqlite3': true },
    }),
  );
  run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', ...tarballs], app);
  log('installed the tarballs in a clean folder');

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  // Its own process group: npx runs the server as a grandchild, and stopping must reach it.
  server = spawn('npx', ['--no-install', 'svc-server'], {
    cwd: app,
    detached: true,
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: path.join(work, 'data'),
      SVC_ADMIN_TOKEN: adminToken,
      SVC_BOOTSTRAP: 'false',
      LOG_LEVEL: 'warn',
      // The embedded default (SQLite, in-process state), without a Janus of its own: other tests
      // may run one at the same time.
      DATABASE_URL: '',
      REDIS_URL: '',
      SVC_MEDIA: 'off',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let serverOutput = '';
  server.stdout.on('data', (d) => (serverOutput += d));
  server.stderr.on('data', (d) => (serverOutput += d));
  for (let i = 0; ; i++) {
    const ready = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (server.exitCode !== null || i > 300)
      throw new Error(`svc-server did not start: ${serverOutput}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`npx svc-server answers at ${base}`);

  const admin = async (method, url, body) => {
    const res = await fetch(`${base}/v1/admin${url}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: body && JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const project = await admin('POST', '/projects', { name: 'pack-check' });
  const serverKey = (await admin('POST', `/projects/${project.id}/keys`, { type: 'server' })).key;
  const clientKey = (await admin('POST', `/projects/${project.id}/keys`, { type: 'client' })).key;

  // Node: the server library and the client, imported by name from the clean folder.
  const nodeCheck = `
    import { SvcServer } from '@svc/server-sdk';
    import { SvcClient } from '@svc/client';
    const [base, projectId, serverKey, clientKey] = process.argv.slice(2);
    const svc = new SvcServer({ baseUrl: base, projectId, apiKey: serverKey });
    await svc.rooms.create({ roomName: 'pack-room', liveType: 'VIDEO_CONFERENCE' });
    const client = new SvcClient({ baseUrl: base, projectId, apiKey: clientKey });
    const room = await client.connect({ roomName: 'pack-room', participant: { userId: 'node-user', name: 'Node' } });
    const seq = await room.sendMessage('from node');
    const { items } = await svc.rooms.participants('pack-room');
    if (!items.some((p) => p.userId === 'node-user')) throw new Error('participant not listed');
    await client.disconnect();
    console.log(JSON.stringify({ seq, participants: items.length }));
  `;
  fs.writeFileSync(path.join(app, 'node-check.mjs'), nodeCheck);
  log(
    `node: ${run(process.execPath, ['node-check.mjs', base, project.id, serverKey, clientKey], app).trim()}`,
  );

  // Browser: a page on another origin loads the browser build as is and joins the room.
  const bundle = path.join(
    app,
    'node_modules',
    '@svc',
    'client',
    'dist',
    'browser',
    'svc-client.js',
  );
  log(`browser build ${(fs.statSync(bundle).size / 1024).toFixed(1)} KiB`);
  const page = `<!doctype html><script type="module">
    import { SvcClient } from './svc-client.js';
    const p = new URLSearchParams(location.search);
    try {
      const client = new SvcClient({ baseUrl: p.get('base'), projectId: p.get('project'), apiKey: p.get('key') });
      const room = await client.connect({ roomName: 'pack-room', participant: { userId: 'browser-user', name: 'Browser' } });
      await room.sendMessage('from the browser');
      window.result = { joined: room.participants.length };
    } catch (e) { window.result = { error: String(e && e.code || e) }; }
  </script>`;
  pageServer = http.createServer((req, res) => {
    if (req.url.startsWith('/svc-client.js')) {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      return res.end(fs.readFileSync(bundle));
    }
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(page);
  });
  await new Promise((r) => pageServer.listen(0, '127.0.0.2', r));
  const pageUrl = `http://127.0.0.2:${pageServer.address().port}/?base=${encodeURIComponent(base)}&project=${project.id}&key=${clientKey}`;
  const { chromium } = await import('playwright-core');
  context = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(work, 'chrome-')), {
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const tab = await context.newPage();
  await tab.goto(pageUrl);
  const result = await tab.waitForFunction(() => window.result, null, { timeout: 30_000 });
  const value = await result.jsonValue();
  if (!value || value.error) throw new Error(`browser: ${JSON.stringify(value)}`);
  log(`browser: ${JSON.stringify(value)}`);
  log('ok');
} catch (err) {
  console.error(`pack-check: FAILED: ${err.stack ?? err}`);
  process.exitCode = 1;
} finally {
  await context?.close();
  pageServer?.close();
  if (server) await stopGroup(server);
  fs.rmSync(work, { recursive: true, force: true });
}
// Nothing of the check may keep this process alive (a stray pipe or timer).
process.exit(process.exitCode ?? 0);

/** SIGTERM to the server's whole process group, SIGKILL after 10 s; resolves when it is gone. */
async function stopGroup(child) {
  const signal = (sig) => {
    try {
      process.kill(-child.pid, sig);
      return true;
    } catch {
      return false; // the group is gone
    }
  };
  if (!signal('SIGTERM')) return;
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 100));
    if (!signal(0)) return;
  }
  signal('SIGKILL');
}

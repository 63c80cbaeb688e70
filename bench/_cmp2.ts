// Scratch: PG+Redis many visitors, bare vs Svc redirect, by client mode.
import { execFileSync } from 'node:child_process';
import { type Measured, median, spinning, startChild } from './lib.ts';
import { measureVisitors } from './visitors.ts';
const ua = process.argv[2] === 'android' ? 'Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36' : 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
const store = process.argv[3] === 'sqlite' ? { DATABASE_URL: '', REDIS_URL: '' } : { DATABASE_URL: process.env.DATABASE_URL!, REDIS_URL: process.env.REDIS_URL! };
const env = { LINKS_BENCH_MODE: 'svc', SVC_STATE_TIMEOUT_MS: '5000', SVC_SECRET: 'bench-secret', SVC_ADMIN_TOKEN: 'bench-admin', SVC_TRUST_PROXY: '127.0.0.1', ...store };
const [bare, svc] = await Promise.all([startChild<{ port: number; path: string }>('bench/links-server.ts', { LINKS_BENCH_MODE: 'bare' }), startChild<{ port: number; path: string }>('bench/links-server.ts', env)]);
const bareUrl = `http://127.0.0.1:${bare.info.port}/l/x`;
const svcUrl = `http://127.0.0.1:${svc.info.port}${svc.info.path}`;
const idle = (on: boolean) => execFileSync('chrt', on ? ['--idle', '-p', '0', String(process.pid)] : ['--other', '-p', '0', String(process.pid)]);
const modes: Record<string, (u: string) => Promise<Measured>> = {
  sleep: (u) => measureVisitors(u, ua, 3),
  spin: (u) => spinning(measureVisitors(u, ua, 3)),
  'spin idle': async (u) => { idle(true); try { return await spinning(measureVisitors(u, ua, 3)); } finally { idle(false); } },
};
for (const u of [bareUrl, svcUrl]) await measureVisitors(u, ua, 5);
const res: Record<string, { b: Measured[]; s: Measured[] }> = {};
for (let r = 0; r < 4; r++) for (const [name, load] of Object.entries(modes)) {
  res[name] ??= { b: [], s: [] };
  res[name].b.push(await load(bareUrl));
  res[name].s.push(await load(svcUrl));
}
for (const [name, { b, s }] of Object.entries(res)) {
  const ratios = s.map((x, i) => x.requestsPerSecond / b[i].requestsPerSecond);
  console.log(name.padEnd(10), 'bare', median(b.map((x) => x.requestsPerSecond)).toFixed(0), `(${median(b.map((x) => x.cpuMicrosPerRequest)).toFixed(0)}µs)`, 'svc', median(s.map((x) => x.requestsPerSecond)).toFixed(0), `(${median(s.map((x) => x.cpuMicrosPerRequest)).toFixed(0)}µs)`, 'ratio', median(ratios).toFixed(2), ratios.map((x) => x.toFixed(2)).join(' '));
}
await Promise.all([bare.stop(), svc.stop()]);

/**
 * `npm run bench`: runs every area's benchmark (each against a baseline measured in the same
 * run) and prints one markdown report; with `--write` it also replaces bench/RESULTS.md.
 * Run on an otherwise idle machine. Pass area names to run only those: `npm run bench -- gate`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const AREAS = [
  'gate',
  'realtime',
  'controller',
  'links',
  'verify',
  'webhooks',
  'media',
  'recordings',
  'android',
];
const args = process.argv.slice(2);
const write = args.includes('--write');
const only = args.filter((a) => !a.startsWith('--'));

/** What every reader of the results should know about the machine they come from. */
const NOISE = `The machine is a shared 2-core VM. The client (autocannon) and the servers share its two cores, so a server's CPU per request and the client's both set the throughput. Other tenants' load, and which VM a run lands on, move absolute numbers a lot: the same bare Fastify route has measured from 15,000 to 52,000 req/s (about 60 to 20 µs of CPU per redirect). Ratios are medians of paired, alternating rounds, and they still move by about ±0.1 between runs. Compare ratios, not absolute numbers, and rerun before trusting a single one.`;

const sections: string[] = [];
for (const area of only.length ? only : AREAS) {
  const file = path.join(import.meta.dirname, `${area}.ts`);
  if (!fs.existsSync(file)) continue;
  process.stderr.write(`bench: ${area}…\n`);
  const mod = (await import(file)) as { run: () => Promise<string> };
  sections.push(await mod.run());
}
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}`;
const report = [
  `# Benchmark results`,
  '',
  `Measured ${new Date().toISOString().slice(0, 10)} on ${machine}.`,
  '',
  NOISE,
  '',
  ...sections.flatMap((s) => [s, '']),
].join('\n');
process.stdout.write(`${report}\n`);
if (write) fs.writeFileSync(path.join(import.meta.dirname, 'RESULTS.md'), report);

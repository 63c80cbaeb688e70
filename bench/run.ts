/**
 * `npm run bench`: runs every area's benchmark (each against a baseline measured in the same
 * run) and prints one markdown report; with `--write` it also puts each area's section into
 * bench/RESULTS.md in place of that area's previous one, so the file keeps one current section
 * per benchmark. Run on an otherwise idle machine. Pass area names to run only those:
 * `npm run bench -- gate`.
 */

import { execFileSync } from 'node:child_process';
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

/** RESULTS.md's opening: what every reader should know about the machines the results come from. */
const HEADER = `# Benchmark results

One section per benchmark, each from its latest run (\`npm run bench -- <area> --write\`), with the machine, the command and the commit it measured.

The machines are shared 2-core VMs. The client (autocannon) and the servers share a VM's two cores, so a server's CPU per request and the client's both set the throughput. Other tenants' load, and which VM a run lands on, move absolute numbers a lot: the same bare Fastify route has measured from 15,000 to 66,000 req/s (about 60 to 14 µs of CPU per redirect). Ratios are medians of paired, alternating rounds, and they still move by about ±0.1 between runs. Compare ratios, not absolute numbers, and rerun before trusting a single one.
`;

const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}`;
const commit = gitHead();
const stores = [process.env.DATABASE_URL && 'DATABASE_URL', process.env.REDIS_URL && 'REDIS_URL']
  .filter(Boolean)
  .join(' and ');

const sections: string[] = [];
const file = path.join(import.meta.dirname, 'RESULTS.md');
let failed = 0;
for (const area of only.length ? only : AREAS) {
  const script = path.join(import.meta.dirname, `${area}.ts`);
  if (!fs.existsSync(script)) continue;
  process.stderr.write(`bench: ${area}…\n`);
  const started = `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  let output: string;
  try {
    const mod = (await import(script)) as { run: () => Promise<string> };
    output = await mod.run();
  } catch (err) {
    // One area failing leaves the others' results standing.
    process.stderr.write(`bench: ${area} failed: ${(err as Error).stack ?? err}\n`);
    failed++;
    continue;
  }
  if (/^Skipped: /m.test(output)) {
    // A skip (no Janus, no browser) leaves the area's last measured section standing.
    process.stderr.write(`bench: ${area} ${output.slice(output.indexOf('Skipped'))}\n`);
    failed++;
    continue;
  }
  const [heading, ...rest] = output.split('\n');
  const how = `\`npm run bench -- ${area}\`${stores ? ` with ${stores} set` : ''}`;
  const section = [
    heading,
    '',
    `Measured ${started} on ${machine}: ${how}, commit ${commit}.`,
    ...rest,
  ];
  sections.push(section.join('\n'));
  // Written as each area finishes, so a later failure or a stop keeps it.
  if (write) {
    const old = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    fs.writeFileSync(file, merged(old, sections.slice(-1)));
    // Tables aligned as the repository's formatter (Biome, `npm run lint`) writes Markdown.
    execFileSync('npx', ['biome', 'format', '--write', file], { cwd: import.meta.dirname });
  }
}
process.stdout.write(`${[HEADER, ...sections.flatMap((s) => [s, ''])].join('\n')}\n`);
if (failed > 0) process.exitCode = 1;

/** The checkout's commit, with `+` when it has uncommitted changes. */
function gitHead() {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: import.meta.dirname, encoding: 'utf8' }).trim();
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain') ? '+' : ''}`;
  } catch {
    return 'unknown';
  }
}

/** `old` (RESULTS.md) with each section replacing the one under the same heading, or added. */
function merged(old: string, fresh: string[]) {
  const parts = old.split(/^(?=## )/m).slice(1);
  for (const section of fresh) {
    const heading = section.slice(0, section.indexOf('\n'));
    const at = parts.findIndex((p) => p.startsWith(`${heading}\n`));
    if (at === -1) parts.push(`${section}\n\n`);
    else parts[at] = `${section}\n\n`;
  }
  return `${HEADER}\n${parts.join('').trimEnd()}\n`;
}

/**
 * `npm run bench`: runs every area's benchmark (each against a baseline measured in the same
 * run) and prints one markdown report; with `--write` it also replaces bench/RESULTS.md.
 * Run on an otherwise idle machine. Pass area names to run only those: `npm run bench -- gate`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const AREAS = ['gate', 'realtime', 'links', 'verify', 'webhooks'];
const args = process.argv.slice(2);
const write = args.includes('--write');
const only = args.filter((a) => !a.startsWith('--'));

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
  ...sections.flatMap((s) => [s, '']),
].join('\n');
process.stdout.write(`${report}\n`);
if (write) fs.writeFileSync(path.join(import.meta.dirname, 'RESULTS.md'), report);

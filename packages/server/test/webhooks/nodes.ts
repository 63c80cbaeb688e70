import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const SCRIPT = 'packages/server/test/webhooks/node-process.ts';

/** A server node running in its own process (see node-process.ts). */
export class NodeProcess {
  readonly acks = new Set<number>();
  port = 0;
  private listeners: (() => void)[] = [];
  private exited: Promise<void>;
  stderr = '';

  private constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  static async start(env: Record<string, string>): Promise<NodeProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'warn', SVC_BOOTSTRAP: 'false', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const node = new NodeProcess(child);
    child.stderr!.on('data', (c: Buffer) => {
      node.stderr += c.toString();
    });
    const lines = readline.createInterface({ input: child.stdout! });
    const listening = new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`node exited (${code}): ${node.stderr}`)));
      lines.on('line', (line) => {
        const [word, value] = line.split(' ');
        if (word === 'listening') {
          node.port = Number(value);
          resolve();
        } else if (word === 'ack') node.acks.add(Number(value));
        for (const l of node.listeners) l();
      });
    });
    await listening;
    return node;
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Resolves once `check()` holds (checked after every line the node prints). */
  until(check: () => boolean): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve) => {
      const l = () => {
        if (!check()) return;
        this.listeners = this.listeners.filter((x) => x !== l);
        resolve();
      };
      this.listeners.push(l);
    });
  }

  async call(method: string, url: string, token: string, body?: unknown): Promise<any> {
    const res = await fetch(`${this.base}${url}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${url} → ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }

  /** SIGKILL: no shutdown code runs. */
  async kill() {
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM: a clean shutdown. */
  async stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    await this.exited;
  }
}

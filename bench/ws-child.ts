import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import readline from 'node:readline';
import type { WebSocket } from 'ws';
import { ROOT } from './lib.ts';

/** A WebSocket server in a child process that answers the bench's commands over IPC. */
export interface WsChild {
  port: number;
  call<T>(msg: Record<string, unknown>): Promise<T>;
  stop(): Promise<void>;
}

/**
 * Starts `script` (realtime-server.ts or realtime-bare.ts) with `--expose-gc` and resolves once
 * it prints `{"port": N}`; other stdout lines (warnings) are passed on to stderr.
 */
export async function startWsChild(
  script: string,
  env: Record<string, string | undefined>,
): Promise<WsChild> {
  const child: ChildProcess = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const lines = readline.createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    lines.on('line', (line) => {
      if (line.startsWith('{"port"')) resolve((JSON.parse(line) as { port: number }).port);
      else process.stderr.write(`${line}\n`);
    });
    child.once('exit', () => reject(new Error(`${script} exited before listening`)));
  });
  let nextId = 1;
  const pending = new Map<number, (v: any) => void>();
  child.on('message', (m: any) => {
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });
  return {
    port,
    call: (msg) =>
      new Promise((resolve) => {
        const id = nextId++;
        pending.set(id, resolve);
        child.send({ ...msg, id });
      }),
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Sends `session.join` on an open Svc socket and resolves at `session.joined`. */
export function joinSession(ws: WebSocket): Promise<void> {
  const joined = new Promise<void>((resolve) => {
    const onMessage = (raw: Buffer) => {
      if (raw.toString().startsWith('{"type":"session.joined"')) {
        ws.off('message', onMessage);
        resolve();
      }
    };
    ws.on('message', onMessage);
  });
  ws.send('{"id":"join","type":"session.join"}');
  return joined;
}

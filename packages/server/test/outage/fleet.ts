import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { type NodeProcess, spawnNode } from '../fixtures/spawn-node.ts';

/** One answer over real HTTP, with how long it took. */
export interface Timed {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
  ms: number;
}

/**
 * One request to a node over real HTTP (no retries, no pooling), with a client-side limit of
 * `limitMs`: a node that does not answer by then fails the test rather than hanging it.
 */
export function request(
  node: NodeProcess,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: unknown; limitMs?: number } = {},
): Promise<Timed> {
  const started = performance.now();
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: node.port,
        method,
        path,
        agent: false,
        headers: {
          ...(payload ? { 'content-type': 'application/json' } : {}),
          ...options.headers,
        },
        timeout: options.limitMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: any = text;
          try {
            body = text ? JSON.parse(text) : null;
          } catch {}
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            ms: performance.now() - started,
          });
        });
      },
    );
    req.on('timeout', () => {
      req.destroy(new Error(`${method} ${path}: no answer within ${options.limitMs ?? 10_000} ms`));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Polls `check` until it returns a value (not undefined), or fails after `ms`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  ms = 10_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${ms} ms${last ? ` (last: ${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Two server processes and one project with its keys, for outage tests. */
export class Fleet {
  readonly adminToken = `admin_${randomBytes(16).toString('hex')}`;
  nodes: NodeProcess[] = [];
  projectId = '';
  serverKey = '';
  clientKey = '';

  async start(env: Record<string, string>) {
    const full = {
      SVC_ADMIN_TOKEN: this.adminToken,
      SVC_SECRET: randomBytes(16).toString('hex'),
      SVC_PUBLIC_URL: 'http://localhost:8080',
      ...env,
    };
    // One first (it migrates), then the other.
    this.nodes.push(await spawnNode(full));
    this.nodes.push(await spawnNode(full));
    const project = await this.admin(this.nodes[0]!, 'POST', '/projects', { name: 'outage' });
    this.projectId = project.id;
    this.serverKey = (
      await this.admin(this.nodes[0]!, 'POST', `/projects/${project.id}/keys`, {
        type: 'server',
      })
    ).key;
    this.clientKey = (
      await this.admin(this.nodes[0]!, 'POST', `/projects/${project.id}/keys`, {
        type: 'client',
      })
    ).key;
  }

  /** An admin call that must succeed. */
  async admin(node: NodeProcess, method: string, path: string, body?: unknown) {
    const res = await this.adminCall(node, method, path, body);
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  adminCall(node: NodeProcess, method: string, path: string, body?: unknown) {
    return request(node, method, `/v1/admin${path}`, {
      headers: { authorization: `Bearer ${this.adminToken}` },
      body,
    });
  }

  /** A keyed call (the server key unless `key` is given). */
  call(node: NodeProcess, method: string, path: string, body?: unknown, key = this.serverKey) {
    return request(node, method, path, {
      headers: { authorization: `Bearer ${key}`, 'x-project-id': this.projectId },
      body,
    });
  }

  /** Fails when a node process has exited. */
  assertAlive() {
    for (const [i, node] of this.nodes.entries()) {
      assert.equal(
        node.child.exitCode,
        null,
        `node ${i} exited (${node.child.exitCode}): ${node.stderr().slice(-2000)}`,
      );
    }
  }

  async stop() {
    for (const [i, node] of this.nodes.entries()) {
      if (node.child.exitCode !== null || process.env.OUTAGE_DEBUG)
        console.log(
          `# node ${i} had exited (${node.child.exitCode}): ${node.stderr().slice(-3000)}`,
        );
    }
    await Promise.allSettled(this.nodes.map((n) => n.stop()));
  }
}

/** Logs the slowest and median of answers' times (a `#` line in the test output). */
export function report(what: string, answers: Timed[]) {
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  const median = ms[Math.floor(ms.length / 2)] ?? 0;
  console.log(
    `# ${what}: ${ms.length} answers, median ${median.toFixed(1)} ms, slowest ${(ms.at(-1) ?? 0).toFixed(1)} ms`,
  );
}

/** Asserts a 503 `service_unavailable` problem with a `Retry-After`. */
export function assertUnavailable(res: Timed, what: string) {
  assert.equal(res.status, 503, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
  assert.equal(res.body.code, 'service_unavailable', what);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, what);
  assert.match(String(res.headers['retry-after']), /^[1-9][0-9]*$/, `${what}: Retry-After`);
}

import net from 'node:net';
import { cpuPerRequest, type Measured, serverCpu } from './lib.ts';

/** Where the visitor's address sits in the request: `2001:db8::` and 8 hex digits. */
const ADDRESS_PREFIX = '2001:db8:0:0:0:0:';
const HEX = '0123456789abcdef';
const BLANK_LINE = Buffer.from('\r\n\r\n');
/** How the servers measured here (Node) write an empty body's length. */
const NO_BODY = Buffer.from('\r\ncontent-length: 0\r\n');
/** Latencies kept for the p99: the first million answers are plenty. */
const MAX_LATENCIES = 1_000_000;

/**
 * Load from many visitors: `connections` keep-alive connections, one request at a time each,
 * every request with its own `X-Forwarded-For` address (a server must trust 127.0.0.1 as its
 * proxy to read it). autocannon sends the same bytes every time, or rebuilds each request in
 * JavaScript when it may vary, which made it the bottleneck (41,000 against 65,000 req/s here).
 * This client writes the next address into the request's bytes in place, so a request costs it
 * one small write and it stays off the server's path. Each connection takes every
 * `connections`-th address of a random start, so no two requests of a run share a visitor until
 * 2^32 requests have gone.
 *
 * Answers must have no body but a `content-length` (redirects do): it counts them by their
 * status line and the blank line after their headers.
 */
export async function measureVisitors(
  url: string,
  userAgent: string,
  seconds: number,
  connections = 50,
): Promise<Measured> {
  const target = new URL(url);
  const head = `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\nConnection: keep-alive\r\nUser-Agent: ${userAgent}\r\nX-Forwarded-For: ${ADDRESS_PREFIX}`;
  const cpu = serverCpu(url);
  const start = Math.floor(Math.random() * 2 ** 32);
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  let total = 0;
  let running = true;

  const connection = (index: number) =>
    new Promise<void>((resolve, reject) => {
      const request = Buffer.from(`${head}0000:0000\r\n\r\n`, 'latin1');
      const at = head.length;
      let visitor = (start + index) >>> 0;
      let sentAt = 0;
      let pending: Buffer | null = null;
      const socket = net.connect({ host: target.hostname, port: Number(target.port) });
      socket.setNoDelay(true);
      const send = () => {
        for (let d = 0, v = visitor; d < 8; d++, v >>>= 4) {
          request[at + 8 - d - (d >= 4 ? 1 : 0)] = HEX.charCodeAt(v & 15);
        }
        visitor = (visitor + connections) >>> 0;
        sentAt = performance.now();
        socket.write(request);
      };
      socket.on('connect', send);
      // Bytes, not strings: the client must cost less than the servers it drives.
      socket.on('data', (chunk: Buffer) => {
        const data = pending ? Buffer.concat([pending, chunk]) : chunk;
        pending = null;
        let from = 0;
        let end = data.indexOf(BLANK_LINE, from);
        if (end === -1) {
          pending = data;
          return;
        }
        while (end !== -1) {
          const status = data.toString('latin1', from + 9, from + 12);
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (latencies.length < MAX_LATENCIES) latencies.push(performance.now() - sentAt);
          total++;
          const length = data.indexOf(NO_BODY, from);
          if (length === -1 || length > end) {
            socket.destroy();
            reject(new Error(`${url}: an answer with a body or without a length`));
            return;
          }
          from = end + 4;
          end = data.indexOf(BLANK_LINE, from);
        }
        if (from < data.length) pending = data.subarray(from);
        if (running) send();
        else socket.end(resolve);
      });
      socket.on('error', reject);
    });

  const before = await cpu();
  const started = performance.now();
  const done = Promise.all(Array.from({ length: connections }, (_, i) => connection(i)));
  const timer = setTimeout(() => {
    running = false;
  }, seconds * 1000);
  await done.finally(() => clearTimeout(timer));
  const elapsed = (performance.now() - started) / 1000;
  const after = await cpu();
  latencies.sort((a, b) => a - b);
  return {
    requestsPerSecond: total / elapsed,
    ...cpuPerRequest(before, after, total),
    p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
    total,
    statuses,
  };
}

import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';
import type { FastifyServerFactory } from 'fastify';
import type { Metrics, RequestSeries } from './metrics.ts';

/** What a fast path answers. */
export interface FastAnswer {
  status: number;
  headers: Record<string, string>;
  body?: string;
}

/** The client as Fastify's `request.ip` and `request.host` would give it (trusted proxies too). */
export interface FastClient {
  ip: string;
  host: string;
}

/**
 * A fast path's handler: the request path after its prefix (query included), the raw request,
 * and the client. It answers synchronously, or returns `undefined` to leave the request to
 * Fastify (something must be loaded first, or the request is not one it knows).
 */
export type FastHandler = (
  rest: string,
  request: IncomingMessage,
  client: FastClient,
) => FastAnswer | undefined;

export interface FastFrontOptions {
  /** `SVC_TRUST_PROXY`: addresses and CIDRs whose X-Forwarded-For / -Host are believed. */
  trustProxy: string[];
  /** The Request-Id for a request (the same function Fastify's `genReqId` uses). */
  requestId: (request: IncomingMessage) => string;
  metrics: Metrics;
  /** Off when requests are logged one by one (debug): every request then goes through Fastify. */
  enabled: boolean;
}

/** Proxies remembered as trusted, at most: more than a deployment has. */
const TRUSTED_REMEMBERED = 256;

/**
 * `proxy-addr`'s trust check for `list`, remembering the addresses it found trusted. Behind a
 * proxy, every request asks about that proxy's address first: parsing it each time cost about
 * half a microsecond per request. Untrusted addresses (clients, many and mostly new) are checked
 * each time and not kept. `proxy-addr`'s compiled checks ignore the hop index, so the answer for
 * an address is always the same.
 */
function rememberTrusted(list: string[]): (address: string, hop: number) => boolean {
  const check = proxyAddr.compile(list);
  const trusted = new Set<string>();
  return (address, hop) => {
    if (trusted.has(address)) return true;
    if (!check(address, hop)) return false;
    if (trusted.size >= TRUSTED_REMEMBERED) trusted.clear();
    trusted.add(address);
    return true;
  };
}

/**
 * The server's front: public GET routes whose answers are usually in memory (a short-link
 * redirect) are answered here, from the raw request, ahead of Fastify's routing, hooks and
 * request/reply objects — Bitly-style edges do the same. What the platform promises for every
 * response still holds: a Request-Id header, the request metrics under the route's pattern, and
 * the client's address as the trusted-proxy rules give it. Anything a fast path declines, and
 * everything once the server is closing, goes to Fastify as usual.
 */
export class FastFront {
  /** Requests answered here rather than by Fastify (tests and benchmarks read it). */
  answered = 0;
  private routes: {
    prefix: string;
    route: string;
    handler: FastHandler;
    /** The route's metric series by status, looked up once each. */
    series: Map<number, RequestSeries>;
  }[] = [];
  private closing = false;
  private trust: ((address: string, hop: number) => boolean) | null;

  constructor(private options: FastFrontOptions) {
    this.trust = options.trustProxy.length > 0 ? rememberTrusted(options.trustProxy) : null;
  }

  /**
   * Answers `GET {prefix}…` with `handler` when it can. `route` is the Fastify route that serves
   * the same requests otherwise: the metrics count both under it.
   */
  get(prefix: string, route: string, handler: FastHandler) {
    this.routes.push({ prefix, route, handler, series: new Map() });
  }

  /** From now on every request goes to Fastify (which answers 503 while closing). */
  close() {
    this.closing = true;
  }

  /** A Fastify `serverFactory`: a plain HTTP server whose requests pass through the front. */
  serverFactory(): FastifyServerFactory {
    return (fastify, options) => {
      const server = http.createServer(options.http ?? {}, (request, response) => {
        // `statusCode` and `statusMessage` live on the response's prototype until written, and
        // which comes first depends on the path: writeHead alone writes the message first, a
        // Fastify route that sets a code writes the code first. Each order is another hidden
        // class for every response, so the code of Node's and Fastify's that reads responses
        // would handle two. Written here first, the status makes one.
        response.statusCode = 200;
        if (!this.tryAnswer(request, response)) fastify(request, response);
      });
      // A socket learns its peer's address (`_peername`) when something first asks for it: the
      // front asks on every request it answers, Fastify's routes only when they read
      // `request.ip`. Asked here for every connection, every socket has the same hidden class,
      // and Node's socket and stream code is optimized for one (one getpeername per
      // connection).
      server.on('connection', (socket: Socket) => {
        void socket.remoteAddress;
      });
      // What Fastify does to the servers it makes itself.
      const o = options as {
        keepAliveTimeout?: number;
        requestTimeout?: number;
        connectionTimeout?: number;
        maxRequestsPerSocket?: number;
      };
      if (o.keepAliveTimeout !== undefined) server.keepAliveTimeout = o.keepAliveTimeout;
      if (o.requestTimeout !== undefined) server.requestTimeout = o.requestTimeout;
      if (o.connectionTimeout !== undefined) server.setTimeout(o.connectionTimeout);
      if (o.maxRequestsPerSocket) server.maxRequestsPerSocket = o.maxRequestsPerSocket;
      return server;
    };
  }

  /** True when a fast path answered. */
  private tryAnswer(request: IncomingMessage, response: ServerResponse): boolean {
    if (this.closing || !this.options.enabled || request.method !== 'GET') return false;
    const url = request.url ?? '';
    for (const route of this.routes) {
      if (!url.startsWith(route.prefix)) continue;
      const started = performance.now();
      const host = this.host(request);
      if (!host) return false;
      let answer: FastAnswer | undefined;
      try {
        answer = route.handler(url.slice(route.prefix.length), request, {
          ip: this.ip(request),
          host,
        });
      } catch {
        // Fastify's route will meet the same problem and answer it as a problem+json.
        return false;
      }
      if (!answer) return false;
      // One writeHead with every header as a flat name/value list and no setHeader before it:
      // Node's fast path, with no header object to build or walk.
      const headers: (string | number)[] = ['request-id', this.options.requestId(request)];
      for (const name in answer.headers) headers.push(name, answer.headers[name]);
      headers.push(
        'content-length',
        answer.body === undefined ? 0 : Buffer.byteLength(answer.body),
      );
      try {
        response.writeHead(answer.status, headers);
      } catch {
        // A header Node refuses (a character a header may not hold): nothing was sent yet, and
        // Fastify's error handling answers it as a problem, where a throw here would end the
        // process. writeHead had set the status and its message ("Found"): the fallback starts
        // from a response as new (a 500 must not go out as "500 Found").
        for (const name of response.getHeaderNames()) response.removeHeader(name);
        response.statusCode = 200;
        response.statusMessage = '';
        return false;
      }
      response.end(answer.body);
      this.answered++;
      let series = route.series.get(answer.status);
      if (series === undefined) {
        series = this.options.metrics.series(route.route, 'GET', answer.status);
        route.series.set(answer.status, series);
      }
      series.observe((performance.now() - started) / 1000);
      return true;
    }
    return false;
  }

  private ip(request: IncomingMessage): string {
    if (this.trust) return proxyAddr(request, this.trust);
    return request.socket.remoteAddress ?? '';
  }

  private host(request: IncomingMessage): string | undefined {
    const forwarded = request.headers['x-forwarded-host'];
    if (forwarded && this.trust?.(request.socket.remoteAddress ?? '', 0)) {
      // As Fastify reads it: the last value of the header.
      const value = Array.isArray(forwarded) ? forwarded[forwarded.length - 1] : forwarded;
      const comma = value.lastIndexOf(',');
      return (comma === -1 ? value : value.slice(comma + 1)).trim();
    }
    return request.headers.host;
  }
}

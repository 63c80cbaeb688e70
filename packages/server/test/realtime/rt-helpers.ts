import type { AddressInfo } from 'node:net';
import { WebSocket } from 'ws';
import {
  type Backend,
  startTestServer,
  type TestServer,
  type TestServerOptions,
} from '../helpers.ts';

/**
 * A `connect` for a test block that keeps its clients, and `terminateAll` to end them before the
 * server closes.
 */
export function trackedConnect(server: () => RealtimeServer) {
  const open: RtClient[] = [];
  const connect = async (room: string, userId: string, extra?: Record<string, unknown>) => {
    const c = await server().connect(room, userId, extra);
    open.push(c);
    return c;
  };
  const terminateAll = () => {
    for (const c of open) c.ws.terminate();
  };
  return { connect, terminateAll };
}

/** Small timers, so grace periods and empty timeouts pass in tests without sleeps. */
export const FAST_ENV: Record<string, string> = {
  SVC_REALTIME_SWEEP_INTERVAL_MS: '20',
  SVC_REALTIME_DEPARTURE_GRACE_MS: '400',
  SVC_REALTIME_EMPTY_TIMEOUT_MS: '60000',
  SVC_CLIENT_KEY_RATE_LIMIT: '100000',
};

export interface RealtimeServer extends TestServer {
  port: number;
  wsBase: string;
  /** Calls the API with the server key (or `key`). */
  api(
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    body?: unknown,
    key?: string,
  ): Promise<{ status: number; body: any }>;
  /** A token for `userId` in `room`. */
  token(room: string, userId: string, extra?: Record<string, unknown>): Promise<any>;
  connect(room: string, userId: string, extra?: Record<string, unknown>): Promise<RtClient>;
}

export async function startRealtimeServer(
  backend: Backend,
  options: TestServerOptions = {},
): Promise<RealtimeServer> {
  const s = await startTestServer(backend, { ...options, env: { ...FAST_ENV, ...options.env } });
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  const port = (s.app.server.address() as AddressInfo).port;
  return withHelpers(s, port);
}

export function withHelpers(s: TestServer, port: number): RealtimeServer {
  const wsBase = `ws://127.0.0.1:${port}/v1/realtime/ws`;
  const api: RealtimeServer['api'] = async (method, url, body, key = s.project.serverKey) => {
    const res = await s.app.inject({
      method,
      url: `/v1${url}`,
      headers: { authorization: `Bearer ${key}`, 'x-project-id': s.project.id },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: res.statusCode, body: res.body ? res.json() : undefined };
  };
  const token: RealtimeServer['token'] = async (room, userId, extra = {}) => {
    const { participant, ...rest } = extra as { participant?: Record<string, unknown> };
    const res = await api('POST', '/realtime/token', {
      roomName: room,
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId, name: `User ${userId}`, ...participant },
      ...rest,
    });
    if (res.status !== 200) throw new Error(`token ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  return {
    ...s,
    port,
    wsBase,
    api,
    token,
    async connect(room, userId, extra) {
      const t = await token(room, userId, extra);
      const c = await RtClient.open(
        `${wsBase}?room=${encodeURIComponent(room)}&access_token=${t.token}`,
      );
      return c;
    },
  };
}

/** A raw WebSocket client that records every frame and waits on them. */
export class RtClient {
  frames: any[] = [];
  private waiters: { match: (f: any) => boolean; resolve: (f: any) => void }[] = [];
  private nextId = 1;
  closed: Promise<{ code: number; reason: string }>;
  snapshot: any = null;
  lastSeq = 0;

  constructor(
    readonly ws: WebSocket,
    readonly url: string,
  ) {
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
    ws.on('error', () => {});
    ws.on('message', (raw) => {
      const f = JSON.parse(raw.toString());
      this.frames.push(f);
      if (typeof f.seq === 'number' && f.type !== 'session.closed')
        this.lastSeq = Math.max(this.lastSeq, f.seq);
      if (f.type === 'session.joined') this.snapshot = f.data;
      for (const w of [...this.waiters]) {
        if (w.match(f)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(f);
        }
      }
    });
  }

  static async open(url: string): Promise<RtClient> {
    const ws = new WebSocket(url);
    const c = new RtClient(ws, url);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return c;
  }

  /** Resolves with the first frame (already received or future) that matches. */
  wait(match: (f: any) => boolean, timeoutMs = 20_000): Promise<any> {
    const found = this.frames.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out; frames: ${JSON.stringify(this.frames).slice(-1500)}`)),
        timeoutMs,
      );
      this.waiters.push({
        match,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      });
    });
  }

  /** Waits for a frame of `type` (and matching `where`) received after `after` frames. */
  waitType(type: string, where: (f: any) => boolean = () => true, after = 0) {
    return this.wait((f) => f.type === type && where(f) && this.frames.indexOf(f) >= after);
  }

  send(frame: unknown) {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Sends a request and resolves with its ack or error. */
  async request(type: string, data?: unknown): Promise<any> {
    const id = String(this.nextId++);
    this.send({ id, type, ...(data === undefined ? {} : { data }) });
    return this.wait(
      (f) => (f.type === 'ack' || f.type === 'error' || f.type === 'pong') && f.id === id,
    );
  }

  async join() {
    const ack = await this.request('session.join');
    if (ack.type !== 'ack') throw new Error(`join refused: ${JSON.stringify(ack)}`);
    if (ack.data.status === 'joined') await this.waitType('session.joined');
    return ack;
  }

  events(type?: string) {
    return this.frames.filter(
      (f) =>
        typeof f.seq === 'number' && !f.type.startsWith('session.') && (!type || f.type === type),
    );
  }

  close(code = 1000) {
    this.ws.close(code);
    return this.closed;
  }

  /** Kills the TCP connection without a close frame (a network drop). */
  drop() {
    this.ws.terminate();
    return this.closed;
  }
}

import { createServer } from 'node:net';
import type { LeaveReason } from '@svc/protocol';
import WebSocket from 'ws';
import type { Clock } from '../../server/src/clock.ts';
import { type Backend, startTestServer, type TestServer } from '../../server/test/helpers.ts';
import {
  SvcClient,
  type SvcClientOptions,
  type SvcConnectionState,
  type SvcDisconnectReason,
  type SvcParticipant,
  type SvcReceivedMessage,
  type SvcRoomOptions,
  type SvcWebSocket,
} from '../src/index.ts';

/** A port that was free a moment ago (the server needs it before listening, for SVC_PUBLIC_URL). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Small realtime timings for tests (names from packages/server/src/realtime/config.ts):
 * short sweeps so that a grace period or a host wait ends promptly.
 */
export const FAST_REALTIME_ENV: Record<string, string> = {
  SVC_REALTIME_SWEEP_INTERVAL_MS: '50',
  SVC_REALTIME_PING_INTERVAL_MS: '2000',
  SVC_REALTIME_HANDSHAKE_TIMEOUT_MS: '5000',
};

export interface ListeningServer extends TestServer {
  baseUrl: string;
}

/** A full test server listening on 127.0.0.1, with SVC_PUBLIC_URL naming its port. */
export async function startListeningServer(
  backend: Backend,
  env: Record<string, string> = {},
  clock?: Clock,
): Promise<ListeningServer> {
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const s = await startTestServer(backend, {
      clock,
      env: { ...FAST_REALTIME_ENV, SVC_PUBLIC_URL: baseUrl, LOG_LEVEL: 'warn', ...env },
    });
    try {
      await s.app.listen({ port, host: '127.0.0.1' });
      return Object.assign(s, { baseUrl });
    } catch (err) {
      await s.close();
      if (tries >= 3 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
}

/** Everything a client reported, in order. */
export type ClientEvent =
  | { kind: 'state'; state: SvcConnectionState }
  | { kind: 'joined'; participant: SvcParticipant }
  | { kind: 'left'; participant: SvcParticipant; reason: LeaveReason | undefined }
  | { kind: 'message'; message: SvcReceivedMessage; participant: SvcParticipant | null }
  | { kind: 'connected' }
  | { kind: 'disconnected'; reason: SvcDisconnectReason }
  | { kind: 'reconnecting' }
  | { kind: 'reconnected' }
  | { kind: 'waiting' }
  | { kind: 'metadata'; metadata: string | null };

/**
 * A real SvcClient plus a record of its handlers' calls, the sockets it opened (so a test can
 * kill one), and a gate that makes new connections fail (a network outage).
 */
export class TestClient {
  readonly client: SvcClient;
  readonly events: ClientEvent[] = [];
  readonly sockets: WebSocket[] = [];
  /** While true, opening a socket fails as if the network were down. */
  offline = false;
  /** Rewrites the URL before a socket opens (e.g. another node, a stale token). */
  rewriteUrl: (url: string) => string = (url) => url;
  readonly #waiters = new Set<() => void>();

  constructor(
    readonly server: { baseUrl: string; project: TestServer['project'] },
    options: SvcClientOptions & { apiKey?: string; bundleId?: string } = {},
  ) {
    this.client = new SvcClient(
      {
        projectId: server.project.id,
        apiKey: options.apiKey ?? server.project.clientKey,
        baseUrl: server.baseUrl,
        bundleId: options.bundleId,
      },
      {
        heartbeatIntervalMs: 0,
        ...options,
        webSocketFactory: (url) => {
          if (this.offline) throw new Error('network is down (test)');
          const ws = new WebSocket(this.rewriteUrl(url));
          this.sockets.push(ws);
          return ws as unknown as SvcWebSocket;
        },
      },
    );
    const c = this.client;
    c.connectionState.subscribe((state) => this.#push({ kind: 'state', state }));
    c.onUserJoined = (participant) => this.#push({ kind: 'joined', participant });
    c.onUserLeft = (participant, reason) => this.#push({ kind: 'left', participant, reason });
    c.onMessageReceived = (message, participant) =>
      this.#push({ kind: 'message', message, participant });
    c.onConnected = () => this.#push({ kind: 'connected' });
    c.onDisconnected = (reason) => this.#push({ kind: 'disconnected', reason });
    c.onReconnecting = () => this.#push({ kind: 'reconnecting' });
    c.onReconnected = () => this.#push({ kind: 'reconnected' });
    c.onWaitingForHost = () => this.#push({ kind: 'waiting' });
    c.onRoomMetadataChanged = (metadata) => this.#push({ kind: 'metadata', metadata });
  }

  #push(event: ClientEvent) {
    this.events.push(event);
    for (const wake of [...this.#waiters]) wake();
  }

  /** The last socket the client opened. */
  get socket(): WebSocket {
    return this.sockets[this.sockets.length - 1]!;
  }

  /** Resolves with the first recorded event matching `predicate` (past or future). */
  waitFor<K extends ClientEvent['kind']>(
    kind: K,
    predicate: (event: Extract<ClientEvent, { kind: K }>) => boolean = () => true,
    timeoutMs = 15_000,
  ): Promise<Extract<ClientEvent, { kind: K }>> {
    const find = () =>
      this.events.find(
        (e): e is Extract<ClientEvent, { kind: K }> =>
          e.kind === kind && predicate(e as Extract<ClientEvent, { kind: K }>),
      );
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = find();
        if (!found) return;
        this.#waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out waiting for ${kind}; saw ${this.describe()}`));
      }, timeoutMs);
      this.#waiters.add(check);
      check();
    });
  }

  /** Resolves once `count` messages have been received. */
  async waitForMessages(count: number, timeoutMs = 15_000): Promise<SvcReceivedMessage[]> {
    await this.waitFor('message', () => this.messages().length >= count, timeoutMs);
    return this.messages();
  }

  messages(): SvcReceivedMessage[] {
    return this.events.flatMap((e) => (e.kind === 'message' ? [e.message] : []));
  }

  of<K extends ClientEvent['kind']>(kind: K): Extract<ClientEvent, { kind: K }>[] {
    return this.events.filter((e): e is Extract<ClientEvent, { kind: K }> => e.kind === kind);
  }

  states(): SvcConnectionState[] {
    return this.of('state').map((e) => e.state);
  }

  describe(): string {
    return this.events
      .map((e) => {
        switch (e.kind) {
          case 'state':
            return e.state;
          case 'joined':
            return `joined(${e.participant.userId})`;
          case 'left':
            return `left(${e.participant.userId},${e.reason})`;
          case 'message':
            return `msg(${e.message.seq})`;
          case 'disconnected':
            return `disconnected(${e.reason})`;
          default:
            return e.kind;
        }
      })
      .join(' ');
  }

  connect(options: SvcRoomOptions) {
    return this.client.connect(options);
  }
}

/** SvcRoomOptions for a user in a room. */
export function roomOptions(
  roomName: string,
  userId: string,
  extra: Partial<SvcRoomOptions> & { isHost?: boolean } = {},
): SvcRoomOptions {
  const { isHost, ...rest } = extra;
  return {
    roomName,
    liveType: 'VIDEO_CONFERENCE',
    participant: { userId, name: `User ${userId}`, ...(isHost === undefined ? {} : { isHost }) },
    ...rest,
  };
}

import { apiBaseOf, SvcError } from '@svc/client';
import type {
  CreatedWebhookEndpoint,
  CreateLinkBody,
  CreateWebhookBody,
  Link,
  LinkStats,
  ListLinksQuery,
  ListRecordingsQuery,
  ListRoomsQuery,
  SendMessageBody,
  SvcCreateRoomOptions,
  SvcParticipantList,
  SvcRecordingDownloadUrl,
  SvcRecordingInfo,
  SvcRoomInfo,
  SvcRoomList,
  SvcRoomOptions,
  SvcStartRecordingOptions,
  SvcTokenResponse,
  UpdateLinkBody,
  UpdateWebhookBody,
  ValidateTokenResponse,
  VerifyLogsQuery,
  VerifyStats,
  WebhookDelivery,
  WebhookEndpoint,
} from '@svc/protocol';
import { DEFAULT_RETRY_POLICY, type FetchFn, type RetryPolicy, Transport } from './http.ts';

/** Options of {@link SvcServer}. */
export interface SvcServerOptions {
  /** The server's public base URL, e.g. `https://svc.example.com` (a trailing `/v1` is fine). */
  baseUrl: string;
  /** The project (`prj_…`) the key belongs to. */
  projectId: string;
  /** A server key (`svc_sk_…`) or a legacy key. Never ship it to a client. */
  apiKey: string;
  /** The admin token, needed only for {@link SvcServer.webhooks} (webhook endpoints are admin routes). */
  adminToken?: string;
  /** Per-attempt timeout in ms (default 10000). */
  timeoutMs?: number;
  /** Retries of idempotent requests (see {@link RetryPolicy}); `{ retries: 0 }` turns them off. */
  retry?: Partial<RetryPolicy>;
  /** The fetch implementation (default: the global one). */
  fetch?: FetchFn;
}

/** A page of a list, as every list route answers it. */
export interface Page<T> {
  items: T[];
  meta: { total: number; page: number; limit: number };
}

/**
 * The server library: every operation a backend makes with a server key. Each method sends one
 * request (retried when idempotent) and resolves with the server's answer, typed from
 * `@svc/protocol`; failures reject with `SvcError` carrying the registry code.
 */
export class SvcServer {
  readonly rooms: RoomsApi;
  readonly tokens: TokensApi;
  readonly recordings: RecordingsApi;
  readonly verify: VerifyApi;
  readonly links: LinksApi;
  readonly webhooks: WebhookEndpointsApi;

  constructor(options: SvcServerOptions) {
    if (!options.projectId) throw new TypeError('SvcServerOptions.projectId is required');
    if (!options.apiKey) throw new TypeError('SvcServerOptions.apiKey is required');
    const apiBase = apiBaseOf(options.baseUrl);
    const common = {
      apiBase,
      timeoutMs: options.timeoutMs ?? 10_000,
      retry: { ...DEFAULT_RETRY_POLICY, ...options.retry },
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    };
    const keyed = new Transport({
      ...common,
      headers: { authorization: `Bearer ${options.apiKey}`, 'x-project-id': options.projectId },
    });
    const admin = options.adminToken
      ? new Transport({ ...common, headers: { authorization: `Bearer ${options.adminToken}` } })
      : null;
    this.rooms = new RoomsApi(keyed);
    this.tokens = new TokensApi(keyed);
    this.recordings = new RecordingsApi(keyed);
    this.verify = new VerifyApi(keyed);
    this.links = new LinksApi(keyed);
    this.webhooks = new WebhookEndpointsApi(admin, options.projectId);
  }
}

const seg = encodeURIComponent;

/** Realtime rooms. */
export class RoomsApi {
  constructor(private readonly http: Transport) {}

  /** Rooms of the project, newest first; `status` filters (`IDLE`, `ACTIVE`, `ENDED`). */
  list(query: ListRoomsQuery = {}): Promise<SvcRoomList> {
    return this.http.request('GET', '/realtime/rooms', { query });
  }
  /** Creates a room; `room_exists` if the name is taken. */
  create(options: SvcCreateRoomOptions): Promise<SvcRoomInfo> {
    return this.http.request('POST', '/realtime/rooms', { body: options });
  }
  /** One room; `room_not_found` if there is none. */
  get(roomName: string): Promise<SvcRoomInfo> {
    return this.http.request('GET', `/realtime/rooms/${seg(roomName)}`);
  }
  /** Ends a room: every participant is disconnected. */
  delete(roomName: string): Promise<void> {
    return this.http.request('DELETE', `/realtime/rooms/${seg(roomName)}`);
  }
  /** The room's participants. */
  participants(roomName: string): Promise<SvcParticipantList> {
    return this.http.request('GET', `/realtime/rooms/${seg(roomName)}/participants`);
  }
  /** Sends a message to everyone in the room; resolves with its place in the room's order. */
  sendMessage(roomName: string, body: SendMessageBody): Promise<{ seq: number }> {
    return this.http.request('POST', `/realtime/rooms/${seg(roomName)}/messages`, { body });
  }
}

/** Access tokens for the realtime channel. */
export class TokensApi {
  constructor(private readonly http: Transport) {}

  /**
   * Mints an access token for `participant` in `roomName` (the room is created when missing).
   * Hand `wsUrl` (or `token`) to the app; `participant.isHost` makes the user a host.
   */
  create(options: SvcRoomOptions): Promise<SvcTokenResponse> {
    return this.http.request('POST', '/realtime/token', { body: options });
  }
}

/** Recordings (egress) of rooms: one at a time per room; see docs/recordings.md. */
export class RecordingsApi {
  constructor(private readonly http: Transport) {}

  /** Starts recording a room with media (`fileType` MP4 by default; OGG is audio only). */
  start(options: SvcStartRecordingOptions): Promise<SvcRecordingInfo> {
    return this.http.request('POST', '/realtime/recordings', { body: options });
  }
  /** Stops a recording and waits for its file: `COMPLETED`, `FAILED` or still `PROCESSING`. */
  stop(egressId: string): Promise<SvcRecordingInfo> {
    return this.http.request('POST', `/realtime/recordings/${seg(egressId)}/stop`);
  }
  /** Pauses a recording: nothing is written until `resume`, and the file skips the gap. */
  pause(egressId: string): Promise<SvcRecordingInfo> {
    return this.http.request('POST', `/realtime/recordings/${seg(egressId)}/pause`);
  }
  /** Resumes a paused recording; the same file goes on. */
  resume(egressId: string): Promise<SvcRecordingInfo> {
    return this.http.request('POST', `/realtime/recordings/${seg(egressId)}/resume`);
  }
  /** Recordings in progress, of one room or all. */
  listActive(roomName?: string): Promise<{ items: SvcRecordingInfo[] }> {
    return this.http.request('GET', '/realtime/recordings/active', { query: { roomName } });
  }
  /** Every recording, newest first (`page` 1, `limit` 10 by default). */
  list(query: ListRecordingsQuery = {}): Promise<Page<SvcRecordingInfo>> {
    return this.http.request('GET', '/realtime/recordings', { query });
  }
  get(egressId: string): Promise<SvcRecordingInfo> {
    return this.http.request('GET', `/realtime/recordings/${seg(egressId)}`);
  }
  /**
   * Signed URLs that work without a key for `expiresIn` seconds (default 3600): `downloadUrl`
   * (the first file) and one per file in `files` (`participant` mode: one per participant).
   */
  downloadUrl(egressId: string, expiresIn?: number): Promise<SvcRecordingDownloadUrl> {
    return this.http.request('GET', `/realtime/recordings/${seg(egressId)}/download-url`, {
      query: { expiresIn },
    });
  }
}

/** Verify: validating tokens, logs and stats. */
export class VerifyApi {
  constructor(private readonly http: Transport) {}

  /** Checks a verification token an app sent you; a token validates once. */
  validateToken(token: string): Promise<ValidateTokenResponse> {
    return this.http.request('POST', '/verify/validate-token', { body: { token } });
  }
  /** Sends and checks, newest first. */
  logs(query: VerifyLogsQuery = {}): Promise<Page<Record<string, unknown>>> {
    return this.http.request('GET', '/verify/logs', { query });
  }
  /** Counts over a time range (ISO 8601 `from`/`to`). */
  stats(query: { from?: string; to?: string } = {}): Promise<VerifyStats> {
    return this.http.request('GET', '/verify/stats', { query });
  }
}

/** Links: short and deep links. */
export class LinksApi {
  constructor(private readonly http: Transport) {}

  create(body: CreateLinkBody): Promise<Link> {
    return this.http.request('POST', '/sdk/links', { body });
  }
  list(query: ListLinksQuery = {}): Promise<Page<Link>> {
    return this.http.request('GET', '/sdk/links', { query });
  }
  get(linkId: string): Promise<Link> {
    return this.http.request('GET', `/sdk/links/${seg(linkId)}`);
  }
  update(linkId: string, body: UpdateLinkBody): Promise<Link> {
    return this.http.request('PATCH', `/sdk/links/${seg(linkId)}`, { body });
  }
  delete(linkId: string): Promise<void> {
    return this.http.request('DELETE', `/sdk/links/${seg(linkId)}`);
  }
  /** Daily counts (UTC `YYYY-MM-DD` bounds, inclusive). */
  stats(linkId: string, query: { from?: string; to?: string } = {}): Promise<LinkStats> {
    return this.http.request('GET', `/sdk/links/${seg(linkId)}/stats`, { query });
  }
}

/** The project's webhook endpoints (admin routes: needs `adminToken`). */
export class WebhookEndpointsApi {
  constructor(
    private readonly http: Transport | null,
    private readonly projectId: string,
  ) {}

  private get admin(): Pick<Transport, 'request'> {
    if (this.http) return this.http;
    return {
      request: () =>
        Promise.reject(
          new SvcError('missing_admin_token', 'Webhook endpoints need SvcServerOptions.adminToken'),
        ),
    };
  }
  private path(rest = '') {
    return `/admin/projects/${seg(this.projectId)}/webhooks${rest}`;
  }

  /** Creates an endpoint; the answer carries its signing secret, shown this once. */
  create(body: CreateWebhookBody): Promise<CreatedWebhookEndpoint> {
    return this.admin.request('POST', this.path(), { body });
  }
  list(): Promise<{ items: WebhookEndpoint[] }> {
    return this.admin.request('GET', this.path());
  }
  get(id: string): Promise<WebhookEndpoint> {
    return this.admin.request('GET', this.path(`/${seg(id)}`));
  }
  update(id: string, body: UpdateWebhookBody): Promise<WebhookEndpoint> {
    return this.admin.request('PATCH', this.path(`/${seg(id)}`), { body });
  }
  delete(id: string): Promise<void> {
    return this.admin.request('DELETE', this.path(`/${seg(id)}`));
  }
  /** Issues a new secret; the previous one keeps signing for `overlapSeconds` (default 24 h). */
  rotateSecret(
    id: string,
    overlapSeconds?: number,
  ): Promise<{ id: string; secret: string; previousSecretExpiresAt: string | null }> {
    return this.admin.request('POST', this.path(`/${seg(id)}/rotate-secret`), {
      body: overlapSeconds === undefined ? {} : { overlapSeconds },
    });
  }
  /** Sends a `webhook.test` event to the endpoint. */
  test(id: string): Promise<{ eventId: string; deliveryId: string }> {
    return this.admin.request('POST', this.path(`/${seg(id)}/test`));
  }
  /** Recent deliveries with their attempts. */
  deliveries(
    id: string,
    query: { status?: string; page?: number; limit?: number } = {},
  ): Promise<Page<WebhookDelivery>> {
    return this.admin.request('GET', this.path(`/${seg(id)}/deliveries`), { query });
  }
}

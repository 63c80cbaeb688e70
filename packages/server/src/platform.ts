import type { onRequestAsyncHookHandler } from 'fastify';
import type { KeyService } from './admin/keys.ts';
import type { ProjectService } from './admin/projects.ts';
import type { KeyStore } from './auth/key-store.ts';
import type { Clock } from './clock.ts';
import type { PlatformConfig } from './config.ts';
import type { DomainEvents } from './events.ts';
import type { Metrics } from './http/metrics.ts';
import type { Sealer } from './sealing.ts';
import type { SharedState } from './state/index.ts';
import type { Store } from './storage/db.ts';
import type { SigningKeys } from './tokens/signing-keys.ts';

/**
 * The platform's services, built once per app by `app.ts`. A product declares the ones it uses
 * (a `Pick` of this, with its own config section) and is handed only those.
 */
export interface Platform {
  config: PlatformConfig;
  store: Store;
  state: SharedState;
  clock: Clock;
  metrics: Metrics;
  keyStore: KeyStore;
  projects: ProjectService;
  keys: KeyService;
  /** The token-signing key set (realtime access tokens, verification tokens). */
  signingKeys: SigningKeys;
  /** The server secret (HMAC key material): SVC_SECRET or the embedded default's generated one. */
  secret: string;
  /** Seals secrets kept in the SQL store, keyed by the server secret (and previous ones). */
  sealer: Sealer;
  /** Domain events (room.started, participant.joined…); the webhooks area subscribes. */
  events: DomainEvents;
  /** The admin-token check, for an area's own routes under `/v1/admin` (an onRequest hook). */
  adminGuard: onRequestAsyncHookHandler;
  /** Optional parts' state for /readyz details (e.g. `media`); they never make it fail. */
  readiness: Map<string, () => object>;
}

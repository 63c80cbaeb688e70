import { envInt as int } from '../env.ts';
import { type ControllerConfig, loadControllerConfig } from './controller/config.ts';

/** Realtime settings, read from the environment (names are part of the contract). */
export interface RealtimeConfig {
  /** `SVC_REALTIME_TOKEN_TTL_SECONDS` (21600 = 6 h): access token lifetime. */
  tokenTtlSeconds: number;
  /** `SVC_REALTIME_DEPARTURE_GRACE_MS` (15000): how long a dropped participant may resume. */
  departureGraceMs: number;
  /** `SVC_REALTIME_EMPTY_TIMEOUT_MS` (300000 = 5 min): how long an empty room lives. */
  emptyTimeoutMs: number;
  /** `SVC_REALTIME_REPLAY_BUFFER` (1000): room events kept for resume. */
  replayBuffer: number;
  /** `SVC_REALTIME_PING_INTERVAL_MS` (10000): WebSocket ping period; two missed = dropped. */
  pingIntervalMs: number;
  /** `SVC_REALTIME_HANDSHAKE_TIMEOUT_MS` (10000): time to send session.join/resume. */
  handshakeTimeoutMs: number;
  /** `SVC_REALTIME_SWEEP_INTERVAL_MS` (1000): how often due rooms (grace, empty) are checked. */
  sweepIntervalMs: number;
  /** `SVC_REALTIME_RATE_PER_SEC` (50) and `SVC_REALTIME_RATE_BURST` (100): frames per connection. */
  ratePerSec: number;
  rateBurst: number;
  /** `SVC_REALTIME_DEFAULT_MAX_PARTICIPANTS` (1000): maxParticipants when not given. */
  defaultMaxParticipants: number;
  /** `SVC_REALTIME_NODE_TTL_MS` (15000): a node whose heartbeat is older is considered dead. */
  nodeTtlMs: number;
  /** The room controller's settings (controller/config.ts). */
  controller: ControllerConfig;
}

export function loadRealtimeConfig(env: NodeJS.ProcessEnv = process.env): RealtimeConfig {
  return {
    tokenTtlSeconds: int(env, 'SVC_REALTIME_TOKEN_TTL_SECONDS', 21_600, 1, 30 * 86_400),
    departureGraceMs: int(env, 'SVC_REALTIME_DEPARTURE_GRACE_MS', 15_000, 0, 3_600_000),
    emptyTimeoutMs: int(env, 'SVC_REALTIME_EMPTY_TIMEOUT_MS', 300_000, 0, 7 * 86_400_000),
    replayBuffer: int(env, 'SVC_REALTIME_REPLAY_BUFFER', 1000, 10, 100_000),
    pingIntervalMs: int(env, 'SVC_REALTIME_PING_INTERVAL_MS', 10_000, 50, 600_000),
    handshakeTimeoutMs: int(env, 'SVC_REALTIME_HANDSHAKE_TIMEOUT_MS', 10_000, 50, 600_000),
    sweepIntervalMs: int(env, 'SVC_REALTIME_SWEEP_INTERVAL_MS', 1000, 10, 60_000),
    ratePerSec: int(env, 'SVC_REALTIME_RATE_PER_SEC', 50, 1, 100_000),
    rateBurst: int(env, 'SVC_REALTIME_RATE_BURST', 100, 1, 100_000),
    defaultMaxParticipants: int(env, 'SVC_REALTIME_DEFAULT_MAX_PARTICIPANTS', 1000, 1, 10_000),
    nodeTtlMs: int(env, 'SVC_REALTIME_NODE_TTL_MS', 15_000, 100, 600_000),
    controller: loadControllerConfig(env),
  };
}

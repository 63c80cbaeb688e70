import { ConfigError, envInt as int } from '../../env.ts';

/** Room controller settings (`SVC_REALTIME_*`, docs/room-controller.md). */
export interface ControllerConfig {
  /** `SVC_REALTIME_CHAT_HISTORY` (100): chat messages kept per room and sent to joiners; 0 = none. */
  chatHistory: number;
  /** `SVC_REALTIME_CHAT_RATE_PER_10S` (20): chat messages per user per 10 s. */
  chatRatePer10s: number;
  /** `SVC_REALTIME_REACTION_RATE_PER_10S` (20): reactions per user per 10 s. */
  reactionRatePer10s: number;
  /** `SVC_REALTIME_REACTION_BATCH_MS` (100): reactions are fanned out in batches this often. */
  reactionBatchMs: number;
  /** `SVC_REALTIME_INVITATION_TIMEOUT_MS` (30000): ring time when the inviter gives none (5–180 s). */
  invitationTimeoutMs: number;
  /** `SVC_REALTIME_WAITING_TIMEOUT_MS` (300000): how long a joiner may wait for approval. */
  waitingTimeoutMs: number;
  /** `SVC_REALTIME_BREAKOUT_COUNTDOWN_MS` (10000): default countdown before breakout rooms close. */
  breakoutCountdownMs: number;
  /** `SVC_REALTIME_QUALITY_INTERVAL_MS` (5000): how often network quality is measured and sent. */
  qualityIntervalMs: number;
  /** `SVC_REALTIME_HOST_SUCCESSION` (true): the default of the room setting `hostSuccession`. */
  hostSuccession: boolean;
}

export function loadControllerConfig(env: NodeJS.ProcessEnv = process.env): ControllerConfig {
  const succession = env.SVC_REALTIME_HOST_SUCCESSION;
  if (succession !== undefined && succession !== '' && !['true', 'false'].includes(succession)) {
    throw new ConfigError(
      `SVC_REALTIME_HOST_SUCCESSION must be true or false, got "${succession}"`,
    );
  }
  return {
    chatHistory: int(env, 'SVC_REALTIME_CHAT_HISTORY', 100, 0, 1000),
    chatRatePer10s: int(env, 'SVC_REALTIME_CHAT_RATE_PER_10S', 20, 1, 10_000),
    reactionRatePer10s: int(env, 'SVC_REALTIME_REACTION_RATE_PER_10S', 20, 1, 10_000),
    reactionBatchMs: int(env, 'SVC_REALTIME_REACTION_BATCH_MS', 100, 0, 5000),
    invitationTimeoutMs: int(env, 'SVC_REALTIME_INVITATION_TIMEOUT_MS', 30_000, 5000, 180_000),
    waitingTimeoutMs: int(env, 'SVC_REALTIME_WAITING_TIMEOUT_MS', 300_000, 1000, 86_400_000),
    breakoutCountdownMs: int(env, 'SVC_REALTIME_BREAKOUT_COUNTDOWN_MS', 10_000, 0, 300_000),
    qualityIntervalMs: int(env, 'SVC_REALTIME_QUALITY_INTERVAL_MS', 5000, 50, 600_000),
    hostSuccession: succession !== 'false',
  };
}

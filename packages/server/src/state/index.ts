import { MemoryState } from './memory.ts';
import { RedisState } from './redis.ts';
import type { SharedState } from './state.ts';

export type {
  RateLimitResult,
  RecentMember,
  RecentSets,
  RecentSetsOptions,
  SharedState,
  StateCases,
  SubscriptionEvents,
} from './state.ts';
export { MemoryState, RedisState };

/** Redis when a URL is given (with `timeoutMs` as each command's deadline), else in-process. */
export function openSharedState(
  redisUrl: string | undefined,
  prefix = 'svc:',
  timeoutMs?: number,
): SharedState {
  return redisUrl ? new RedisState(redisUrl, prefix, timeoutMs) : new MemoryState();
}

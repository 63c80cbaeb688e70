import { MemoryState } from './memory.ts';
import { RedisState } from './redis.ts';
import type { SharedState } from './state.ts';

export type { RateLimitResult, SharedState } from './state.ts';
export { MemoryState, RedisState };

/** Redis when a URL is given, else in-process. */
export function openSharedState(redisUrl: string | undefined, prefix = 'svc:'): SharedState {
  return redisUrl ? new RedisState(redisUrl, prefix) : new MemoryState();
}

import type { ErrorDefinitions } from './types.ts';

/** Realtime (rooms, tokens, signaling) codes. */
export const REALTIME_ERRORS = {} as const satisfies ErrorDefinitions;

import type { ErrorDefinitions } from './types.ts';

/** Webhooks (admin API) codes. */
export const WEBHOOKS_ERRORS = {} as const satisfies ErrorDefinitions;

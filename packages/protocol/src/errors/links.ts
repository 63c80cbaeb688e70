import type { ErrorDefinitions } from './types.ts';

/** Links codes. */
export const LINKS_ERRORS = {} as const satisfies ErrorDefinitions;

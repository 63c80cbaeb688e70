import type { ErrorDefinitions } from './types.ts';

/** Verify codes. */
export const VERIFY_ERRORS = {} as const satisfies ErrorDefinitions;

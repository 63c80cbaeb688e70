import { CONTROLLER_ERRORS } from './errors/controller.ts';
import { CORE_ERRORS } from './errors/core.ts';
import { LINKS_ERRORS } from './errors/links.ts';
import { REALTIME_ERRORS } from './errors/realtime.ts';
import { RECORDINGS_ERRORS } from './errors/recordings.ts';
import { VERIFY_ERRORS } from './errors/verify.ts';
import { WEBHOOKS_ERRORS } from './errors/webhooks.ts';

/**
 * The error-code registry: every error Svc returns carries one of these codes in its
 * problem+json body (`code`). Codes are stable: never rename or reuse a retired one.
 * Each entry gives the HTTP status and a one-line meaning (the problem's `title`).
 */
export const ERROR_CODES = {
  ...CORE_ERRORS,
  ...REALTIME_ERRORS,
  ...RECORDINGS_ERRORS,
  ...CONTROLLER_ERRORS,
  ...LINKS_ERRORS,
  ...VERIFY_ERRORS,
  ...WEBHOOKS_ERRORS,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** A validation failure inside an `invalid_request` problem. */
export interface ProblemFieldError {
  path: string;
  message: string;
}

/** The RFC 9457 body of every Svc error response. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  code: ErrorCode;
  requestId: string;
  errors?: ProblemFieldError[];
  [extension: string]: unknown;
}

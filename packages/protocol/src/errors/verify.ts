import type { ErrorDefinitions } from './types.ts';

/** Verify codes. */
export const VERIFY_ERRORS = {
  invalid_phone_number: {
    status: 400,
    title: 'The phone number is not a valid E.164 number (e.g. +14155552671).',
  },
  country_not_allowed: {
    status: 403,
    title: "The project does not send codes to this number's country.",
  },
  resend_too_soon: {
    status: 429,
    title: 'A code was sent to this number moments ago; retry after the indicated delay.',
  },
  max_sends_reached: {
    status: 429,
    title: 'This verification has reached its maximum number of sends.',
  },
  too_many_requests: {
    status: 429,
    title: 'Too many verification requests for this number or client; retry later.',
  },
  sms_delivery_failed: { status: 502, title: 'The SMS provider did not accept the message.' },
  invalid_code: { status: 400, title: 'The code is not correct.' },
  max_attempts_reached: {
    status: 429,
    title: 'Too many wrong codes: this verification is locked until it expires.',
  },
  verification_expired: { status: 410, title: 'The verification has expired; send a new code.' },
  verification_not_found: {
    status: 404,
    title: 'No pending verification matches; send a new code.',
  },
} as const satisfies ErrorDefinitions;

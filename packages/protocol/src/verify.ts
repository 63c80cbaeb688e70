import { type Static, Type } from '@sinclair/typebox';
import { PageMeta, PageQuery, Timestamp } from './common.ts';

/** An E.164 phone number: `+`, a country code, at most 15 digits in all. */
export const E164 = Type.String({
  minLength: 3,
  maxLength: 16,
  pattern: '^\\+[1-9][0-9]{1,14}$',
  description: 'An E.164 phone number, e.g. `+14155552671`',
  examples: ['+14155552671'],
});

const VerificationId = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9_-]+$',
  examples: ['vrf_01JD9ZK3G0Q4W8Y2N6R1T5V7XB'],
});

/** The code as the user typed it: 4–10 digits (Svc sends 6). */
const Code = Type.String({ minLength: 4, maxLength: 10, pattern: '^[0-9]+$' });

/** `POST /auth/sms/send`. The number is checked for real (libphonenumber), not only by shape. */
export const SendCodeBody = Type.Object(
  { phoneNumber: Type.String({ minLength: 1, maxLength: 32 }) },
  { additionalProperties: false },
);
export type SendCodeBody = Static<typeof SendCodeBody>;

export const SendCodeResponse = Type.Object({
  verificationId: VerificationId,
  status: Type.Literal('pending'),
  /** Seconds until the code expires. */
  expiresIn: Type.Integer(),
  /** Seconds until another code may be sent for this number. */
  resendAfter: Type.Integer(),
});
export type SendCodeResponse = Static<typeof SendCodeResponse>;

/** `POST /verify`: exactly one of `phoneNumber` and `verificationId`, plus the code. */
export const VerifyCodeBody = Type.Object(
  {
    phoneNumber: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    verificationId: Type.Optional(VerificationId),
    code: Code,
  },
  { additionalProperties: false },
);
export type VerifyCodeBody = Static<typeof VerifyCodeBody>;

export const VerifyCodeResponse = Type.Object({
  status: Type.Literal('approved'),
  /** An ES256 JWT (audience `svc:verify`) that the app's backend checks with validate-token or the JWKS. */
  token: Type.String(),
  /** Seconds until the token expires. */
  expiresIn: Type.Integer(),
});
export type VerifyCodeResponse = Static<typeof VerifyCodeResponse>;

/** `POST /verify/validate-token` (server keys). */
export const ValidateTokenBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 8192 }),
    /** When true, the token validates only this once (across every node). */
    consume: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
);
export type ValidateTokenBody = Static<typeof ValidateTokenBody>;

export const TOKEN_INVALID_REASONS = ['invalid', 'expired', 'already_used'] as const;

export const ValidateTokenResponse = Type.Object({
  valid: Type.Boolean(),
  /** When `valid` is false: `invalid` (bad signature, another project's, malformed), `expired`, `already_used`. */
  reason: Type.Optional(Type.Union(TOKEN_INVALID_REASONS.map((r) => Type.Literal(r)))),
  phoneNumber: Type.Optional(E164),
  verificationId: Type.Optional(Type.String()),
  verifiedAt: Type.Optional(Timestamp),
  expiresAt: Type.Optional(Timestamp),
});
export type ValidateTokenResponse = Static<typeof ValidateTokenResponse>;

export const VERIFY_LOG_TYPES = ['send', 'check'] as const;
/**
 * Send statuses: `sent`, `failed` (the provider refused), `refused` (a limit; see `reason`).
 * Check statuses: `approved`, `invalid_code`, `refused` (expired, locked, not found, capped).
 */
export const VERIFY_LOG_STATUSES = [
  'sent',
  'failed',
  'refused',
  'approved',
  'invalid_code',
] as const;

export const VerifyLogsQuery = Type.Object(
  {
    phoneNumber: Type.Optional(E164),
    type: Type.Optional(Type.Union(VERIFY_LOG_TYPES.map((t) => Type.Literal(t)))),
    status: Type.Optional(Type.Union(VERIFY_LOG_STATUSES.map((t) => Type.Literal(t)))),
    from: Type.Optional(Timestamp),
    to: Type.Optional(Timestamp),
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type VerifyLogsQuery = Static<typeof VerifyLogsQuery>;

export const VerifyLogItem = Type.Object({
  id: Type.String(),
  createdAt: Timestamp,
  type: Type.Union(VERIFY_LOG_TYPES.map((t) => Type.Literal(t))),
  status: Type.Union(VERIFY_LOG_STATUSES.map((t) => Type.Literal(t))),
  /** The error code when the request was refused or failed. */
  reason: Type.Union([Type.String(), Type.Null()]),
  verificationId: Type.Union([Type.String(), Type.Null()]),
  /** Masked: country calling code and last two digits only (`+1********71`). */
  phoneNumber: Type.Union([Type.String(), Type.Null()]),
  /** ISO 3166-1 alpha-2, when known. */
  country: Type.Union([Type.String(), Type.Null()]),
  keyId: Type.String(),
  clientIp: Type.String(),
  /** True for the project's test numbers (no SMS sent). */
  test: Type.Boolean(),
});
export type VerifyLogItem = Static<typeof VerifyLogItem>;

export const VerifyLogsResponse = Type.Object({ items: Type.Array(VerifyLogItem), meta: PageMeta });

export const VerifyStatsQuery = Type.Object(
  { from: Type.Optional(Timestamp), to: Type.Optional(Timestamp) },
  { additionalProperties: false },
);

const Counts = {
  /** Verifications started (first code sent) in the range. */
  verifications: Type.Integer(),
  /** Codes sent (first sends and resends) in the range. */
  sends: Type.Integer(),
  approvals: Type.Integer(),
  /** Wrong codes entered. */
  failedChecks: Type.Integer(),
  /** Verifications whose code expired in the range without being approved. */
  expirations: Type.Integer(),
  /** approvals / verifications, from 0 to 1 (0 when nothing started). */
  conversionRate: Type.Number(),
};

export const VerifyStats = Type.Object({
  from: Timestamp,
  to: Timestamp,
  ...Counts,
  countries: Type.Array(
    Type.Object({ country: Type.Union([Type.String(), Type.Null()]), ...Counts }),
  ),
});
export type VerifyStats = Static<typeof VerifyStats>;

/** Per-project limits (`settings.verify.limits`); every field optional, defaults in docs/verify.md. */
export const VerifyLimits = Type.Object(
  {
    codeTtlSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400 })),
    resendCooldownSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })),
    maxSendsPerVerification: Type.Optional(Type.Integer({ minimum: 1, maximum: 20 })),
    maxChecksPerVerification: Type.Optional(Type.Integer({ minimum: 1, maximum: 20 })),
    sendsPerNumberPerHour: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
    sendsPerIpPerHour: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
    checksPerIpPerHour: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
    tokenTtlSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400 })),
  },
  { additionalProperties: false },
);
export type VerifyLimits = Static<typeof VerifyLimits>;

/** The SMS sender of a project: the server's (environment) default when absent. */
export const VerifySenderSettings = Type.Union([
  Type.Object({ type: Type.Literal('console') }, { additionalProperties: false }),
  Type.Object(
    {
      type: Type.Literal('twilio'),
      accountSid: Type.String({ minLength: 2, maxLength: 64, pattern: '^[A-Za-z0-9]+$' }),
      /** Write-only: stored encrypted, shown back as `authTokenEncrypted`. Omit to keep the stored one. */
      authToken: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
      authTokenEncrypted: Type.Optional(Type.String({ maxLength: 1024 })),
      from: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
      messagingServiceSid: Type.Optional(
        Type.String({ minLength: 2, maxLength: 64, pattern: '^[A-Za-z0-9]+$' }),
      ),
      /** The API base (https://api.twilio.com); any Twilio-compatible provider. */
      baseUrl: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
    },
    { additionalProperties: false },
  ),
]);

/** `settings.verify` of a project (admin API). */
export const VerifySettings = Type.Object(
  {
    sender: Type.Optional(VerifySenderSettings),
    /** Fixed numbers with fixed codes: no SMS, no quota (at most 20). */
    testNumbers: Type.Optional(
      Type.Array(
        Type.Object(
          { phoneNumber: E164, code: Type.String({ pattern: '^[0-9]{6}$' }) },
          { additionalProperties: false },
        ),
        { maxItems: 20 },
      ),
    ),
    /** ISO 3166-1 alpha-2 codes; when set, other countries are refused (SMS-pumping guard). */
    allowedCountries: Type.Optional(
      Type.Array(Type.String({ pattern: '^[A-Z]{2}$' }), { maxItems: 250, uniqueItems: true }),
    ),
    limits: Type.Optional(VerifyLimits),
  },
  { additionalProperties: false },
);
export type VerifySettings = Static<typeof VerifySettings>;

/** `GET /admin/projects/{projectId}/verify/outbox`: the console sender's last messages. */
export const VerifyOutbox = Type.Object({
  items: Type.Array(Type.Object({ to: Type.String(), body: Type.String(), createdAt: Timestamp })),
});

import { type TSchema, Type } from '@sinclair/typebox';

/** A resource id in a path (`prj_…`, `key_…`, `whe_…`): 1–64 of `[A-Za-z0-9_-]`. */
export const ResourceId = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' });

/**
 * An ISO 8601 UTC timestamp, e.g. `2026-11-25T10:00:00.000Z`. Servers answer in that form; a
 * request may send any RFC 3339 date-time that names an instant of the years 0000–9999 in UTC
 * (see {@link isTimestampInRange}).
 */
export const Timestamp = Type.String({ format: 'date-time' });

/** The first and last instants a `Timestamp` names (0000-01-01T00:00:00.000Z and
 * 9999-12-31T23:59:59.999Z), in Unix milliseconds. */
export const FIRST_TIMESTAMP_MS = -62_167_219_200_000;
export const LAST_TIMESTAMP_MS = 253_402_300_799_999;

/**
 * Whether a date-time names an instant that `Date` reads and `toISOString()` writes back as a
 * `Timestamp`: what the RFC 3339 syntax alone lets through and a store could not keep. False for
 * a leap second (`23:59:60`, which `Date.parse` cannot read) and for an offset that moves the
 * instant out of the years 0000–9999 in UTC (`9999-12-31T23:59:59-23:59` is in the year 10000).
 * Check the syntax first: this only parses.
 */
export function isTimestampInRange(value: string): boolean {
  const ms = Date.parse(value);
  return ms >= FIRST_TIMESTAMP_MS && ms <= LAST_TIMESTAMP_MS;
}

/** A paginated listing's metadata. */
export const PageMeta = Type.Object({
  total: Type.Integer({ minimum: 0 }),
  page: Type.Integer({ minimum: 1 }),
  limit: Type.Integer({ minimum: 1 }),
});

/** `?page=1&limit=10` (limit at most 100). */
export const PageQuery = {
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
};

export const Paginated = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), meta: PageMeta });

/** The problem+json body, for response schemas. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.Optional(Type.String()),
    code: Type.String(),
    requestId: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
  },
  { additionalProperties: true, $id: 'Problem' },
);

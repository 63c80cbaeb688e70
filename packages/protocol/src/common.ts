import { type TSchema, Type } from '@sinclair/typebox';

/** A resource id in a path (`prj_…`, `key_…`, `whe_…`): 1–64 of `[A-Za-z0-9_-]`. */
export const ResourceId = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' });

/** An ISO 8601 UTC timestamp, e.g. `2026-11-25T10:00:00.000Z`. */
export const Timestamp = Type.String({ format: 'date-time' });

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

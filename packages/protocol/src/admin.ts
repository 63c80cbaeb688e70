import { type Static, Type } from '@sinclair/typebox';
import { Timestamp } from './common.ts';
import { CLIENT_SCOPES, PRODUCTS } from './products.ts';

const ProductSchema = Type.Union(
  PRODUCTS.map((p) => Type.Literal(p)),
  { description: 'A Svc product' },
);
const ScopeSchema = Type.Union(CLIENT_SCOPES.map((p) => Type.Literal(p)));

/** Per-product project settings; each product's issue defines its own part. */
export const ProjectSettings = Type.Object(
  {
    links: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    verify: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);

export const Project = Type.Object(
  {
    id: Type.String({ examples: ['prj_01JD…'] }),
    name: Type.String(),
    products: Type.Array(ProductSchema),
    webhooksEnabled: Type.Boolean(),
    settings: ProjectSettings,
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Project' },
);
export type Project = Static<typeof Project>;

export const CreateProjectBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    products: Type.Optional(Type.Array(ProductSchema, { uniqueItems: true, maxItems: 6 })),
    webhooksEnabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type CreateProjectBody = Static<typeof CreateProjectBody>;

export const UpdateProjectBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    products: Type.Optional(Type.Array(ProductSchema, { uniqueItems: true, maxItems: 6 })),
    webhooksEnabled: Type.Optional(Type.Boolean()),
    settings: Type.Optional(ProjectSettings),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateProjectBody = Static<typeof UpdateProjectBody>;

const Origin = Type.String({
  minLength: 1,
  maxLength: 300,
  description: 'An exact origin (`https://app.example.com`) or `https://*.example.com`',
});
const BundleId = Type.String({ minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9._-]+$' });
const IpOrCidr = Type.String({ minLength: 2, maxLength: 64, description: 'IPv4/IPv6 or CIDR' });
const RateLimit = Type.Integer({ minimum: 1, maximum: 1_000_000 });

export const CreateKeyBody = Type.Object(
  {
    type: Type.Union([Type.Literal('client'), Type.Literal('server')]),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
    allowedOrigins: Type.Optional(Type.Array(Origin, { maxItems: 100, uniqueItems: true })),
    allowedBundleIds: Type.Optional(Type.Array(BundleId, { maxItems: 100, uniqueItems: true })),
    allowedIps: Type.Optional(Type.Array(IpOrCidr, { maxItems: 100, uniqueItems: true })),
    rateLimitPerMinute: Type.Optional(RateLimit),
    expiresAt: Type.Optional(Timestamp),
  },
  { additionalProperties: false },
);
export type CreateKeyBody = Static<typeof CreateKeyBody>;

export const UpdateKeyBody = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 200 })),
    scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
    allowedOrigins: Type.Optional(Type.Array(Origin, { maxItems: 100, uniqueItems: true })),
    allowedBundleIds: Type.Optional(Type.Array(BundleId, { maxItems: 100, uniqueItems: true })),
    allowedIps: Type.Optional(Type.Array(IpOrCidr, { maxItems: 100, uniqueItems: true })),
    rateLimitPerMinute: Type.Optional(Type.Union([RateLimit, Type.Null()])),
    expiresAt: Type.Optional(Type.Union([Timestamp, Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateKeyBody = Static<typeof UpdateKeyBody>;

export const RotateKeyBody = Type.Object(
  {
    gracePeriodSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 30 * 24 * 3600 })),
  },
  { additionalProperties: false },
);

export const ImportLegacyKeyBody = Type.Object(
  {
    key: Type.String({ minLength: 8, maxLength: 200 }),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    allowedIps: Type.Optional(Type.Array(IpOrCidr, { maxItems: 100, uniqueItems: true })),
    rateLimitPerMinute: Type.Optional(RateLimit),
  },
  { additionalProperties: false },
);

/** A key as listed: never its secret. */
export const ApiKey = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    type: Type.Union([Type.Literal('client'), Type.Literal('server'), Type.Literal('legacy')]),
    name: Type.Union([Type.String(), Type.Null()]),
    prefix: Type.String({ description: 'The first characters of the key, for display' }),
    last4: Type.String({ description: 'The last four characters of the key, for display' }),
    scopes: Type.Array(Type.String()),
    allowedOrigins: Type.Array(Type.String()),
    allowedBundleIds: Type.Array(Type.String()),
    allowedIps: Type.Array(Type.String()),
    rateLimitPerMinute: Type.Union([Type.Integer(), Type.Null()]),
    expiresAt: Type.Union([Timestamp, Type.Null()]),
    revokedAt: Type.Union([Timestamp, Type.Null()]),
    replacedBy: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp,
  },
  { $id: 'ApiKey' },
);
export type ApiKey = Static<typeof ApiKey>;

/** A key with its plaintext: returned once, at creation or rotation. */
export const CreatedApiKey = Type.Composite([ApiKey, Type.Object({ key: Type.String() })], {
  $id: 'CreatedApiKey',
});
export type CreatedApiKey = Static<typeof CreatedApiKey>;

import { type Static, Type } from '@sinclair/typebox';
import { PageQuery, Paginated, ResourceId, Timestamp } from './common.ts';

/**
 * Links wire schemas: project link settings, links, resolve, deferred matching, events, stats.
 * Every route lives under `/v1/sdk/links` (client keys with the `links` scope, or server keys);
 * the redirect `GET /l/{slug}` and the two well-known files are public.
 */

/** Largest `params` object, as serialised JSON. */
export const LINK_PARAMS_MAX_BYTES = 8 * 1024;
/** Largest event `properties` object, as serialised JSON. */
export const LINK_EVENT_PROPERTIES_MAX_BYTES = 4 * 1024;
/** Default window (seconds) in which a first open may be matched to a click by fingerprint. */
export const LINK_DEFAULT_DEFERRED_WINDOW_SECONDS = 3600;
/** Default window (seconds) in which a click id from the install referrer is honoured. */
export const LINK_DEFAULT_REFERRER_WINDOW_SECONDS = 7 * 24 * 3600;

const HostName = Type.String({
  minLength: 1,
  maxLength: 253,
  // The port, when given, is 1–65535 without leading zeros.
  pattern:
    '^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*' +
    '(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$',
  description: 'A lower-case host name, optionally with a port 1–65535 (`go.example.com:8443`)',
});
const PackageName = Type.String({
  minLength: 3,
  maxLength: 255,
  pattern: '^[A-Za-z][A-Za-z0-9_]*(\\.[A-Za-z][A-Za-z0-9_]*)+$',
  description: 'An Android application id (`com.example.app`)',
});
const BundleId = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*$',
  description: 'An iOS bundle id (`com.example.app`)',
});
const TeamId = Type.String({ pattern: '^[A-Z0-9]{10}$', description: 'Apple team id (10 chars)' });
const AppStoreId = Type.String({ pattern: '^[0-9]{1,15}$', description: 'App Store numeric id' });
const CertFingerprint = Type.String({
  pattern: '^([0-9A-Fa-f]{2}:?){31}[0-9A-Fa-f]{2}$',
  description: 'SHA-256 signing-certificate fingerprint, `AB:CD:…` (colons optional)',
});
const HttpUrl = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'An absolute http:// or https:// URL',
});

export const LinkAndroidApp = Type.Object(
  {
    packageName: PackageName,
    sha256CertFingerprints: Type.Array(CertFingerprint, {
      minItems: 1,
      maxItems: 10,
      uniqueItems: true,
      description: 'List the upload key and the Play App Signing key when both exist',
    }),
    storeUrl: Type.Optional(HttpUrl),
  },
  { additionalProperties: false },
);

export const LinkIosApp = Type.Object(
  { teamId: TeamId, bundleId: BundleId, appStoreId: AppStoreId },
  { additionalProperties: false },
);

/** `settings.links` of a project, set with `PATCH /admin/projects/{id}`. */
export const LinkSettings = Type.Object(
  {
    domains: Type.Optional(
      Type.Array(HostName, {
        maxItems: 20,
        uniqueItems: true,
        description:
          'Custom link domains this project owns; the server’s own host serves every project',
      }),
    ),
    android: Type.Optional(Type.Array(LinkAndroidApp, { maxItems: 10 })),
    ios: Type.Optional(Type.Array(LinkIosApp, { maxItems: 10 })),
    allowedDestinations: Type.Optional(
      Type.Array(
        Type.String({
          minLength: 1,
          maxLength: 255,
          pattern:
            '^(\\*\\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$',
        }),
        {
          maxItems: 100,
          uniqueItems: true,
          description:
            'Destination hosts links may point to (`example.com`, `*.example.com` for subdomains); unset = any',
        },
      ),
    ),
    deferredWindowSeconds: Type.Optional(
      Type.Integer({
        minimum: 60,
        maximum: 7 * 24 * 3600,
        description: 'Fingerprint (probable) match window in seconds (3600)',
      }),
    ),
    referrerWindowSeconds: Type.Optional(
      Type.Integer({
        minimum: 60,
        maximum: 90 * 24 * 3600,
        description: 'How long a click id from the install referrer stays valid, seconds (604800)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type LinkSettings = Static<typeof LinkSettings>;

const Slug = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9_-]+$',
  description: 'The path part of the short link; generated (8 base62 characters) when omitted',
});
const ExternalId = Type.String({ minLength: 1, maxLength: 255 });

export const LinkAndroid = Type.Object(
  {
    packageName: Type.Optional(PackageName),
    fallbackUrl: Type.Optional(HttpUrl),
    minVersionCode: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647 })),
  },
  { additionalProperties: false },
);
export const LinkIos = Type.Object(
  {
    bundleId: Type.Optional(BundleId),
    appStoreId: Type.Optional(AppStoreId),
    fallbackUrl: Type.Optional(HttpUrl),
    minVersion: Type.Optional(Type.String({ minLength: 1, maxLength: 32, pattern: '^[0-9.]+$' })),
  },
  { additionalProperties: false },
);
const UtmValue = Type.String({ minLength: 1, maxLength: 200 });
export const LinkUtm = Type.Object(
  {
    source: Type.Optional(UtmValue),
    medium: Type.Optional(UtmValue),
    campaign: Type.Optional(UtmValue),
    term: Type.Optional(UtmValue),
    content: Type.Optional(UtmValue),
  },
  { additionalProperties: false },
);
export const LinkSocial = Type.Object(
  {
    title: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
    description: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
    imageUrl: Type.Optional(HttpUrl),
  },
  { additionalProperties: false },
);
const LinkParams = Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), {
  maxProperties: 200,
  description: 'Deep-link data handed to the app: a JSON object of at most 8 KiB',
});

export const Link = Type.Object(
  {
    id: Type.String({ examples: ['lnk_01JD…'] }),
    slug: Type.String(),
    domain: Type.String(),
    shortUrl: Type.String(),
    url: Type.String(),
    android: Type.Union([LinkAndroid, Type.Null()]),
    ios: Type.Union([LinkIos, Type.Null()]),
    params: LinkParams,
    utm: Type.Union([LinkUtm, Type.Null()]),
    social: Type.Union([LinkSocial, Type.Null()]),
    expiresAt: Type.Union([Timestamp, Type.Null()]),
    externalId: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Link' },
);
export type Link = Static<typeof Link>;

export const CreateLinkBody = Type.Object(
  {
    url: HttpUrl,
    slug: Type.Optional(Slug),
    domain: Type.Optional(HostName),
    android: Type.Optional(LinkAndroid),
    ios: Type.Optional(LinkIos),
    params: Type.Optional(LinkParams),
    utm: Type.Optional(LinkUtm),
    social: Type.Optional(LinkSocial),
    expiresAt: Type.Optional(Timestamp),
    externalId: Type.Optional(ExternalId),
  },
  { additionalProperties: false },
);
export type CreateLinkBody = Static<typeof CreateLinkBody>;

/** A partial update: `null` clears an optional field. The domain cannot change. */
export const UpdateLinkBody = Type.Object(
  {
    url: Type.Optional(HttpUrl),
    slug: Type.Optional(Slug),
    android: Type.Optional(Type.Union([LinkAndroid, Type.Null()])),
    ios: Type.Optional(Type.Union([LinkIos, Type.Null()])),
    params: Type.Optional(LinkParams),
    utm: Type.Optional(Type.Union([LinkUtm, Type.Null()])),
    social: Type.Optional(Type.Union([LinkSocial, Type.Null()])),
    expiresAt: Type.Optional(Type.Union([Timestamp, Type.Null()])),
    externalId: Type.Optional(Type.Union([ExternalId, Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateLinkBody = Static<typeof UpdateLinkBody>;

export const ListLinksQuery = Type.Object(
  {
    ...PageQuery,
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Substring of the slug, destination URL or external id (case-insensitive)',
      }),
    ),
    externalId: Type.Optional(ExternalId),
    slug: Type.Optional(Slug),
  },
  { additionalProperties: false },
);
export type ListLinksQuery = Static<typeof ListLinksQuery>;
export const LinkList = Paginated(Link);

export const LinkIdParams = Type.Object({
  linkId: ResourceId,
});

export const ResolveLinkQuery = Type.Object(
  {
    url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    slug: Type.Optional(Slug),
    domain: Type.Optional(HostName),
  },
  { additionalProperties: false },
);
export type ResolveLinkQuery = Static<typeof ResolveLinkQuery>;

export const ResolvedLink = Type.Object({ link: Link });

/** The app platforms Links knows: store redirects, association files, deferred matching. */
export const LINK_APP_PLATFORMS = ['android', 'ios'] as const;
export type LinkAppPlatform = (typeof LINK_APP_PLATFORMS)[number];

export const DeferredBody = Type.Object(
  {
    platform: Type.Union(LINK_APP_PLATFORMS.map((p) => Type.Literal(p))),
    clickId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    installReferrer: Type.Optional(
      Type.String({
        maxLength: 2048,
        description: 'The raw Play Install Referrer string; its `svc_click_id` is used',
      }),
    ),
    userAgent: Type.Optional(
      Type.String({
        maxLength: 1024,
        description:
          'The device browser’s user agent (e.g. the WebView default); the request’s when omitted',
      }),
    ),
    deviceId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'A stable app-install-scoped id; when seen before, the event is a reinstall',
      }),
    ),
  },
  { additionalProperties: false },
);
export type DeferredBody = Static<typeof DeferredBody>;

export const MATCH_TYPES = ['unique', 'probable', 'none'] as const;
export type MatchType = (typeof MATCH_TYPES)[number];

export const DeferredResult = Type.Object({
  matchType: Type.Union(MATCH_TYPES.map((m) => Type.Literal(m))),
  link: Type.Union([Link, Type.Null()]),
  clickId: Type.Union([Type.String(), Type.Null()]),
  event: Type.Union([Type.Literal('install'), Type.Literal('reinstall')]),
});
export type DeferredResult = Static<typeof DeferredResult>;

export const LINK_EVENT_TYPES = ['click', 'install', 'open', 'reinstall', 'custom'] as const;
export type LinkEventType = (typeof LINK_EVENT_TYPES)[number];

export const LinkEventBody = Type.Object(
  {
    type: Type.Union(LINK_EVENT_TYPES.map((t) => Type.Literal(t))),
    linkId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    slug: Type.Optional(Slug),
    domain: Type.Optional(HostName),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    properties: Type.Optional(
      Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { maxProperties: 100 }),
    ),
  },
  { additionalProperties: false },
);
export type LinkEventBody = Static<typeof LinkEventBody>;

export const LinkEventAccepted = Type.Object({ id: Type.String() });

export const LinkStatsQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ format: 'date', description: 'First day (UTC), inclusive' })),
    to: Type.Optional(Type.String({ format: 'date', description: 'Last day (UTC), inclusive' })),
  },
  { additionalProperties: false },
);

const Counts = Type.Object({
  click: Type.Integer(),
  install: Type.Integer(),
  open: Type.Integer(),
  reinstall: Type.Integer(),
  custom: Type.Integer(),
});
export const LinkStats = Type.Object({
  linkId: Type.String(),
  from: Type.String(),
  to: Type.String(),
  totals: Counts,
  days: Type.Array(Type.Composite([Type.Object({ date: Type.String() }), Counts])),
});
export type LinkStats = Static<typeof LinkStats>;

import type { Link } from '@svc/protocol';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Clock } from '../clock.ts';
import { newId } from '../ids.ts';
import type { SharedState } from '../state/index.ts';
import { json, type Store } from '../storage/db.ts';
import type { ClickRecorder } from './clicks.ts';
import { REFERRER_CLICK_ID } from './matching.ts';
import { detectPlatform } from './platform.ts';
import type { LinkDirectory, ResolvedLinkSettings, Snapshot } from './settings.ts';
import type { LinksTable } from './tables.ts';

const SLUG = /^[A-Za-z0-9_-]{1,64}$/;
const CACHE_TTL_MS = 10_000;
const CACHE_MAX_ENTRIES = 10_000;
const INVALIDATE_CHANNEL = 'links:invalidate';
/** Apple's path pattern for the short links (components format, iOS 13+). */
const AASA_COMPONENTS = [{ '/': '/l/*', comment: 'Svc short links' }];

/** A link as the redirect needs it, cached per (domain, slug). */
export interface RedirectLink {
  row: LinksTable;
  android: Link['android'];
  ios: Link['ios'];
  utm: Link['utm'];
  social: Link['social'];
  expiresAtMs: number | null;
  /** Where each platform goes, computed once per link and settings snapshot. */
  targets?: {
    snapshot: Snapshot;
    desktop: string;
    androidFallback: string | null;
    /** The store URL up to the click id (see {@link androidStorePrefix}). */
    androidStore: string | null;
    referrerRest: string;
    ios: string | null;
    /** How long a mobile click stays a deferred-match candidate: the project's window. */
    matchWindowMs: number;
  };
}

/**
 * The links redirects need, by (domain, slug), absences included: kept `CACHE_TTL_MS`, and
 * dropped on every node when a link changes (over the shared state's pub/sub).
 */
export class RedirectCache {
  private cache = new Map<string, { at: number; link: RedirectLink | null }>();

  constructor(
    private store: Store,
    private state: SharedState,
    private clock: Clock,
  ) {}

  /** Subscribes to other nodes' link changes; resolves with the unsubscribe function. */
  listen() {
    return this.state.subscribe(INVALIDATE_CHANNEL, (key) => this.cache.delete(key));
  }

  /** Forgets `domain/l/slug` here and on every other node. */
  async changed(domain: string, slug: string) {
    const key = `${domain}/${slug}`;
    this.cache.delete(key);
    await this.state.publish(INVALIDATE_CHANNEL, key);
  }

  /** The cached answer for `domain/l/slug`: a link, null (known not to exist), or undefined. */
  peek(domain: string, slug: string): RedirectLink | null | undefined {
    const hit = this.cache.get(`${domain}/${slug}`);
    return hit && this.clock.now() - hit.at < CACHE_TTL_MS ? hit.link : undefined;
  }

  /** The link behind `domain/l/slug`, read from the store and cached; null when there is none. */
  async load(domain: string, slug: string): Promise<RedirectLink | null> {
    const row = await this.store.db
      .selectFrom('links')
      .selectAll()
      .where('domain', '=', domain)
      .where('slug', '=', slug)
      .executeTakeFirst();
    const link: RedirectLink | null = row
      ? {
          row,
          android: row.android === null ? null : json(row.android),
          ios: row.ios === null ? null : json(row.ios),
          utm: row.utm === null ? null : json(row.utm),
          social: row.social === null ? null : json(row.social),
          expiresAtMs: row.expires_at === null ? null : Date.parse(row.expires_at),
        }
      : null;
    // Evict the oldest insertion (Map keeps insertion order).
    if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(`${domain}/${slug}`, { at: this.clock.now(), link });
    return link;
  }
}

function escapeHtml(text: string) {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}

function page(title: string, body: string, head = '') {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)}</title>${head}
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:15vh auto;padding:0 1rem;color:#222}</style>
</head><body>${body}</body></html>
`;
}

/** What the redirect answers: a 302 to a target, or a page. */
export interface RedirectAnswer {
  status: 200 | 302 | 404 | 410;
  headers: Record<string, string>;
  body?: string;
}

// Pages we serve load nothing and run nothing.
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; img-src https: http:; style-src 'unsafe-inline'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'content-type': 'text/html; charset=utf-8',
};

function pageAnswer(status: RedirectAnswer['status'], html: string): RedirectAnswer {
  return { status, headers: PAGE_HEADERS, body: html };
}

/**
 * A destination as a `Location` header carries it: parsed and written back by the URL parser, so
 * non-ASCII characters are percent-encoded (UTF-8) and an internationalised host is in punycode.
 * Links keep the URL as it was given; only the header needs the ASCII form.
 */
function headerUrl(raw: string) {
  return new URL(raw).href;
}

/** The destination with `utm_*` query parameters added where it does not already carry them. */
function withUtm(raw: string, utm: RedirectLink['utm']) {
  const url = new URL(raw);
  for (const [key, value] of Object.entries(utm ?? {})) {
    if (value !== undefined && !url.searchParams.has(`utm_${key}`))
      url.searchParams.set(`utm_${key}`, value);
  }
  return url.href;
}

/**
 * The store URL an Android user without the app goes to, up to and including `referrer=` and the
 * referrer's `svc_click_id=`, URL-encoded: the click id is appended per request, then the rest
 * of the referrer (see {@link referrerRest}). A click id (`clk_` and Crockford base32) reads
 * the same URL-encoded, so only the parts around it are encoded, once per link.
 */
function androidStorePrefix(link: RedirectLink, settings: ResolvedLinkSettings): string | null {
  const packageName = link.android?.packageName ?? settings.android[0]?.packageName;
  if (!packageName) return null;
  const app = settings.android.find((a) => a.packageName === packageName);
  const store = new URL(
    app?.storeUrl ??
      `https://play.google.com/store/apps/details?id=${encodeURIComponent(packageName)}`,
  );
  store.searchParams.delete('referrer');
  const base = store.toString();
  return `${base}${store.search ? '&' : '?'}referrer=${encodeURIComponent(`${REFERRER_CLICK_ID}=`)}`;
}

/**
 * What follows the click id in the install referrer: the `&utm_…=…` part, form-encoded, then
 * URL-encoded once more as part of the `referrer` query value; the same for every click.
 */
function referrerRest(link: RedirectLink): string {
  const utm = new URLSearchParams();
  for (const [key, value] of Object.entries(link.utm ?? {})) {
    if (value !== undefined) utm.set(`utm_${key}`, value);
  }
  const encoded = utm.toString();
  return encoded ? encodeURIComponent(`&${encoded}`) : '';
}

/** Where an iOS user without the app goes: the fallback, else the App Store. */
function iosTarget(link: RedirectLink, settings: ResolvedLinkSettings): string | null {
  if (link.ios?.fallbackUrl) return headerUrl(link.ios.fallbackUrl);
  const app =
    (link.ios?.bundleId && settings.ios.find((a) => a.bundleId === link.ios!.bundleId)) ||
    settings.ios[0];
  const appStoreId = link.ios?.appStoreId ?? app?.appStoreId;
  return appStoreId ? `https://apps.apple.com/app/id${appStoreId}` : null;
}

/** Each platform's target for `link`, computed once per settings snapshot. */
function targetsFor(link: RedirectLink, snapshot: Snapshot, directory: LinkDirectory) {
  if (link.targets?.snapshot !== snapshot) {
    const settings = directory.settingsIn(snapshot, link.row.project_id);
    const androidFallback = link.android?.fallbackUrl;
    link.targets = {
      snapshot,
      desktop: withUtm(link.row.url, link.utm),
      androidFallback: androidFallback ? headerUrl(androidFallback) : null,
      androidStore: androidFallback ? null : androidStorePrefix(link, settings),
      referrerRest: referrerRest(link),
      ios: iosTarget(link, settings),
      matchWindowMs: settings.deferredWindowSeconds * 1000,
    };
  }
  return link.targets;
}

/** The page a link-preview bot gets: Open Graph and Twitter Card tags from `social`. */
function socialPage(link: RedirectLink, shortUrl: string) {
  const title = link.social?.title ?? new URL(link.row.url).host;
  const description = link.social?.description;
  const image = link.social?.imageUrl;
  const meta = (attribute: string, pairs: [string, string | undefined][]) =>
    pairs
      .filter(([, content]) => content)
      .map(([name, content]) => `\n<meta ${attribute}="${name}" content="${escapeHtml(content!)}">`)
      .join('');
  const head =
    meta('property', [
      ['og:title', title],
      ['og:url', shortUrl],
      ['og:type', 'website'],
      ['og:description', description],
      ['og:image', image],
    ]) +
    meta('name', [
      ['twitter:card', image ? 'summary_large_image' : 'summary'],
      ['twitter:title', title],
      ['twitter:description', description],
      ['twitter:image', image],
      ['description', description],
    ]);
  const paragraph = description ? `<p>${escapeHtml(description)}</p>` : '';
  return page(title, `<h1>${escapeHtml(title)}</h1>${paragraph}`, head);
}

const NOT_FOUND = pageAnswer(
  404,
  page(
    'Link not found',
    '<h1>Link not found</h1><p>This link does not exist. Check that it was copied in full.</p>',
  ),
);
const EXPIRED = pageAnswer(
  410,
  page('Link expired', '<h1>Link expired</h1><p>This link is no longer active.</p>'),
);

/**
 * Decides what `GET /l/{slug}` answers on a link domain, and records the click: one decision
 * for every request, answered without waiting when the link domains and the link (or its
 * absence) are cached, which is the common case.
 */
export class Redirector {
  constructor(
    private cache: RedirectCache,
    private directory: LinkDirectory,
    private clicks: ClickRecorder,
    private clock: Clock,
    /** The short URL of `domain/l/slug` (what a preview card names). */
    private shortUrl: (domain: string, slug: string) => string,
  ) {}

  /**
   * The answer to a visit of `host/l/slug`: at once when the link domains and the link (or its
   * absence) are cached, else a promise of it once they are loaded.
   */
  answer(
    host: string,
    slug: string,
    userAgent: string,
    ip: string,
    /** False for a HEAD request: the same answer, but no click is recorded. */
    record = true,
  ): RedirectAnswer | Promise<RedirectAnswer> {
    const snapshot = this.directory.fresh();
    const domain = snapshot && this.directory.domainIn(snapshot, host);
    const link = domain ? this.cache.peek(domain, slug) : undefined;
    if (snapshot && domain && link !== undefined) {
      return this.decide(snapshot, domain, slug, link, userAgent, ip, record);
    }
    return this.load(host, slug).then(([loaded, at, found]) =>
      this.decide(loaded, at, slug, found, userAgent, ip, record),
    );
  }

  private async load(host: string, slug: string) {
    const snapshot = await this.directory.current();
    const domain = this.directory.domainIn(snapshot, host);
    // A cached slug was checked when it was loaded; only a miss needs the shape check.
    let link = this.cache.peek(domain, slug);
    if (link === undefined) link = SLUG.test(slug) ? await this.cache.load(domain, slug) : null;
    return [snapshot, domain, link] as const;
  }

  private decide(
    snapshot: Snapshot,
    domain: string,
    slug: string,
    link: RedirectLink | null,
    userAgent: string,
    ip: string,
    record: boolean,
  ): RedirectAnswer {
    if (!link) return NOT_FOUND;
    const now = this.clock.now();
    if (link.expiresAtMs !== null && link.expiresAtMs <= now) return EXPIRED;
    const platform = detectPlatform(userAgent);
    // Previews are not clicks: they are answered with the card and not recorded.
    if (platform === 'bot') return pageAnswer(200, socialPage(link, this.shortUrl(domain, slug)));
    const targets = targetsFor(link, snapshot, this.directory);
    const clickId = newId('clk', now);
    if (record)
      this.clicks.record({
        id: clickId,
        projectId: link.row.project_id,
        linkId: link.row.id,
        platform,
        ip,
        userAgent,
        ms: now,
        matchWindowMs: targets.matchWindowMs,
      });
    let location = targets.desktop;
    if (platform === 'android') {
      if (targets.androidFallback) location = targets.androidFallback;
      else if (targets.androidStore)
        location = targets.androidStore + clickId + targets.referrerRest;
    } else if (platform === 'ios' && targets.ios) {
      location = targets.ios;
    }
    return {
      status: 302,
      headers: { 'cache-control': 'private, no-store', 'referrer-policy': 'no-referrer', location },
    };
  }
}

const OBJECT = { type: 'object', additionalProperties: true };
const htmlPage = (description: string) => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});
const jsonBody = (description: string, schema: object) => ({
  description,
  content: { 'application/json': { schema } },
});

function send(reply: FastifyReply, answer: RedirectAnswer) {
  return reply.code(answer.status).headers(answer.headers).send(answer.body);
}

/**
 * The public Links routes: `GET /l/{slug}` on any link domain, and the association files Android
 * and iOS fetch to verify App Links / Universal Links for it.
 */
export function publicLinkRoutes(
  app: FastifyInstance,
  redirector: Redirector,
  directory: LinkDirectory,
) {
  app.get<{ Params: { slug: string } }>(
    '/l/:slug',
    {
      schema: {
        tags: ['links'],
        summary: 'Short-link redirect (public)',
        description:
          'Android → store with the click id in the Play Install Referrer (or fallback); iOS → fallback or App Store; desktop → destination; link-preview bots → HTML with social meta tags. Unknown → 404 page, expired → 410 page.',
        response: {
          200: htmlPage('A preview card for link-preview bots (Open Graph, Twitter Card)'),
          302: { description: 'To the target for the visitor’s platform', type: 'null' },
          404: htmlPage('No such link'),
          410: htmlPage('The link has expired'),
        },
      },
    },
    (request, reply) => {
      const userAgent = request.headers['user-agent'] ?? '';
      const host = request.host.toLowerCase();
      // HEAD (link checkers, prefetchers) gets the same answer and records no click.
      const answer = redirector.answer(
        host,
        request.params.slug,
        userAgent,
        request.ip,
        request.method !== 'HEAD',
      );
      // Not an async function: the usual answer, from the cache, costs no promise.
      if (!(answer instanceof Promise)) {
        send(reply, answer);
        return;
      }
      return answer.then((a) => send(reply, a));
    },
  );

  const wellKnownHeaders = {
    'cache-control': 'public, max-age=300',
    'x-content-type-options': 'nosniff',
  };

  app.get(
    '/.well-known/assetlinks.json',
    {
      schema: {
        tags: ['links'],
        summary: 'Android Digital Asset Links for this link domain (public)',
        response: {
          200: jsonBody('Digital Asset Links statements', { type: 'array', items: OBJECT }),
        },
      },
    },
    async (request, reply) => {
      const domain = await directory.domainForHost(request.host.toLowerCase());
      const { android } = await directory.appsForDomain(domain);
      const statements = android.map((a) => ({
        relation: ['delegate_permission/common.handle_all_urls'],
        target: {
          namespace: 'android_app',
          package_name: a.packageName,
          sha256_cert_fingerprints: a.sha256CertFingerprints,
        },
      }));
      return reply
        .headers(wellKnownHeaders)
        .type('application/json')
        .serializer(JSON.stringify)
        .send(statements);
    },
  );

  app.get(
    '/.well-known/apple-app-site-association',
    {
      schema: {
        tags: ['links'],
        summary: 'Apple App Site Association for this link domain (public)',
        response: { 200: jsonBody('The applinks of the apps of this domain', OBJECT) },
      },
    },
    async (request, reply) => {
      const domain = await directory.domainForHost(request.host.toLowerCase());
      const { ios } = await directory.appsForDomain(domain);
      const appIds = [...new Set(ios.map((a) => `${a.teamId}.${a.bundleId}`))];
      const body = {
        applinks: {
          details: appIds.length > 0 ? [{ appIDs: appIds, components: AASA_COMPONENTS }] : [],
        },
      };
      return reply
        .headers(wellKnownHeaders)
        .type('application/json')
        .serializer(JSON.stringify)
        .send(body);
    },
  );
}

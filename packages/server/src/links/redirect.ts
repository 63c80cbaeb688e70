import type { Link } from '@svc/protocol';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Clock } from '../clock.ts';
import { newId } from '../ids.ts';
import type { SharedState } from '../state/index.ts';
import type { Store } from '../storage/db.ts';
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
interface RedirectLink {
  link: Link;
  projectId: string;
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
interface RedirectAnswer {
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

/** The destination with `utm_*` query parameters added where it does not already carry them. */
function withUtm(link: Link) {
  const url = new URL(link.url);
  for (const [key, value] of Object.entries(link.utm ?? {})) {
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
function androidStorePrefix(link: Link, settings: ResolvedLinkSettings): string | null {
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
function referrerRest(link: Link): string {
  const utm = new URLSearchParams();
  for (const [key, value] of Object.entries(link.utm ?? {})) {
    if (value !== undefined) utm.set(`utm_${key}`, value);
  }
  const encoded = utm.toString();
  return encoded ? encodeURIComponent(`&${encoded}`) : '';
}

/** Where an iOS user without the app goes: the fallback, else the App Store. */
function iosTarget(link: Link, settings: ResolvedLinkSettings): string | null {
  // Fallbacks go out as the URL parser writes them: percent-encoded UTF-8, punycode hosts.
  if (link.ios?.fallbackUrl) return new URL(link.ios.fallbackUrl).href;
  const app =
    (link.ios?.bundleId && settings.ios.find((a) => a.bundleId === link.ios!.bundleId)) ||
    settings.ios[0];
  const appStoreId = link.ios?.appStoreId ?? app?.appStoreId;
  return appStoreId ? `https://apps.apple.com/app/id${appStoreId}` : null;
}

/** Each platform's target for `cached`, computed once per settings snapshot. */
function targetsFor(cached: RedirectLink, snapshot: Snapshot, directory: LinkDirectory) {
  if (cached.targets?.snapshot !== snapshot) {
    const { link } = cached;
    const settings = directory.settingsIn(snapshot, cached.projectId);
    const androidFallback = link.android?.fallbackUrl;
    cached.targets = {
      snapshot,
      desktop: withUtm(link),
      androidFallback: androidFallback ? new URL(androidFallback).href : null,
      androidStore: androidFallback ? null : androidStorePrefix(link, settings),
      referrerRest: referrerRest(link),
      ios: iosTarget(link, settings),
      matchWindowMs: settings.deferredWindowSeconds * 1000,
    };
  }
  return cached.targets;
}

/** The page a link-preview bot gets: Open Graph and Twitter Card tags from `social`. */
function socialPage(link: Link) {
  const title = link.social?.title ?? new URL(link.url).host;
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
      ['og:url', link.shortUrl],
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
 * Decides what `GET /l/{slug}` answers on a link domain, and records the click. Links are cached
 * by (domain, slug), absences included, for `CACHE_TTL_MS`, and dropped on every node when a
 * link changes (over the shared state's pub/sub).
 */
export class Redirector {
  private cache = new Map<string, { at: number; link: RedirectLink | null }>();

  constructor(
    private store: Store,
    private state: SharedState,
    private clock: Clock,
    private directory: LinkDirectory,
    private clicks: ClickRecorder,
    private toLink: (row: LinksTable) => Link,
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

  /** The answer to a visit of `host/l/slug`: at once when what it needs is cached. */
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
    const link = domain ? this.peek(domain, slug) : undefined;
    if (snapshot && link !== undefined) return this.decide(snapshot, link, userAgent, ip, record);
    return this.load(host, slug).then(([loaded, found]) =>
      this.decide(loaded, found, userAgent, ip, record),
    );
  }

  /** The cached answer for `domain/l/slug`: a link, null (known not to exist), or undefined. */
  private peek(domain: string, slug: string): RedirectLink | null | undefined {
    const hit = this.cache.get(`${domain}/${slug}`);
    return hit && this.clock.now() - hit.at < CACHE_TTL_MS ? hit.link : undefined;
  }

  private async load(host: string, slug: string) {
    const snapshot = await this.directory.current();
    const domain = this.directory.domainIn(snapshot, host);
    let link = this.peek(domain, slug);
    // A cached slug was checked when it was loaded; only a miss needs the shape check.
    if (link === undefined) {
      const row = SLUG.test(slug)
        ? await this.store.db
            .selectFrom('links')
            .selectAll()
            .where('domain', '=', domain)
            .where('slug', '=', slug)
            .executeTakeFirst()
        : undefined;
      link = row
        ? {
            link: this.toLink(row),
            projectId: row.project_id,
            expiresAtMs: row.expires_at === null ? null : Date.parse(row.expires_at),
          }
        : null;
      // Evict the oldest insertion (Map keeps insertion order).
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(`${domain}/${slug}`, { at: this.clock.now(), link });
    }
    return [snapshot, link] as const;
  }

  private decide(
    snapshot: Snapshot,
    cached: RedirectLink | null,
    userAgent: string,
    ip: string,
    record: boolean,
  ): RedirectAnswer {
    if (!cached) return NOT_FOUND;
    const now = this.clock.now();
    if (cached.expiresAtMs !== null && cached.expiresAtMs <= now) return EXPIRED;
    const platform = detectPlatform(userAgent);
    // Previews are not clicks: they are answered with the card and not recorded.
    if (platform === 'bot') return pageAnswer(200, socialPage(cached.link));
    const targets = targetsFor(cached, snapshot, this.directory);
    const clickId = newId('clk', now);
    if (record)
      this.clicks.record({
        id: clickId,
        projectId: cached.projectId,
        linkId: cached.link.id,
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
const jsonBody = (description: string, schema: object) => ({
  description,
  content: { 'application/json': { schema } },
});
const htmlPage = (description: string) => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
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
      // HEAD (link checkers, prefetchers) gets the same answer and records no click.
      const answer = redirector.answer(
        request.host.toLowerCase(),
        request.params.slug,
        request.headers['user-agent'] ?? '',
        request.ip,
        request.method !== 'HEAD',
      );
      // Not an async function: the usual answer, from the cache, costs no promise.
      if (answer instanceof Promise) return answer.then((a) => send(reply, a));
      send(reply, answer);
    },
  );

  /** A well-known file: JSON, cached by clients for five minutes. */
  const wellKnown = (
    url: string,
    summary: string,
    response: object,
    body: (apps: Awaited<ReturnType<LinkDirectory['appsForDomain']>>) => unknown,
  ) =>
    app.get(
      url,
      { schema: { tags: ['links'], summary, response: { 200: response } } },
      async (request, reply) => {
        const domain = await directory.domainForHost(request.host.toLowerCase());
        return reply
          .headers({ 'cache-control': 'public, max-age=300', 'x-content-type-options': 'nosniff' })
          .type('application/json')
          .serializer(JSON.stringify)
          .send(body(await directory.appsForDomain(domain)));
      },
    );

  wellKnown(
    '/.well-known/assetlinks.json',
    'Android Digital Asset Links for this link domain (public)',
    jsonBody('Digital Asset Links statements', { type: 'array', items: OBJECT }),
    ({ android }) =>
      android.map((a) => ({
        relation: ['delegate_permission/common.handle_all_urls'],
        target: {
          namespace: 'android_app',
          package_name: a.packageName,
          sha256_cert_fingerprints: a.sha256CertFingerprints,
        },
      })),
  );
  wellKnown(
    '/.well-known/apple-app-site-association',
    'Apple App Site Association for this link domain (public)',
    jsonBody('The applinks of the apps of this domain', OBJECT),
    ({ ios }) => {
      const appIds = [...new Set(ios.map((a) => `${a.teamId}.${a.bundleId}`))];
      const details = appIds.length > 0 ? [{ appIDs: appIds, components: AASA_COMPONENTS }] : [];
      return { applinks: { details } };
    },
  );
}

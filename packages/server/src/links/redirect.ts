import type { FastifyInstance } from 'fastify';
import type { FastFront } from '../http/front.ts';
import { type LinkService, REFERRER_CLICK_ID, type RedirectLink } from './service.ts';
import type { LinkDirectory, ResolvedLinkSettings, Snapshot } from './settings.ts';
import { detectPlatform } from './user-agent.ts';

const SLUG = /^[A-Za-z0-9_-]{1,64}$/;
/** Apple's path pattern for the short links (components format, iOS 13+). */
const AASA_COMPONENTS = [{ '/': '/l/*', comment: 'Svc short links' }];

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
 * of the referrer (see {@link referrerRest}).
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

/**
 * The Play Install Referrer value is `svc_click_id=<id>&utm_…`, form-encoded, then URL-encoded
 * once more as the `referrer` query value (`referrer=svc_click_id%3Dclk_…%26utm_source%3D…`).
 * A click id is `clk_` and Crockford base32, which URL encoding leaves as it is: the parts
 * around it are encoded once per link, not per click.
 */
function androidTarget(prefix: string, rest: string, clickId: string): string {
  return prefix + clickId + rest;
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

function socialPage(link: RedirectLink, shortUrl: string) {
  const title = link.social?.title ?? new URL(link.row.url).host;
  const description = link.social?.description;
  const tags = [
    ['og:title', title],
    ['og:url', shortUrl],
    ['og:type', 'website'],
    ...(description ? [['og:description', description]] : []),
    ...(link.social?.imageUrl ? [['og:image', link.social.imageUrl]] : []),
  ]
    .map(([p, c]) => `\n<meta property="${p}" content="${escapeHtml(c)}">`)
    .join('');
  const twitter = [
    ['twitter:card', link.social?.imageUrl ? 'summary_large_image' : 'summary'],
    ['twitter:title', title],
    ...(description ? [['twitter:description', description]] : []),
    ...(link.social?.imageUrl ? [['twitter:image', link.social.imageUrl]] : []),
  ]
    .map(([n, c]) => `\n<meta name="${n}" content="${escapeHtml(c)}">`)
    .join('');
  const head = `${tags}${twitter}${description ? `\n<meta name="description" content="${escapeHtml(description)}">` : ''}`;
  return page(
    title,
    `<h1>${escapeHtml(title)}</h1>${description ? `<p>${escapeHtml(description)}</p>` : ''}`,
    head,
  );
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
 * Decides what `GET /l/{slug}` answers on a link domain, and records the click. Two entries, one
 * decision: {@link answerNow} when everything is cached (the common case, answered without
 * waiting on anything, also from the server's fast front), {@link answer} otherwise.
 */
export class Redirector {
  constructor(
    private service: LinkService,
    private directory: LinkDirectory,
  ) {}

  /**
   * The answer when the link domains and this link (or its absence) are cached; `undefined`
   * when something must be loaded first. `slug` must already be a well-formed slug.
   */
  answerNow(host: string, slug: string, userAgent: string, ip: string): RedirectAnswer | undefined {
    const snapshot = this.directory.fresh();
    if (!snapshot) return undefined;
    const domain = this.directory.domainIn(snapshot, host);
    const link = this.service.peek(domain, slug);
    if (link === undefined) return undefined;
    return this.decide(snapshot, domain, slug, link, userAgent, ip);
  }

  /** The answer, loading the link domains or the link first when they are not cached. */
  async answer(host: string, slug: string, userAgent: string, ip: string): Promise<RedirectAnswer> {
    const snapshot = this.directory.fresh() ?? (await this.directory.current());
    const domain = this.directory.domainIn(snapshot, host);
    let link = this.service.peek(domain, slug);
    if (link === undefined) {
      // Only a cache miss needs the shape check: a cached slug was checked when it was loaded.
      if (!SLUG.test(slug)) return NOT_FOUND;
      link = await this.service.findForRedirect(domain, slug);
    }
    return this.decide(snapshot, domain, slug, link, userAgent, ip);
  }

  private decide(
    snapshot: Snapshot,
    domain: string,
    slug: string,
    link: RedirectLink | null,
    userAgent: string,
    ip: string,
  ): RedirectAnswer {
    if (!link) return NOT_FOUND;
    if (this.service.isExpired(link)) return EXPIRED;
    const platform = detectPlatform(userAgent);
    // Previews are not clicks: they are answered with the card and not recorded.
    if (platform === 'bot') {
      return pageAnswer(200, socialPage(link, this.service.shortUrl(domain, slug)));
    }
    const targets = targetsFor(link, snapshot, this.directory);
    const clickId = this.service.recordClick(link, platform, ip, userAgent, targets.matchWindowMs);
    let location = targets.desktop;
    if (platform === 'android') {
      if (targets.androidFallback) location = targets.androidFallback;
      else if (targets.androidStore)
        location = androidTarget(targets.androidStore, targets.referrerRest, clickId);
    } else if (platform === 'ios' && targets.ios) {
      location = targets.ios;
    }
    return {
      status: 302,
      headers: {
        'cache-control': 'private, no-store',
        'referrer-policy': 'no-referrer',
        location,
      },
    };
  }
}

/**
 * The public Links routes: `GET /l/{slug}` on any link domain, and the association files Android
 * and iOS fetch to verify App Links / Universal Links for it. Cached redirects are also answered
 * by the server's fast front (see `http/front.ts`), ahead of Fastify's routing.
 */
export function publicLinkRoutes(
  app: FastifyInstance,
  service: LinkService,
  directory: LinkDirectory,
  front: FastFront,
) {
  const redirector = new Redirector(service, directory);
  front.get('/l/', '/l/:slug', (rest, request, client) => {
    const query = rest.indexOf('?');
    const slug = query === -1 ? rest : rest.slice(0, query);
    if (!SLUG.test(slug)) return undefined;
    const userAgent = request.headers['user-agent'] ?? '';
    return redirector.answerNow(client.host.toLowerCase(), slug, userAgent, client.ip);
  });
  app.get<{ Params: { slug: string } }>(
    '/l/:slug',
    {
      schema: {
        tags: ['links'],
        summary: 'Short-link redirect (public)',
        description:
          'Android → store with the click id in the Play Install Referrer (or fallback); iOS → fallback or App Store; desktop → destination; link-preview bots → HTML with social meta tags. Unknown → 404 page, expired → 410 page.',
      },
    },
    async (request, reply) => {
      const host = request.host.toLowerCase();
      const userAgent = request.headers['user-agent'] ?? '';
      const answer = await redirector.answer(host, request.params.slug, userAgent, request.ip);
      return reply.code(answer.status).headers(answer.headers).send(answer.body);
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

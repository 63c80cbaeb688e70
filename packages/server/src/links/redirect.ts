import type { FastifyInstance, FastifyReply } from 'fastify';
import { type LinkService, REFERRER_CLICK_ID, type RedirectLink } from './service.ts';
import type { LinkDirectory, ResolvedLinkSettings, Snapshot } from './settings.ts';
import { detectPlatform } from './user-agent.ts';

const SLUG = /^[A-Za-z0-9_-]{1,64}$/;
// Pages we serve load nothing and run nothing.
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; img-src https: http:; style-src 'unsafe-inline'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};
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

function sendPage(reply: FastifyReply, status: number, html: string) {
  return reply
    .code(status)
    .headers({ ...PAGE_HEADERS, 'cache-control': 'no-store' })
    .type('text/html; charset=utf-8')
    .send(html);
}

/** `utm_*` query parameters added to a destination that does not already carry them. */
function withUtm(raw: string, utm: RedirectLink['utm']) {
  if (!utm) return raw;
  const url = new URL(raw);
  for (const [key, value] of Object.entries(utm)) {
    if (value !== undefined && !url.searchParams.has(`utm_${key}`))
      url.searchParams.set(`utm_${key}`, value);
  }
  return url.toString();
}

/**
 * The store URL an Android user without the app goes to, up to and including `referrer=`: the
 * click id and UTM values are appended per request (see {@link androidTarget}).
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
  return `${base}${store.search ? '&' : '?'}referrer=`;
}

/** The `&utm_…=…` part of the install referrer, form-encoded; the same for every click. */
function referrerUtm(link: RedirectLink): string {
  const utm = new URLSearchParams();
  for (const [key, value] of Object.entries(link.utm ?? {})) {
    if (value !== undefined) utm.set(`utm_${key}`, value);
  }
  const encoded = utm.toString();
  return encoded ? `&${encoded}` : '';
}

/**
 * The Play Install Referrer value: `svc_click_id=<id>&utm_…`, form-encoded, then URL-encoded
 * once more as the `referrer` query value (`referrer=svc_click_id%3Dclk_…%26utm_source%3D…`).
 */
function androidTarget(prefix: string, utm: string, clickId: string): string {
  return prefix + encodeURIComponent(`${REFERRER_CLICK_ID}=${clickId}${utm}`);
}

/** Where an iOS user without the app goes: the fallback, else the App Store. */
function iosTarget(link: RedirectLink, settings: ResolvedLinkSettings): string | null {
  if (link.ios?.fallbackUrl) return link.ios.fallbackUrl;
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
    const desktop = withUtm(link.row.url, link.utm);
    link.targets = {
      snapshot,
      desktop,
      androidStore: link.android?.fallbackUrl ? null : androidStorePrefix(link, settings),
      referrerUtm: referrerUtm(link),
      ios: iosTarget(link, settings),
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

const NOT_FOUND = page(
  'Link not found',
  '<h1>Link not found</h1><p>This link does not exist. Check that it was copied in full.</p>',
);
const EXPIRED = page('Link expired', '<h1>Link expired</h1><p>This link is no longer active.</p>');

/**
 * The public Links routes: `GET /l/{slug}` on any link domain, and the association files Android
 * and iOS fetch to verify App Links / Universal Links for it.
 */
export function publicLinkRoutes(
  app: FastifyInstance,
  service: LinkService,
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
      },
    },
    async (request, reply) => {
      const { slug } = request.params;
      // The common case (settings and link cached) runs without waiting on anything.
      const snapshot = directory.fresh() ?? (await directory.current());
      const domain = directory.domainIn(snapshot, request.host.toLowerCase());
      let link = service.peek(domain, slug);
      if (link === undefined) {
        // Only a cache miss needs the shape check: a cached slug was checked when it was loaded.
        if (!SLUG.test(slug)) return sendPage(reply, 404, NOT_FOUND);
        link = await service.findForRedirect(domain, slug);
      }
      if (!link) return sendPage(reply, 404, NOT_FOUND);
      if (service.isExpired(link)) return sendPage(reply, 410, EXPIRED);
      const userAgent = request.headers['user-agent'] ?? '';
      const platform = detectPlatform(userAgent);
      // Previews are not clicks: they are answered with the card and not recorded.
      if (platform === 'bot') {
        return sendPage(reply, 200, socialPage(link, service.shortUrl(domain, slug)));
      }
      const clickId = service.recordClick(link, platform, request.ip, userAgent);
      const targets = targetsFor(link, snapshot, directory);
      let location = targets.desktop;
      if (platform === 'android') {
        if (link.android?.fallbackUrl) location = link.android.fallbackUrl;
        else if (targets.androidStore)
          location = androidTarget(targets.androidStore, targets.referrerUtm, clickId);
      } else if (platform === 'ios' && targets.ios) {
        location = targets.ios;
      }
      return reply
        .code(302)
        .header('cache-control', 'private, no-store')
        .header('referrer-policy', 'no-referrer')
        .header('location', location)
        .send();
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

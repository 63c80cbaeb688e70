import { createHash, randomInt } from 'node:crypto';
import {
  type CreateLinkBody,
  type DeferredBody,
  type DeferredResult,
  LINK_EVENT_PROPERTIES_MAX_BYTES,
  type LINK_EVENT_TYPES,
  LINK_PARAMS_MAX_BYTES,
  type Link,
  type LinkEventBody,
  type LinkStats,
  type ListLinksQuery,
  type ResolveLinkQuery,
  type UpdateLinkBody,
} from '@svc/protocol';
import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import { ApiError } from '../http/problem.ts';
import { newId } from '../ids.ts';
import type { SharedState } from '../state/index.ts';
import { json, type Store } from '../storage/db.ts';
import { newClickId } from './click-id.ts';
import type { ClickRecorder } from './clicks.ts';
import { destinationAllowed, parseDestination } from './destination.ts';
import type { LinkDirectory, ResolvedLinkSettings } from './settings.ts';
import type { LinksTable } from './tables.ts';
import type { Platform } from './user-agent.ts';

const SLUG_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Generated slugs: 8 base62 characters (≈47.6 random bits). */
const SLUG_LENGTH = 8;
const CACHE_TTL_MS = 10_000;
const CACHE_MAX_ENTRIES = 10_000;
const INVALIDATE_CHANNEL = 'links:invalidate';
/** The key of the click id in the Play Install Referrer string. */
export const REFERRER_CLICK_ID = 'svc_click_id';
const DAY_MS = 86_400_000;
const MAX_STATS_DAYS = 366;

function generateSlug() {
  let slug = '';
  for (let i = 0; i < SLUG_LENGTH; i++) slug += SLUG_ALPHABET[randomInt(SLUG_ALPHABET.length)];
  return slug;
}

// The last timestamp formatted: clicks arrive many to a millisecond under load.
let lastIsoMs = Number.NaN;
let lastIso = '';
function iso(ms: number) {
  if (ms !== lastIsoMs) {
    lastIso = new Date(ms).toISOString();
    lastIsoMs = ms;
  }
  return lastIso;
}

function jsonOrNull(value: unknown) {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/** Serialised size of a JSON value; a value too deep to serialise counts as too large. */
function jsonBytes(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value));
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** Which unique constraint an insert or update broke, if any (SQLite and PostgreSQL). */
function uniqueViolation(err: unknown): 'slug' | 'external_id' | null {
  const e = err as { code?: string; message?: string; constraint?: string };
  const text = `${e.constraint ?? ''} ${e.message ?? ''}`;
  if (e.code !== '23505' && !String(e.code).startsWith('SQLITE_CONSTRAINT')) return null;
  if (/links_domain_slug_key|links\.domain, links\.slug/.test(text)) return 'slug';
  if (/links_project_external_id_key|links\.project_id, links\.external_id/.test(text))
    return 'external_id';
  return null;
}

/** A link as the redirect needs it, cached per (domain, slug). */
export interface RedirectLink {
  row: LinksTable;
  android: Link['android'];
  ios: Link['ios'];
  utm: Link['utm'];
  social: Link['social'];
  expiresAtMs: number | null;
  /** Where each platform goes, computed once per settings snapshot (see redirect.ts). */
  targets?: {
    snapshot: object;
    desktop: string;
    androidFallback: string | null;
    androidStore: string | null;
    referrerRest: string;
    ios: string | null;
    /** How long a mobile click stays a deferred-match candidate: the project's window. */
    matchWindowMs: number;
  };
}

/**
 * Links: CRUD, the redirect's lookup (cached in process, invalidated on every node when a link
 * changes), resolve, deferred matching, events and stats.
 */
export class LinkService {
  private cache = new Map<string, { at: number; link: RedirectLink | null }>();

  constructor(
    private store: Store,
    private state: SharedState,
    private clock: Clock,
    private directory: LinkDirectory,
    private clicks: ClickRecorder,
    /** `SVC_PUBLIC_URL`: short links on the default host are built from it. */
    private publicUrl: string,
  ) {}

  /** Subscribes to other nodes' link changes; returns the unsubscribe function. */
  listen() {
    return this.state.subscribe(INVALIDATE_CHANNEL, (key) => this.cache.delete(key));
  }

  private async changed(domain: string, slug: string) {
    const key = `${domain}/${slug}`;
    this.cache.delete(key);
    await this.state.publish(INVALIDATE_CHANNEL, key);
  }

  shortUrl(domain: string, slug: string) {
    return domain === this.directory.defaultHost
      ? `${this.publicUrl}/l/${slug}`
      : `https://${domain}/l/${slug}`;
  }

  toLink(row: LinksTable): Link {
    return {
      id: row.id,
      slug: row.slug,
      domain: row.domain,
      shortUrl: this.shortUrl(row.domain, row.slug),
      url: row.url,
      android: row.android === null ? null : json(row.android),
      ios: row.ios === null ? null : json(row.ios),
      params: json(row.params),
      utm: row.utm === null ? null : json(row.utm),
      social: row.social === null ? null : json(row.social),
      expiresAt: row.expires_at,
      externalId: row.external_id,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  /** A visitor's fingerprint, as clicks carry it (see click-batch.mjs). */
  fingerprint(ip: string, userAgent: string) {
    return this.clicks.fingerprint(ip, userAgent);
  }

  /** Checks the URLs and sizes of a link's fields against the rules and project settings. */
  private async checkContent(
    body: Partial<CreateLinkBody> | UpdateLinkBody,
    settings: ResolvedLinkSettings,
  ) {
    const destinations: [string, string][] = [];
    if (body.url !== undefined) destinations.push([body.url, 'url']);
    if (body.android?.fallbackUrl)
      destinations.push([body.android.fallbackUrl, 'android.fallbackUrl']);
    if (body.ios?.fallbackUrl) destinations.push([body.ios.fallbackUrl, 'ios.fallbackUrl']);
    for (const [raw, field] of destinations) {
      const url = parseDestination(raw, field);
      if (settings.allowedDestinations && !destinationAllowed(url, settings.allowedDestinations)) {
        throw new ApiError(
          'destination_not_allowed',
          `${field}: ${url.host} is not in the project's allowed destinations.`,
        );
      }
      // A short link pointing at a short link could loop, and hides where it ends up.
      if (url.pathname.startsWith('/l/') && (await this.directory.isLinkDomain(url.host))) {
        throw new ApiError('invalid_destination', `${field} must not point at another short link.`);
      }
    }
    if (body.social?.imageUrl) parseDestination(body.social.imageUrl, 'social.imageUrl');
    if (body.params !== undefined && jsonBytes(body.params) > LINK_PARAMS_MAX_BYTES) {
      throw new ApiError('params_too_large');
    }
    if (body.expiresAt && Date.parse(body.expiresAt) <= this.clock.now()) {
      throw new ApiError('invalid_request', 'expiresAt must be in the future.', {
        errors: [{ path: 'body.expiresAt', message: 'must be in the future' }],
      });
    }
  }

  async create(projectId: string, body: CreateLinkBody): Promise<Link> {
    const settings = await this.directory.settings(projectId);
    const domain = body.domain ?? settings.domains[0] ?? this.directory.defaultHost;
    if (domain !== this.directory.defaultHost && !settings.domains.includes(domain)) {
      throw new ApiError('domain_not_allowed', `${domain} is not one of the project's domains.`);
    }
    await this.checkContent(body, settings);
    const now = iso(this.clock.now());
    const row: LinksTable = {
      id: newId('lnk', this.clock.now()),
      project_id: projectId,
      domain,
      slug: body.slug ?? generateSlug(),
      url: body.url,
      android: jsonOrNull(body.android),
      ios: jsonOrNull(body.ios),
      params: JSON.stringify(body.params ?? {}),
      utm: jsonOrNull(body.utm),
      social: jsonOrNull(body.social),
      expires_at: body.expiresAt ? iso(Date.parse(body.expiresAt)) : null,
      external_id: body.externalId ?? null,
      created_at: now,
      updated_at: now,
    };
    // A generated slug that collides is drawn again; a chosen one is the caller's conflict.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.store.db.insertInto('links').values(row).execute();
        break;
      } catch (err) {
        const which = uniqueViolation(err);
        if (which === 'slug' && body.slug === undefined && attempt < 5) {
          row.slug = generateSlug();
          continue;
        }
        if (which === 'slug') throw new ApiError('slug_taken', `${domain}/l/${row.slug} exists.`);
        if (which === 'external_id') throw new ApiError('external_id_taken');
        throw err;
      }
    }
    await this.changed(row.domain, row.slug);
    return this.toLink(row);
  }

  private async row(projectId: string, id: string): Promise<LinksTable> {
    const row = await this.store.db
      .selectFrom('links')
      .selectAll()
      .where('id', '=', id)
      .where('project_id', '=', projectId)
      .executeTakeFirst();
    if (!row) throw new ApiError('link_not_found');
    return row;
  }

  async get(projectId: string, id: string): Promise<Link> {
    return this.toLink(await this.row(projectId, id));
  }

  async list(projectId: string, query: ListLinksQuery) {
    const page = query.page ?? 1;
    const limit = query.limit ?? 10;
    let base = this.store.db.selectFrom('links').where('project_id', '=', projectId);
    if (query.slug !== undefined) base = base.where('slug', '=', query.slug);
    if (query.externalId !== undefined) base = base.where('external_id', '=', query.externalId);
    if (query.q !== undefined) {
      const pattern = `%${query.q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      base = base.where((eb) =>
        eb.or(
          ['slug', 'url', 'external_id'].map(
            (column) => sql<boolean>`lower(${sql.ref(column)}) like ${pattern} escape '\\'`,
          ),
        ),
      );
    }
    const [{ total }] = await base
      .select((eb) => eb.fn.countAll<string | number>().as('total'))
      .execute();
    const rows = await base
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .offset((page - 1) * limit)
      .execute();
    return { items: rows.map((r) => this.toLink(r)), meta: { total: Number(total), page, limit } };
  }

  async update(projectId: string, id: string, body: UpdateLinkBody): Promise<Link> {
    const current = await this.row(projectId, id);
    await this.checkContent(body, await this.directory.settings(projectId));
    const patch: Partial<LinksTable> = { updated_at: iso(this.clock.now()) };
    if (body.url !== undefined) patch.url = body.url;
    if (body.slug !== undefined) patch.slug = body.slug;
    if (body.android !== undefined) patch.android = jsonOrNull(body.android);
    if (body.ios !== undefined) patch.ios = jsonOrNull(body.ios);
    if (body.params !== undefined) patch.params = JSON.stringify(body.params);
    if (body.utm !== undefined) patch.utm = jsonOrNull(body.utm);
    if (body.social !== undefined) patch.social = jsonOrNull(body.social);
    if (body.expiresAt !== undefined)
      patch.expires_at = body.expiresAt === null ? null : iso(Date.parse(body.expiresAt));
    if (body.externalId !== undefined) patch.external_id = body.externalId;
    try {
      await this.store.db
        .updateTable('links')
        .set(patch)
        .where('id', '=', id)
        .where('project_id', '=', projectId)
        .execute();
    } catch (err) {
      const which = uniqueViolation(err);
      if (which === 'slug') throw new ApiError('slug_taken');
      if (which === 'external_id') throw new ApiError('external_id_taken');
      throw err;
    }
    await this.changed(current.domain, current.slug);
    if (patch.slug !== undefined) await this.changed(current.domain, patch.slug);
    return this.get(projectId, id);
  }

  async delete(projectId: string, id: string) {
    const current = await this.row(projectId, id);
    await this.store.db.transaction().execute(async (tx) => {
      await tx
        .deleteFrom('links')
        .where('id', '=', id)
        .where('project_id', '=', projectId)
        .execute();
      // Its click counts go with it; its raw clicks leave the log when they are pruned.
      await tx.deleteFrom('link_click_days').where('link_id', '=', id).execute();
    });
    await this.changed(current.domain, current.slug);
  }

  /** The cached answer for `domain/l/slug`: a link, null (known not to exist), or undefined. */
  peek(domain: string, slug: string): RedirectLink | null | undefined {
    const hit = this.cache.get(`${domain}/${slug}`);
    return hit && this.clock.now() - hit.at < CACHE_TTL_MS ? hit.link : undefined;
  }

  /** The link behind `domain/l/slug` for the redirect; null when there is none. Cached. */
  async findForRedirect(domain: string, slug: string): Promise<RedirectLink | null> {
    const key = `${domain}/${slug}`;
    const now = this.clock.now();
    const hit = this.peek(domain, slug);
    if (hit !== undefined) return hit;
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
    if (this.cache.size >= CACHE_MAX_ENTRIES) {
      // Evict the oldest insertion (Map keeps insertion order).
      this.cache.delete(this.cache.keys().next().value!);
    }
    this.cache.set(key, { at: now, link });
    return link;
  }

  isExpired(link: { expiresAtMs: number | null }) {
    return link.expiresAtMs !== null && link.expiresAtMs <= this.clock.now();
  }

  /** Queues a click for the store; returns its id (the one the install referrer carries). */
  recordClick(
    link: RedirectLink,
    platform: Platform,
    ip: string,
    userAgent: string,
    matchWindowMs: number,
  ): string {
    const now = this.clock.now();
    const id = newClickId(now);
    this.clicks.record(
      id,
      link.row.project_id,
      link.row.id,
      platform,
      ip,
      userAgent,
      now,
      matchWindowMs,
    );
    return id;
  }

  /** The link an app was opened with (App Link / Universal Link); records an `open`. */
  async resolve(projectId: string, query: ResolveLinkQuery): Promise<Link> {
    let domain = query.domain;
    let slug = query.slug;
    if (query.url !== undefined) {
      let url: URL;
      try {
        url = new URL(query.url);
      } catch {
        throw new ApiError('link_not_found', 'url is not a short link.');
      }
      const m = /^\/l\/([A-Za-z0-9_-]{1,64})\/?$/.exec(url.pathname);
      if ((url.protocol !== 'https:' && url.protocol !== 'http:') || !m) {
        throw new ApiError('link_not_found', 'url is not a short link.');
      }
      domain = await this.directory.domainForHost(url.host.toLowerCase());
      slug = m[1];
    }
    if (slug === undefined) {
      throw new ApiError('invalid_request', 'Give url or slug.', {
        errors: [{ path: 'querystring.url', message: 'url or slug is required' }],
      });
    }
    const row = await this.findBySlug(projectId, slug, domain);
    if (row.expires_at !== null && Date.parse(row.expires_at) <= this.clock.now()) {
      throw new ApiError('link_expired');
    }
    await this.insertEvent(projectId, row.id, 'open');
    return this.toLink(row);
  }

  private async findBySlug(projectId: string, slug: string, domain?: string) {
    let query = this.store.db
      .selectFrom('links')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('slug', '=', slug);
    if (domain !== undefined) query = query.where('domain', '=', domain);
    const rows = await query.limit(2).execute();
    if (rows.length === 0) throw new ApiError('link_not_found');
    if (rows.length > 1) {
      throw new ApiError('invalid_request', 'That slug exists on several domains; give domain.');
    }
    return rows[0];
  }

  private async insertEvent(
    projectId: string,
    linkId: string,
    type: (typeof LINK_EVENT_TYPES)[number],
    extra: { name?: string; properties?: unknown; clickId?: string } = {},
  ) {
    const id = newId('lev', this.clock.now());
    await this.store.db
      .insertInto('link_events')
      .values({
        id,
        project_id: projectId,
        link_id: linkId,
        type,
        name: extra.name ?? null,
        properties: jsonOrNull(extra.properties),
        click_id: extra.clickId ?? null,
        created_at: iso(this.clock.now()),
      })
      .execute();
    return id;
  }

  /**
   * Matches an app's first open to an earlier click: by the click id from the install referrer
   * (`unique`), else by the fingerprint of IP and user agent within the project's window
   * (`probable`, the latest click first), else `none`. Each click is claimed by one conditional
   * UPDATE (`claimed_at IS NULL`), so it matches at most one install even under concurrent
   * requests on several nodes. Records an `install`, or a `reinstall` when `deviceId` was seen.
   */
  async deferred(
    projectId: string,
    body: DeferredBody,
    ip: string,
    requestUserAgent: string,
  ): Promise<DeferredResult> {
    await this.clicks.flush();
    const settings = await this.directory.settings(projectId);
    const now = this.clock.now();
    let matchType: DeferredResult['matchType'] = 'none';
    let clickId = body.clickId ?? referrerClickId(body.installReferrer);
    let linkId: string | null = null;
    if (clickId !== null) {
      const click = await this.clicks.find(clickId);
      if (
        click !== null &&
        click.projectId === projectId &&
        click.ms >= now - settings.referrerWindowSeconds * 1000 &&
        click.ms <= now &&
        (await this.claim(projectId, click.id, click.linkId, now))
      ) {
        matchType = 'unique';
        linkId = click.linkId;
      } else {
        clickId = null;
      }
    }
    if (matchType === 'none') {
      const fingerprint = this.fingerprint(ip, body.userAgent ?? requestUserAgent);
      const candidates = await this.clicks.candidates(
        projectId,
        body.platform,
        fingerprint,
        now - settings.deferredWindowSeconds * 1000,
      );
      // Skip those already claimed in one query; then claim the newest of the rest (a lost race
      // moves on to the next).
      const claimed = new Set(
        candidates.length === 0
          ? []
          : (
              await this.store.db
                .selectFrom('link_click_claims')
                .select('click_id')
                .where(
                  'click_id',
                  'in',
                  candidates.map((c) => c.clickId),
                )
                .execute()
            ).map((r) => r.click_id),
      );
      for (const candidate of candidates) {
        if (candidate.ms > now || claimed.has(candidate.clickId)) continue;
        if (await this.claim(projectId, candidate.clickId, candidate.linkId, now)) {
          matchType = 'probable';
          clickId = candidate.clickId;
          linkId = candidate.linkId;
          break;
        }
      }
    }
    let link: Link | null = null;
    if (linkId !== null) {
      const row = await this.store.db
        .selectFrom('links')
        .selectAll()
        .where('id', '=', linkId)
        .where('project_id', '=', projectId)
        .executeTakeFirst();
      if (row) {
        link = this.toLink(row);
      } else {
        // The link was deleted since the click.
        matchType = 'none';
        clickId = null;
        linkId = null;
      }
    }
    let event: DeferredResult['event'] = 'install';
    if (body.deviceId !== undefined) {
      const inserted = await this.store.db
        .insertInto('link_devices')
        .values({
          project_id: projectId,
          device_hash: createHash('sha256').update(body.deviceId).digest('base64url'),
          first_seen_at: iso(now),
        })
        .onConflict((oc) => oc.columns(['project_id', 'device_hash']).doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) event = 'reinstall';
    }
    if (linkId !== null) await this.insertEvent(projectId, linkId, event, { clickId: clickId! });
    return { matchType, link, clickId, event };
  }

  /**
   * Deletes what is left of a project that no longer exists: its claims and the click counts of
   * its (deleted) links. Its raw clicks leave the log when they are pruned.
   */
  async forgetProject(projectId: string) {
    const exists = await this.store.db
      .selectFrom('projects')
      .select('id')
      .where('id', '=', projectId)
      .executeTakeFirst();
    if (exists) return;
    await this.store.db
      .deleteFrom('link_click_claims')
      .where('project_id', '=', projectId)
      .execute();
    await this.store.db
      .deleteFrom('link_click_days')
      .where('link_id', 'not in', (eb) => eb.selectFrom('links').select('id'))
      .execute();
  }

  /** Claims a click for an install; true when this call won it (a click is claimed once). */
  private async claim(projectId: string, clickId: string, linkId: string, nowMs: number) {
    const result = await this.store.db
      .insertInto('link_click_claims')
      .values({
        click_id: clickId,
        project_id: projectId,
        link_id: linkId,
        claimed_at: iso(nowMs),
      })
      .onConflict((oc) => oc.column('click_id').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  async recordEvent(projectId: string, body: LinkEventBody): Promise<string> {
    if ((body.linkId === undefined) === (body.slug === undefined)) {
      throw new ApiError('invalid_request', 'Give exactly one of linkId and slug.', {
        errors: [{ path: 'body.linkId', message: 'exactly one of linkId and slug is required' }],
      });
    }
    if (body.type === 'custom' && body.name === undefined) {
      throw new ApiError('invalid_request', 'A custom event needs a name.', {
        errors: [{ path: 'body.name', message: 'is required for custom events' }],
      });
    }
    if (
      body.properties !== undefined &&
      jsonBytes(body.properties) > LINK_EVENT_PROPERTIES_MAX_BYTES
    ) {
      throw new ApiError('invalid_request', 'properties exceed 4 KiB of JSON.', {
        errors: [{ path: 'body.properties', message: 'must be at most 4 KiB of JSON' }],
      });
    }
    const row =
      body.linkId !== undefined
        ? await this.row(projectId, body.linkId)
        : await this.findBySlug(projectId, body.slug!, body.domain);
    return this.insertEvent(projectId, row.id, body.type, {
      name: body.name,
      properties: body.properties,
    });
  }

  /** Counts per event type and per UTC day, `from`…`to` inclusive (default: the last 30 days). */
  async stats(projectId: string, linkId: string, from?: string, to?: string): Promise<LinkStats> {
    await this.row(projectId, linkId);
    const today = iso(this.clock.now()).slice(0, 10);
    const toDay = to ?? today;
    const fromDay = from ?? iso(Date.parse(toDay) - 29 * DAY_MS).slice(0, 10);
    const fromMs = Date.parse(fromDay);
    const endMs = Date.parse(toDay) + DAY_MS;
    const days = (endMs - fromMs) / DAY_MS;
    if (!(days >= 1 && days <= MAX_STATS_DAYS)) {
      throw new ApiError(
        'invalid_request',
        `from must be on or before to, at most ${MAX_STATS_DAYS} days apart.`,
      );
    }
    await this.clicks.flush();
    const day = sql<string>`substr(created_at, 1, 10)`;
    const [clicks, events] = await Promise.all([
      this.store.db
        .selectFrom('link_click_days')
        .select(['day', 'clicks as n'])
        .where('link_id', '=', linkId)
        .where('day', '>=', fromDay)
        .where('day', '<=', toDay)
        .execute(),
      this.store.db
        .selectFrom('link_events')
        .select(['type', day.as('day'), (eb) => eb.fn.countAll<string | number>().as('n')])
        .where('link_id', '=', linkId)
        .where('created_at', '>=', iso(fromMs))
        .where('created_at', '<', iso(endMs))
        .groupBy(['type', day])
        .execute(),
    ]);
    const empty = () => ({ click: 0, install: 0, open: 0, reinstall: 0, custom: 0 });
    const byDay = new Map<string, ReturnType<typeof empty>>();
    for (let ms = fromMs; ms < endMs; ms += DAY_MS) byDay.set(iso(ms).slice(0, 10), empty());
    const totals = empty();
    for (const c of clicks) {
      byDay.get(c.day)!.click += Number(c.n);
      totals.click += Number(c.n);
    }
    for (const e of events) {
      byDay.get(e.day)![e.type] += Number(e.n);
      totals[e.type] += Number(e.n);
    }
    return {
      linkId,
      from: fromDay,
      to: toDay,
      totals,
      days: [...byDay].map(([date, counts]) => ({ date, ...counts })),
    };
  }
}

/** The click id inside a Play Install Referrer string (`svc_click_id=clk_…&utm_source=…`). */
export function referrerClickId(referrer: string | undefined): string | null {
  if (!referrer) return null;
  let params: URLSearchParams;
  try {
    // Some readers hand over the referrer still URL-encoded once more.
    const decoded = referrer.includes('=') ? referrer : decodeURIComponent(referrer);
    params = new URLSearchParams(decoded);
  } catch {
    return null;
  }
  const id = params.get(REFERRER_CLICK_ID);
  return id && /^[A-Za-z0-9_-]{1,64}$/.test(id) ? id : null;
}

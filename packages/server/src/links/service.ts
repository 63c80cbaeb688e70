import { randomInt } from 'node:crypto';
import {
  type CreateLinkBody,
  LINK_PARAMS_MAX_BYTES,
  type Link,
  type ListLinksQuery,
  type UpdateLinkBody,
} from '@svc/protocol';
import { sql } from 'kysely';
import { type Clock, iso } from '../clock.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { json, type Store } from '../storage/db.ts';
import { destinationAllowed, parseDestination } from './destination.ts';
import type { LinkDirectory, ResolvedLinkSettings } from './settings.ts';
import type { LinksTable } from './tables.ts';

const SLUG_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A generated slug: 8 base62 characters (≈47.6 random bits). */
function generateSlug() {
  let slug = '';
  for (let i = 0; i < 8; i++) slug += SLUG_ALPHABET[randomInt(SLUG_ALPHABET.length)];
  return slug;
}

export function jsonOrNull(value: unknown) {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

/** Serialised size of a JSON value; a value too deep to serialise counts as too large. */
export function jsonBytes(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value));
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Rethrows a broken unique constraint of `links` as its API error (SQLite and PostgreSQL), or
 * returns true for a generated slug's collision, which the caller draws again.
 */
function conflict(err: unknown, slug: string, redraw: boolean): true {
  const e = err as { code?: string; message?: string; constraint?: string };
  const text = `${e.constraint ?? ''} ${e.message ?? ''}`;
  if (e.code === '23505' || String(e.code).startsWith('SQLITE_CONSTRAINT')) {
    if (/links_domain_slug_key|links\.domain, links\.slug/.test(text)) {
      if (redraw) return true;
      throw new ApiError('slug_taken', `${slug} exists.`);
    }
    if (/links_project_external_id_key|links\.project_id, links\.external_id/.test(text))
      throw new ApiError('external_id_taken');
  }
  throw err;
}

/** The columns a create or update body sets: only those of the fields it gives. */
function columns(body: CreateLinkBody | UpdateLinkBody): Partial<LinksTable> {
  const row: Partial<LinksTable> = {};
  if (body.url !== undefined) row.url = body.url;
  if (body.slug !== undefined) row.slug = body.slug;
  for (const field of ['android', 'ios', 'utm', 'social'] as const) {
    if (body[field] !== undefined) row[field] = jsonOrNull(body[field]);
  }
  if (body.params !== undefined) row.params = JSON.stringify(body.params);
  if (body.expiresAt !== undefined)
    row.expires_at = body.expiresAt === null ? null : iso(Date.parse(body.expiresAt));
  if (body.externalId !== undefined) row.external_id = body.externalId;
  return row;
}

/**
 * Links themselves: create, read, list, update and delete, with the rules their content must
 * follow. Every change is reported through `changed` (the redirect's cache listens).
 */
export class LinkService {
  constructor(
    private store: Store,
    private clock: Clock,
    private directory: LinkDirectory,
    /** `SVC_PUBLIC_URL`: short links on the default host are built from it. */
    private publicUrl: string,
    /** Called after a link at `domain/l/slug` is created, changed or deleted. */
    private changed: (domain: string, slug: string) => Promise<void>,
  ) {}

  toLink(row: LinksTable): Link {
    const { domain, slug } = row;
    const onDefaultHost = domain === this.directory.defaultHost;
    return {
      id: row.id,
      slug,
      domain,
      shortUrl: onDefaultHost ? `${this.publicUrl}/l/${slug}` : `https://${domain}/l/${slug}`,
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
      throw invalidField(
        'body.expiresAt',
        'must be in the future',
        'expiresAt must be in the future.',
      );
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
      slug: generateSlug(),
      url: body.url,
      android: null,
      ios: null,
      params: '{}',
      utm: null,
      social: null,
      expires_at: null,
      external_id: null,
      created_at: now,
      updated_at: now,
      ...columns(body),
    };
    // A generated slug that collides is drawn again; a chosen one is the caller's conflict.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.store.db.insertInto('links').values(row).execute();
        break;
      } catch (err) {
        conflict(err, `${domain}/l/${row.slug}`, body.slug === undefined && attempt < 5);
        row.slug = generateSlug();
      }
    }
    await this.changed(row.domain, row.slug);
    return this.toLink(row);
  }

  /** The project's link `id`; `link_not_found` otherwise. */
  async row(projectId: string, id: string) {
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
    const patch = { ...columns(body), updated_at: iso(this.clock.now()) };
    try {
      await this.store.db
        .updateTable('links')
        .set(patch)
        .where('id', '=', id)
        .where('project_id', '=', projectId)
        .execute();
    } catch (err) {
      conflict(err, `${current.domain}/l/${patch.slug}`, false);
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
      // Its click counts go with it; its clicks leave when they are pruned.
      await tx.deleteFrom('link_click_days').where('link_id', '=', id).execute();
    });
    await this.changed(current.domain, current.slug);
  }

  /**
   * The project's link with this slug (on `domain` when given; it must then be unique). `from`:
   * where the request carries the domain, for the error when it is missing.
   */
  async findBySlug(projectId: string, slug: string, domain: string | undefined, from: string) {
    let query = this.store.db
      .selectFrom('links')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('slug', '=', slug);
    if (domain !== undefined) query = query.where('domain', '=', domain);
    const rows = await query.limit(2).execute();
    if (rows.length === 0) throw new ApiError('link_not_found');
    if (rows.length > 1) {
      throw invalidField(
        `${from}.domain`,
        'is required: the slug exists on several domains',
        'That slug exists on several domains; give domain.',
      );
    }
    return rows[0];
  }
}

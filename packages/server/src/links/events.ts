import {
  FIRST_TIMESTAMP_MS,
  LINK_EVENT_PROPERTIES_MAX_BYTES,
  type Link,
  type LinkEventBody,
  type LinkEventType,
  type LinkStats,
  type ResolveLinkQuery,
} from '@svc/protocol';
import { sql } from 'kysely';
import { type Clock, iso } from '../clock.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { isForeignKeyViolation, type Store } from '../storage/db.ts';
import type { ClickRecorder } from './clicks.ts';
import { jsonBytes, jsonOrNull, type LinkService } from './service.ts';
import type { LinkDirectory } from './settings.ts';

const DAY_MS = 86_400_000;
const MAX_STATS_DAYS = 366;
const SHORT_PATH = /^\/l\/([A-Za-z0-9_-]{1,64})\/?$/;

/**
 * What happens to links after they are shared: the events apps report (install, open,
 * reinstall, custom), `resolve` (an app opened with a link records an `open`), and the stats
 * that count them with the redirects' clicks per UTC day.
 */
export class LinkEvents {
  constructor(
    private store: Store,
    private clock: Clock,
    private directory: LinkDirectory,
    private links: LinkService,
    private clicks: ClickRecorder,
  ) {}

  /** The link an app was opened with (App Link / Universal Link); records an `open`. */
  async resolve(projectId: string, query: ResolveLinkQuery): Promise<Link> {
    let domain = query.domain;
    let slug = query.slug;
    if (query.url !== undefined) {
      const url = URL.canParse(query.url) ? new URL(query.url) : null;
      const m = url && /^https?:$/.test(url.protocol) && SHORT_PATH.exec(url.pathname);
      if (!url || !m) throw new ApiError('link_not_found', 'url is not a short link.');
      domain = await this.directory.domainForHost(url.host.toLowerCase());
      slug = m[1];
    }
    if (slug === undefined) {
      throw invalidField('querystring.url', 'url or slug is required', 'Give url or slug.');
    }
    const row = await this.links.findBySlug(projectId, slug, domain, 'querystring');
    if (row.expires_at !== null && Date.parse(row.expires_at) <= this.clock.now()) {
      throw new ApiError('link_expired');
    }
    await this.insert(projectId, row.id, 'open');
    return this.links.toLink(row);
  }

  /** Records an event of a link; returns its id. */
  async insert(
    projectId: string,
    linkId: string,
    type: LinkEventType,
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
      .execute()
      .catch((err: unknown) => {
        // The link was deleted since it was read.
        throw isForeignKeyViolation(err) ? new ApiError('link_not_found') : err;
      });
    return id;
  }

  async recordEvent(projectId: string, body: LinkEventBody): Promise<string> {
    if ((body.linkId === undefined) === (body.slug === undefined)) {
      const message = 'exactly one of linkId and slug is required';
      throw invalidField('body.linkId', message, 'Give exactly one of linkId and slug.');
    }
    if (body.type === 'custom' && body.name === undefined) {
      throw invalidField(
        'body.name',
        'is required for custom events',
        'A custom event needs a name.',
      );
    }
    if (jsonBytes(body.properties ?? null) > LINK_EVENT_PROPERTIES_MAX_BYTES) {
      const detail = 'properties exceed 4 KiB of JSON.';
      throw invalidField('body.properties', 'must be at most 4 KiB of JSON', detail);
    }
    const row =
      body.linkId !== undefined
        ? await this.links.row(projectId, body.linkId)
        : await this.links.findBySlug(projectId, body.slug!, body.domain, 'body');
    return this.insert(projectId, row.id, body.type, body);
  }

  /** Counts per event type and per UTC day, `from`…`to` inclusive (default: the last 30 days). */
  async stats(projectId: string, linkId: string, from?: string, to?: string): Promise<LinkStats> {
    await this.links.row(projectId, linkId);
    const toDay = to ?? iso(this.clock.now()).slice(0, 10);
    const fromDay =
      from ?? iso(Math.max(Date.parse(toDay) - 29 * DAY_MS, FIRST_TIMESTAMP_MS)).slice(0, 10);
    const fromMs = Date.parse(fromDay);
    const endMs = Date.parse(toDay) + DAY_MS;
    const days = (endMs - fromMs) / DAY_MS;
    if (!(days >= 1 && days <= MAX_STATS_DAYS)) {
      throw invalidField(
        'querystring.from',
        `must be on or before to, at most ${MAX_STATS_DAYS} days before it`,
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
    for (const { type, day, n } of [
      ...clicks.map((c) => ({ ...c, type: 'click' as const })),
      ...events,
    ]) {
      byDay.get(day)![type] += Number(n);
      totals[type] += Number(n);
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

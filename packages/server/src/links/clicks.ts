import { createHmac, hash } from 'node:crypto';
import { LINK_APP_PLATFORMS, type LinkAppPlatform } from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { iso } from '../clock.ts';
import { idTime, newId } from '../ids.ts';
import type { RecentMember } from '../state/index.ts';
import type { Store } from '../storage/db.ts';
import { type CandidateStore, candidate, candidateKey } from './candidates.ts';
import { isAppPlatform, type Platform } from './platform.ts';

const DAY_MS = 86_400_000;
/** Clicks kept for a retry while the store refuses writes; beyond this, the oldest are dropped. */
const MAX_WAITING = 100_000;

/** Raw clicks are kept for the longest referrer window a project can set; day counts stay. */
export const CLICK_RETENTION_MS = 90 * DAY_MS;

/** One redirect's click, as the redirect hands it over. */
export interface Click {
  /** `clk_` + ULID: its time is the click's. */
  id: string;
  projectId: string;
  linkId: string;
  platform: Platform;
  ip: string;
  userAgent: string;
  ms: number;
  /** How long a mobile click stays a deferred-match candidate: its project's window. */
  matchWindowMs: number;
}

/** A click read back from the store. */
export type StoredClick = Pick<Click, 'id' | 'projectId' | 'linkId' | 'platform' | 'ms'> & {
  fingerprint: string;
};

/**
 * The fingerprint key, derived from the server secret so that the secret itself is never hashed
 * next to user data.
 */
export function fingerprintKey(secret: string) {
  return createHmac('sha256', secret).update('svc links click fingerprint v1').digest('base64url');
}

/**
 * SHA-256 of (key, IP, user agent), its first 22 base64url characters (132 bits): matchable, but
 * without the server secret neither reversible to an IP nor comparable across installations. An
 * IPv4-mapped IPv6 address counts as its IPv4 address.
 */
export function clickFingerprint(key: string, ip: string, userAgent: string) {
  const v4 = ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip.toLowerCase();
  return hash('sha256', `${key}\0${v4}\0${userAgent}`, 'base64url').slice(0, 22);
}

/** The time a click id carries (its ULID's first 48 bits), or null for anything else. */
export function clickIdTime(clickId: string): number | null {
  return /^clk_[0-9A-HJKMNP-TV-Z]{26}$/.test(clickId) ? idTime(clickId) : null;
}

/** The smallest click id of millisecond `ms`: ids sort by time, so ranges of ids are of time. */
function firstClickIdAt(ms: number) {
  return newId('clk', Math.max(0, ms)).slice(0, 14);
}

/** A batch as written: `link_clicks` rows, counts per link and UTC day, candidates. */
interface BatchRows {
  clicks: [id: string, project: string, link: string, platform: Platform, fingerprint: string][];
  days: [link: string, day: string, clicks: number][];
  candidates: RecentMember[];
}

/**
 * Records redirect clicks off the redirect's path. A click joins the queue, written at most
 * `maxDelayMs` later (at once when `maxBatch` clicks wait) as one batch: its clicks into
 * `link_clicks` and their counts per link and UTC day into `link_click_days` (one statement on
 * PostgreSQL, one transaction on SQLite), then its mobile clicks into the candidate store.
 * Readers that need every click this node served (matching, stats) call `flush()` first. While
 * the store refuses writes, batches wait (up to a bound) and are tried again; a crash loses at
 * most the last `maxDelayMs` of clicks.
 */
export class ClickRecorder {
  private queue: Click[] = [];
  /** Batches taken from the queue but not written yet, oldest first. */
  private waiting: Click[][] = [];
  private waitingClicks = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private store: Store,
    private candidates: CandidateStore,
    /** From {@link fingerprintKey}. */
    private fingerprintKey: string,
    private log: FastifyBaseLogger,
    private maxDelayMs = 100,
    private maxBatch = 2000,
  ) {}

  /** Queues one click. Returns at once. */
  record(click: Click) {
    this.queue.push(click);
    if (this.queue.length >= this.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs);
  }

  /** Resolves once every click queued before the call is written (or waits for a retry). */
  flush(): Promise<void> {
    clearTimeout(this.timer ?? undefined);
    this.timer = null;
    if (this.queue.length > 0) {
      this.waiting.push(this.queue);
      this.waitingClicks += this.queue.length;
      this.queue = [];
      // Beyond the bound, the oldest go first, after the one that may be being written now.
      while (this.waitingClicks > MAX_WAITING && this.waiting.length > 2) {
        const [dropped] = this.waiting.splice(1, 1);
        this.waitingClicks -= dropped.length;
        this.log.error({ dropped: dropped.length }, 'link clicks dropped: too many waiting');
      }
    }
    // Batches kept from a failed write are tried again too.
    if (this.waiting.length > 0) this.writing = this.writing.then(() => this.drain());
    return this.writing;
  }

  /** The fingerprint of a visitor, as clicks carry it. */
  fingerprint(ip: string, userAgent: string) {
    return clickFingerprint(this.fingerprintKey, ip, userAgent);
  }

  /** The click `clickId` names; null when there is none (or it is malformed). */
  async find(clickId: string): Promise<StoredClick | null> {
    const ms = clickIdTime(clickId);
    if (ms === null) return null;
    const row = await this.store.db
      .selectFrom('link_clicks')
      .selectAll()
      .where('id', '=', clickId)
      .executeTakeFirst();
    if (!row) return null;
    const { id, project_id: projectId, link_id: linkId, platform, fingerprint } = row;
    return { id, projectId, linkId, platform, fingerprint, ms };
  }

  /**
   * Puts the candidates of the mobile clicks of the last `windowMs` back into the candidate
   * store, the newest `max` (for an in-process store, after a restart). Resolves with how many.
   */
  async restoreCandidates(nowMs: number, windowMs: number, max: number) {
    const rows = await this.store.db
      .selectFrom('link_clicks')
      .selectAll()
      .where('id', '>=', firstClickIdAt(nowMs - windowMs))
      .where('platform', 'in', [...LINK_APP_PLATFORMS])
      .orderBy('id', 'desc')
      .limit(max)
      .execute();
    const entries = rows.reverse().map((r) => {
      const key = candidateKey(r.project_id, r.platform as LinkAppPlatform, r.fingerprint);
      return candidate(key, r.id, r.link_id, clickIdTime(r.id) ?? 0, windowMs);
    });
    await this.candidates.add(entries, nowMs);
    return entries.length;
  }

  /** Deletes the clicks older than `beforeMs` (their day counts stay). */
  async prune(beforeMs: number) {
    await this.store.db
      .deleteFrom('link_clicks')
      .where('id', '<', firstClickIdAt(beforeMs))
      .execute();
  }

  /** Writes what is queued; no retries after this (a store down at shutdown loses the rest). */
  async close() {
    await this.flush();
    this.closed = true;
    clearTimeout(this.timer ?? undefined);
    this.timer = null;
    if (this.waitingClicks > 0) {
      this.log.error({ dropped: this.waitingClicks }, 'link clicks dropped at shutdown');
      this.waiting = [];
      this.waitingClicks = 0;
    }
  }

  /** Writes the waiting batches in order; on a failure, keeps them and tries again later. */
  private async drain() {
    while (this.waiting.length > 0) {
      const batch = this.waiting[0];
      const rows = this.rowsOf(batch);
      try {
        await this.write(rows);
      } catch (err) {
        this.log.error(
          { err, clicks: batch.length, waiting: this.waitingClicks },
          'link clicks not written; will retry',
        );
        if (!this.closed) this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs * 10);
        return;
      }
      if (this.waiting[0] === batch) this.waiting.shift();
      this.waitingClicks -= batch.length;
      try {
        await this.candidates.add(rows.candidates, batch[batch.length - 1].ms);
      } catch (err) {
        // Not retried: the clicks are written; only their probable matches are lost.
        this.log.error({ err, clicks: batch.length }, 'link click candidates not kept');
      }
    }
  }

  /** A batch's rows; a click from the visitor of the click before it reuses its fingerprint. */
  private rowsOf(batch: Click[]): BatchRows {
    const days = new Map<string, [string, string, number]>();
    const rows: BatchRows = { clicks: [], days: [], candidates: [] };
    let last: Click | undefined;
    let fingerprint = '';
    for (const c of batch) {
      if (c.ip !== last?.ip || c.userAgent !== last.userAgent)
        fingerprint = this.fingerprint(c.ip, c.userAgent);
      last = c;
      rows.clicks.push([c.id, c.projectId, c.linkId, c.platform, fingerprint]);
      const day = `${c.linkId} ${Math.floor(c.ms / DAY_MS)}`;
      const count = days.get(day);
      if (count) count[2]++;
      else days.set(day, [c.linkId, iso(c.ms).slice(0, 10), 1]);
      if (isAppPlatform(c.platform)) {
        const key = candidateKey(c.projectId, c.platform, fingerprint);
        rows.candidates.push(candidate(key, c.id, c.linkId, c.ms, c.matchWindowMs));
      }
    }
    rows.days = [...days.values()];
    return rows;
  }

  /** Writes a batch's clicks and day counts, all or nothing. */
  private async write({ clicks, days }: BatchRows) {
    const db = this.store.db;
    if (this.store.dialect === 'postgres') {
      // Columns as comma-joined texts (no id, platform or fingerprint holds one): far cheaper
      // for the client to send than text[] parameters.
      const split = (i: number) => sql`string_to_array(${clicks.map((c) => c[i]).join(',')}, ',')`;
      await sql`
        with clicks as (
          insert into link_clicks (id, project_id, link_id, platform, fingerprint)
          select * from unnest(${split(0)}, ${split(1)}, ${split(2)}, ${split(3)}, ${split(4)}))
        insert into link_click_days (link_id, day, clicks)
        select * from unnest(${days.map((d) => d[0])}::text[], ${days.map((d) => d[1])}::text[],
          ${days.map((d) => d[2])}::bigint[])
        on conflict (link_id, day) do update set clicks = link_click_days.clicks + excluded.clicks
      `.execute(db);
      return;
    }
    await db.transaction().execute(async (tx) => {
      await sql`
        insert into link_clicks (id, project_id, link_id, platform, fingerprint)
        select value->>0, value->>1, value->>2, value->>3, value->>4
        from json_each(${JSON.stringify(clicks)})
      `.execute(tx);
      await sql`
        insert into link_click_days (link_id, day, clicks)
        select value->>0, value->>1, value->>2 from json_each(${JSON.stringify(days)}) where true
        on conflict (link_id, day) do update set clicks = link_click_days.clicks + excluded.clicks
      `.execute(tx);
    });
  }
}

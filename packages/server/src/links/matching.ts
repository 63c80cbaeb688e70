import { createHash } from 'node:crypto';
import type { DeferredBody, DeferredResult } from '@svc/protocol';
import { type Clock, iso } from '../clock.ts';
import type { Store } from '../storage/db.ts';
import { type CandidateStore, candidateKey } from './candidates.ts';
import type { ClickRecorder } from './clicks.ts';
import type { LinkEvents } from './events.ts';
import type { LinkService } from './service.ts';
import type { LinkDirectory } from './settings.ts';

/** The key of the click id in the Play Install Referrer string. */
export const REFERRER_CLICK_ID = 'svc_click_id';

/** Deferred deep linking: an app's first open matched to the click that led to the install. */
export class DeferredMatcher {
  constructor(
    private store: Store,
    private clock: Clock,
    private directory: LinkDirectory,
    private links: LinkService,
    private events: LinkEvents,
    private clicks: ClickRecorder,
    private candidates: CandidateStore,
  ) {}

  /**
   * Matches an app's first open to an earlier click: by the install referrer's click id
   * (`unique`), else by the visitor's fingerprint within the project's window (`probable`, the
   * latest first), else `none`; a click is won once (`link_click_claims`), on any number of
   * nodes. Records an `install`, or a `reinstall` when `deviceId` was seen before.
   */
  async deferred(
    projectId: string,
    body: DeferredBody,
    ip: string,
    requestUserAgent: string,
  ): Promise<DeferredResult> {
    // Every click this node served is written, so it can be found.
    await this.clicks.flush();
    const settings = await this.directory.settings(projectId);
    const now = this.clock.now();
    const referred = body.clickId ?? referrerClickId(body.installReferrer);
    const fingerprint = this.clicks.fingerprint(ip, body.userAgent ?? requestUserAgent);
    const key = candidateKey(projectId, body.platform, fingerprint);
    const match =
      (referred !== null &&
        (await this.byReferrer(
          projectId,
          referred,
          now - settings.referrerWindowSeconds * 1000,
          now,
        ))) ||
      (await this.byFingerprint(key, projectId, now - settings.deferredWindowSeconds * 1000, now));
    // A match on a link deleted since the click is none.
    const row =
      match &&
      (await this.store.db
        .selectFrom('links')
        .selectAll()
        .where('id', '=', match.linkId)
        .where('project_id', '=', projectId)
        .executeTakeFirst());
    const event = await this.installEvent(projectId, body.deviceId, now);
    if (!match || !row) return { matchType: 'none', link: null, clickId: null, event };
    await this.events.insert(projectId, row.id, event, { clickId: match.clickId });
    return { matchType: match.type, link: this.links.toLink(row), clickId: match.clickId, event };
  }

  /** The click the referrer names, claimed, when it is the project's and inside the window. */
  private async byReferrer(projectId: string, clickId: string, sinceMs: number, nowMs: number) {
    const click = await this.clicks.find(clickId);
    if (!click || click.projectId !== projectId || click.ms < sinceMs || click.ms > nowMs)
      return null;
    if (!(await this.claim(projectId, click.id, click.linkId, nowMs))) return null;
    return { type: 'unique' as const, clickId: click.id, linkId: click.linkId };
  }

  /** The newest unclaimed candidate of the visitor's key since `sinceMs`, claimed. */
  private async byFingerprint(key: string, projectId: string, sinceMs: number, nowMs: number) {
    const candidates = await this.candidates.recall(key, sinceMs, nowMs);
    if (candidates.length === 0) return null;
    // Skip those already claimed in one query; a race lost on the rest moves on to the next.
    const ids = candidates.map((c) => c.clickId);
    const claimed = await this.store.db
      .selectFrom('link_click_claims')
      .select('click_id')
      .where('click_id', 'in', ids)
      .execute();
    const taken = new Set(claimed.map((r) => r.click_id));
    for (const c of candidates) {
      if (taken.has(c.clickId)) continue;
      if (await this.claim(projectId, c.clickId, c.linkId, nowMs)) {
        return { type: 'probable' as const, clickId: c.clickId, linkId: c.linkId };
      }
    }
    return null;
  }

  /** `install`, or `reinstall` when the project has seen the device (kept as a SHA-256). */
  private async installEvent(projectId: string, deviceId: string | undefined, nowMs: number) {
    if (deviceId === undefined) return 'install';
    const inserted = await this.store.db
      .insertInto('link_devices')
      .values({
        project_id: projectId,
        device_hash: createHash('sha256').update(deviceId).digest('base64url'),
        first_seen_at: iso(nowMs),
      })
      .onConflict((oc) => oc.columns(['project_id', 'device_hash']).doNothing())
      .executeTakeFirst();
    return Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0 ? 'reinstall' : 'install';
  }

  /**
   * Deletes what is left of a project that no longer exists: its claims and the click counts of
   * its (deleted) links. Its clicks leave when they are pruned.
   */
  async forgetProject(projectId: string) {
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
      .values({ click_id: clickId, project_id: projectId, link_id: linkId, claimed_at: iso(nowMs) })
      .onConflict((oc) => oc.column('click_id').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
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

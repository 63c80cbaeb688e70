import { createHash } from 'node:crypto';
import type { DeferredBody, DeferredResult, Link } from '@svc/protocol';
import type { Clock } from '../clock.ts';
import type { Store } from '../storage/db.ts';
import { CANDIDATES_PER_KEY, type CandidateStore, candidateKey } from './candidates.ts';
import type { ClickRecorder } from './clicks.ts';
import type { LinkEvents } from './events.ts';
import { iso, type LinkService } from './service.ts';
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
      const fingerprint = this.clicks.fingerprint(ip, body.userAgent ?? requestUserAgent);
      const candidates = await this.candidates.recall(
        candidateKey(projectId, body.platform, fingerprint),
        now - settings.deferredWindowSeconds * 1000,
        CANDIDATES_PER_KEY,
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
        link = this.links.toLink(row);
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
    if (linkId !== null) await this.events.insert(projectId, linkId, event, { clickId: clickId! });
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

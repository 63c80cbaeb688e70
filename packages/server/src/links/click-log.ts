/**
 * The click log's format, shared by the recorder, its writer thread's caller and the migration
 * that carried the older per-click rows over.
 *
 * Every redirect's click is one line — `id`, `project_id`, `link_id`, `platform`, `fingerprint`
 * and the time in milliseconds, tab-separated (no value holds a tab or a newline) — and a batch
 * of lines is one `link_click_log` row, its `first_ms` and `last_ms` the earliest and latest
 * click time in it. A batch never spans more than {@link MAX_SPAN_MS}, so the batches that can
 * hold a click are found from the time its id carries.
 */

/** The longest time between the first and last click of one batch (one log row). */
export const MAX_SPAN_MS = 60_000;

/**
 * Raw clicks are kept this long, then pruned: the longest referrer window a project can set
 * (90 days). Daily counts (`link_click_days`) stay.
 */
export const CLICK_RETENTION_MS = 90 * 86_400_000;

export const DAY_MS = 86_400_000;

export type ClickPlatform = 'android' | 'ios' | 'desktop' | 'bot';

/** One click, read back from the log. */
export interface LoggedClick {
  id: string;
  projectId: string;
  linkId: string;
  platform: ClickPlatform;
  fingerprint: string;
  ms: number;
}

export function clickLine(
  id: string,
  projectId: string,
  linkId: string,
  platform: ClickPlatform,
  fingerprint: string,
  ms: number,
) {
  return `${id}\t${projectId}\t${linkId}\t${platform}\t${fingerprint}\t${ms}`;
}

export function parseClickLine(line: string): LoggedClick {
  const [id, projectId, linkId, platform, fingerprint, ms] = line.split('\t');
  return {
    id,
    projectId,
    linkId,
    platform: platform as ClickPlatform,
    fingerprint,
    ms: Number(ms),
  };
}

/** The line of `clickId` in a batch's text, or null. */
export function findClickLine(batch: string, clickId: string): LoggedClick | null {
  const needle = `${clickId}\t`;
  let at = batch.indexOf(needle);
  while (at !== -1 && at !== 0 && batch[at - 1] !== '\n') at = batch.indexOf(needle, at + 1);
  if (at === -1) return null;
  const end = batch.indexOf('\n', at);
  return parseClickLine(batch.slice(at, end === -1 ? undefined : end));
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CLICK_ID = /^clk_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The time a click id carries (its ULID's first 48 bits), or null for anything else. */
export function clickIdTime(clickId: string): number | null {
  if (!CLICK_ID.test(clickId)) return null;
  let ms = 0;
  for (let i = 4; i < 14; i++) ms = ms * 32 + CROCKFORD.indexOf(clickId[i]);
  return ms;
}

/** Statements shared by the in-process writer and the writer thread (SQLite and PostgreSQL). */
export const INSERT_LOG = 'insert into link_click_log (first_ms, last_ms, clicks) values (?, ?, ?)';
export const UPSERT_DAY =
  'insert into link_click_days (link_id, day, clicks) values (?, ?, ?) on conflict (link_id, day) do update set clicks = link_click_days.clicks + excluded.clicks';

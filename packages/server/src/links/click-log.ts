/**
 * The click log's format, shared by the recorder, its writer thread's caller and the migration
 * that carried the older per-click rows over.
 *
 * A batch of clicks is one `link_click_log` row, its `first_ms` and `last_ms` the earliest and
 * latest click time in it. A batch never spans more than {@link MAX_SPAN_MS}, so the batches
 * that can hold a click are found from the time its id carries. Its text (no value holds a tab
 * or a newline) is, since 2026-11-27, the compact form (written by `batchOutput`,
 * click-batch.mjs):
 *
 * - a first line `#2`, then each link of the batch as its project id and link id, all
 *   tab-separated: `#2\tprj_…\tlnk_…\tprj_…\tlnk_…`;
 * - then a line per click: its id without `clk_` (a ULID, whose first ten characters are its
 *   time in ms), its link's place in the first line (0, 1, …), its platform as a letter (`a`
 *   android, `i` ios, `d` desktop, `b` bot) and its fingerprint, tab-separated.
 *
 * Rows written before that (and by the migration) have no first line, and a line per click
 * with everything written out: `id`, `project_id`, `link_id`, `platform`, `fingerprint` and the
 * time in ms. Both are read. The compact form is 2.5 times smaller, which is what PostgreSQL
 * and the writer thread spend most of a batch's write on.
 */
import { LOG_HEADER, PLATFORM_LETTERS, PLATFORMS } from './click-batch.mjs';

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

/** A click's line in the first form (the migration from per-click rows writes it). */
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

/** A line of a row in the first form (no first line, everything written out). */
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

const PLATFORM_BY_LETTER: Record<string, ClickPlatform> = Object.fromEntries(
  PLATFORM_LETTERS.map((letter, code) => [letter, PLATFORMS[code]]),
);

/** A click line of the compact form, with the row's links (its first line, split at tabs). */
function parseCompactLine(line: string, links: string[]): LoggedClick {
  const [ulid, link, letter, fingerprint] = line.split('\t');
  const id = `clk_${ulid}`;
  const at = 1 + 2 * Number(link);
  return {
    id,
    projectId: links[at],
    linkId: links[at + 1],
    platform: PLATFORM_BY_LETTER[letter],
    fingerprint,
    ms: clickIdTime(id) ?? Number.NaN,
  };
}

function isCompact(text: string) {
  return text.startsWith(LOG_HEADER) && text[LOG_HEADER.length] === '\t';
}

/** Every click of a log row's text, in either form. */
export function parseClickLog(text: string): LoggedClick[] {
  const lines = text.split('\n');
  if (!isCompact(text)) return lines.map(parseClickLine);
  const links = lines[0].split('\t');
  const clicks: LoggedClick[] = [];
  for (let i = 1; i < lines.length; i++) clicks.push(parseCompactLine(lines[i], links));
  return clicks;
}

/** The click `clickId` in a log row's text (either form), or null. */
export function findClickLine(batch: string, clickId: string): LoggedClick | null {
  if (isCompact(batch)) {
    if (!clickId.startsWith('clk_')) return null;
    // Every click line follows a newline: the row starts with its links.
    const at = batch.indexOf(`\n${clickId.slice(4)}\t`);
    if (at === -1) return null;
    const end = batch.indexOf('\n', at + 1);
    const links = batch.slice(0, batch.indexOf('\n')).split('\t');
    return parseCompactLine(batch.slice(at + 1, end === -1 ? undefined : end), links);
  }
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

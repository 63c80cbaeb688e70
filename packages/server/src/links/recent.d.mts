/** Types of recent.mjs (plain JavaScript, shared with the click writer thread). */
export interface RecentEntry {
  key: string;
  /** What is remembered. */
  member: string;
  /** Its time, milliseconds since the epoch: what `recall` filters and orders by. */
  ms: number;
  /** How long after `ms` it may be forgotten. */
  ttlMs: number;
}
export function packRecent(entries: RecentEntry[]): Uint8Array;
export interface Recalled {
  member: string;
  ms: number;
}
export const RECENT_MAX_PER_KEY: 50;
export class RecentRing {
  constructor(max: number);
  readonly max: number;
  readonly size: number;
  remember(records: Uint8Array, nowMs: number): void;
  recall(key: string, sinceMs: number, limit: number): Recalled[];
  clear(): void;
}

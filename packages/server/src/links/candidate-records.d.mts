/** Types of candidate-records.mjs (plain JavaScript, shared with the click writer thread). */
export const RECORD_HEAD: 26;
export const MAX_MEMBER: 65535;
export function hashHigh(): number;
export function hashBytes(bytes: Uint8Array, start: number, end: number): number;
export function hashText(text: string): number;
export function hashAfter(lanes: Int32Array | Uint32Array, at: number, text: string): number;
export function hashLanes(prefix: string, lanes: Int32Array | Uint32Array, at: number): void;
export class CandidateRecords {
  constructor(capacity?: number);
  bytes: Uint8Array;
  view: DataView;
  length: number;
  add(key: string, ms: number, ttlMs: number, member: string): void;
  open(memberBytes: number): number;
  close(lo: number, hi: number, ms: number, ttlMs: number, memberLength: number): void;
  finish(): Uint8Array;
  reserve(more: number): void;
}

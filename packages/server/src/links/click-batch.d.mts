/** Types of click-batch.mjs (plain JavaScript, shared with the click writer thread). */
export function fingerprintKey(secret: string): string;
export function clickFingerprint(key: string, ip: string, userAgent: string): string;
export function candidateKey(projectId: string, platform: string, fingerprint: string): string;
export const PLATFORMS: readonly ['desktop', 'android', 'ios', 'bot'];
export const PLATFORM_CODES: { desktop: 0; android: 1; ios: 2; bot: 3 };
export const ID_CHARS: 26;
export const LOG_HEADER: '#2';
export const PLATFORM_LETTERS: readonly ['d', 'a', 'i', 'b'];
export interface ClickColumns {
  size: number;
  firstMs: number;
  lastMs: number;
  ids: Uint8Array;
  times: Float64Array;
  lifetimes: Float64Array;
  link: Uint32Array;
  platform: Uint8Array;
  ip: Uint32Array;
  agent: Uint32Array;
  projects: string[];
  linkIds: string[];
  ipText: Uint8Array;
  ipEnds: Uint32Array;
  agents: string[];
}
export function batchOutput(
  c: ClickColumns,
  key: string,
  keepPerKey: number,
): { rows: string; days: [string, string, number][]; candidates: Uint8Array };

/** Types of click-batch.mjs (plain JavaScript, shared with the click writer thread). */
export function fingerprintKey(secret: string): string;
export function clickFingerprint(key: string, ip: string, userAgent: string): string;
export function batchRows(heads: string[], fingerprints: string[], times: number[]): string;
export function candidateKey(projectId: string, platform: string, fingerprint: string): string;
export function candidateLines(
  heads: string[],
  fingerprints: string[],
  times: number[],
  mobile: number[],
  lifetimes: number[],
): string;

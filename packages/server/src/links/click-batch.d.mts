/** Types of click-batch.mjs (plain JavaScript, shared with the click writer thread). */
export function fingerprintKey(secret: string): string;
export function clickFingerprint(key: string, ip: string, userAgent: string): string;
export function batchRows(heads: string[], fingerprints: string[], times: number[]): string;

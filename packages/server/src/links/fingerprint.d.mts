/** Types of fingerprint.mjs (plain JavaScript, shared with the click writer thread). */
export function fingerprintKey(secret: string): string;
export function clickFingerprint(key: string, ip: string, userAgent: string): string;

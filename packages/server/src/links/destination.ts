import { ApiError } from '../http/problem.ts';

// Whitespace, control characters and backslashes: browsers "fix" them in ways that can move a
// URL to another host (`https:\\evil.com`), so a destination containing any is refused outright.
function hasUnsafeCharacter(raw: string) {
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c <= 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x5c) return true;
  }
  return false;
}
// The scheme must be written out in full, with `//` and a host after it: `https:evil.com` and
// `//evil.com` are what browsers resolve relative to the current page, not absolute URLs.
const ABSOLUTE_HTTP = /^https?:\/\/[^/?#]/i;

/**
 * Parses a link destination (or fallback URL): an absolute http:// or https:// URL without
 * credentials, whitespace or backslashes. Throws `invalid_destination` otherwise.
 */
export function parseDestination(raw: string, field = 'url'): URL {
  if (!ABSOLUTE_HTTP.test(raw) || hasUnsafeCharacter(raw)) {
    throw new ApiError(
      'invalid_destination',
      `${field} must be an absolute http:// or https:// URL without spaces or backslashes.`,
    );
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ApiError('invalid_destination', `${field} is not a valid URL.`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) {
    throw new ApiError('invalid_destination', `${field} must use http or https.`);
  }
  // `https://trusted.com@evil.com` reads as trusted.com to people and goes to evil.com.
  if (url.username || url.password) {
    throw new ApiError('invalid_destination', `${field} must not carry credentials.`);
  }
  return url;
}

/**
 * True when `url`'s host matches one of `patterns`: an exact host (`example.com`, or with a
 * port `example.com:8443`) or `*.example.com`, which matches any subdomain but not the apex.
 */
export function destinationAllowed(url: URL, patterns: readonly string[]): boolean {
  const hostname = url.hostname.toLowerCase();
  const host = url.host.toLowerCase();
  return patterns.some((pattern) => {
    const target = pattern.includes(':') ? host : hostname;
    if (pattern.startsWith('*.')) return target.endsWith(pattern.slice(1));
    return target === pattern;
  });
}

import ipaddr from 'ipaddr.js';

/**
 * Key restrictions: origin and bundle-id locks for client keys, IP allow-lists for server keys.
 * Origin and bundle-id checks are abuse friction, not proof of identity: any non-browser client
 * can send whatever Origin or X-Bundle-Id it likes.
 */

/** Normalises an origin (`scheme://host[:port]`, default ports dropped); null when invalid. */
export function normaliseOrigin(value: string): string | null {
  if (value === 'null' || value.length > 2048) return null;
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)$/.test(url.hostname)) return null;
    return url.origin;
  } catch {
    return null;
  }
}

/**
 * Validates an allowed-origin pattern for storage: an exact origin, or `scheme://*.domain[:port]`.
 * Returns the normalised pattern or null.
 */
export function normaliseOriginPattern(pattern: string): string | null {
  const m = /^(https?):\/\/\*\.([^/*]+)$/.exec(pattern.trim());
  if (m) {
    const exact = normaliseOrigin(`${m[1]}://${m[2]}`);
    if (!exact) return null;
    return exact.replace('://', '://*.');
  }
  const exact = normaliseOrigin(pattern.trim());
  if (!exact) return null;
  // Only a bare origin is allowed: no path, query or credentials.
  const u = new URL(pattern.trim());
  if (u.username || u.password || (u.pathname !== '/' && u.pathname !== '') || u.search || u.hash) {
    return null;
  }
  return exact;
}

/**
 * True when `origin` (already normalised) matches one pattern. `https://*.example.com` matches
 * any subdomain at any depth, never `example.com` itself, and only with the same scheme and port.
 */
export function originAllowed(origin: string, patterns: readonly string[]): boolean {
  for (const pattern of patterns) {
    if (pattern === origin) return true;
    const star = pattern.indexOf('://*.');
    if (star === -1) continue;
    const scheme = pattern.slice(0, star + 3);
    const suffix = `.${pattern.slice(star + 5)}`; // ".example.com[:port]"
    if (!origin.startsWith(scheme)) continue;
    const hostPort = origin.slice(scheme.length);
    if (hostPort.length > suffix.length && hostPort.endsWith(suffix)) return true;
  }
  return false;
}

/** The origin a browser request claims: `Origin`, else the origin of `Referer`. */
export function requestOrigin(
  origin: string | undefined,
  referer: string | undefined,
): string | null {
  if (origin && origin !== 'null') return normaliseOrigin(origin);
  if (referer) return normaliseOrigin(referer);
  return null;
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses an IP or CIDR for an allow-list; null when invalid. IPv4-mapped IPv6 becomes IPv4. */
export function parseIpRange(value: string): Range | null {
  try {
    if (value.includes('/')) {
      const [addr, bits] = ipaddr.parseCIDR(value);
      if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
        return [(addr as ipaddr.IPv6).toIPv4Address(), bits - 96];
      }
      return [addr, bits];
    }
    const addr = unmap(ipaddr.parse(value));
    return [addr, addr.kind() === 'ipv4' ? 32 : 128];
  } catch {
    return null;
  }
}

function unmap(addr: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (addr as ipaddr.IPv6).toIPv4Address();
  }
  return addr;
}

/** True when `ip` lies in one of `ranges` (pre-parsed). */
export function ipAllowed(ip: string, ranges: readonly Range[]): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = unmap(ipaddr.parse(ip));
  } catch {
    return false;
  }
  for (const [range, bits] of ranges) {
    if (range.kind() === addr.kind() && addr.match(range, bits)) return true;
  }
  return false;
}

import dns from 'node:dns';
import ipaddr from 'ipaddr.js';

/**
 * Cloud metadata and credential services outside link-local space: refused even when private
 * targets are allowed (link-local space, where most of them live, is refused whole).
 */
const METADATA: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [
  ipaddr.parseCIDR('100.100.100.200/32'), // Alibaba Cloud
  ipaddr.parseCIDR('fd00:ec2::/32'), // AWS over IPv6 (IMDS, EKS Pod Identity, NTP, DNS)
];

/** Ranges that only SVC_WEBHOOK_ALLOW_PRIVATE=true lets through. */
const PRIVATE_RANGES = new Set(['loopback', 'private', 'uniqueLocal', 'carrierGradeNat']);

/**
 * An IPv6 address whose first 80 bits are zero embeds an IPv4 address in its last 32 bits
 * (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`);
 * it is judged as that IPv4 address. `::` and `::1` stay IPv6.
 */
function embeddedIPv4(v6: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = v6.parts;
  if (p[0] || p[1] || p[2] || p[3] || p[4]) return null;
  if (p[5] !== 0 && p[5] !== 0xffff) return null;
  if (p[5] === 0 && p[6] === 0) return null;
  return new ipaddr.IPv4([p[6]! >> 8, p[6]! & 0xff, p[7]! >> 8, p[7]! & 0xff]);
}

/**
 * Whether a webhook may connect to `ip`. Public unicast addresses always may; loopback,
 * private (RFC 1918, IPv6 ULA) and CGNAT only with `allowPrivate`; link-local (where cloud
 * metadata and credential endpoints live), other metadata services, unspecified, multicast,
 * broadcast and reserved ranges never.
 */
export function addressAllowed(ip: string, allowPrivate: boolean): boolean {
  if (!ipaddr.isValid(ip)) return false;
  let parsed = ipaddr.parse(ip);
  if (parsed.kind() === 'ipv6') {
    const v4 = embeddedIPv4(parsed as ipaddr.IPv6);
    if (v4) parsed = v4;
  }
  if (METADATA.some(([net, bits]) => parsed.kind() === net.kind() && parsed.match(net, bits)))
    return false;
  const range = parsed.range();
  if (range === 'unicast') return true;
  return allowPrivate && PRIVATE_RANGES.has(range);
}

// The URL parser drops tabs and line breaks and trims spaces and controls silently, so the URL
// stored would not be the one given: a URL containing any is refused instead.
function hasWhitespaceOrControl(raw: string) {
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c <= 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}

/**
 * Parses an endpoint URL: absolute http(s), a host, a port 1–65535 if any, no credentials, no
 * whitespace or control characters. Null when unusable.
 */
export function parseWebhookUrl(raw: string): URL | null {
  if (hasWhitespaceOrControl(raw)) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (!url.hostname || url.username || url.password) return null;
  // The parser refuses ports over 65535 but keeps port 0, on which nothing can be reached.
  if (url.port === '0') return null;
  return url;
}

export type LookupAll = (hostname: string) => Promise<{ address: string; family: number }[]>;

const systemLookup: LookupAll = (hostname) =>
  dns.promises.lookup(hostname, { all: true, verbatim: true });

/** A checked destination: connect to exactly this address (never resolve the name again). */
export interface PinnedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

export type TargetCheck =
  | { ok: true; target: PinnedTarget }
  | { ok: false; code: 'webhook_url_unresolvable' | 'webhook_url_forbidden'; detail: string };

/**
 * Resolves the URL's host and checks every address it resolves to; refuses when any is not
 * allowed (so DNS answers that mix public and private addresses cannot pick the private one).
 * Runs before any connection is made.
 */
export async function checkTarget(
  url: URL,
  allowPrivate: boolean,
  lookup: LookupAll = systemLookup,
): Promise<TargetCheck> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: { address: string; family: number }[];
  if (ipaddr.isValid(host)) {
    addresses = [{ address: host, family: host.includes(':') ? 6 : 4 }];
  } else {
    try {
      addresses = await lookup(host);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) {
      return { ok: false, code: 'webhook_url_unresolvable', detail: `${host} does not resolve` };
    }
  }
  const refused = addresses.find((a) => !addressAllowed(a.address, allowPrivate));
  if (refused) {
    return {
      ok: false,
      code: 'webhook_url_forbidden',
      detail: `${host} resolves to ${refused.address}, a loopback, private, link-local or metadata address`,
    };
  }
  const first = addresses[0];
  return {
    ok: true,
    target: { url, address: first.address, family: first.family === 6 ? 6 : 4 },
  };
}

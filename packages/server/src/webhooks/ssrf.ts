import dns from 'node:dns';
import ipaddr from 'ipaddr.js';

/** Cloud metadata services: refused even when private targets are allowed. */
const METADATA = new Set(['169.254.169.254', '169.254.170.2', '100.100.100.200', 'fd00:ec2::254']);

/** Ranges that only SVC_WEBHOOK_ALLOW_PRIVATE=true lets through. */
const PRIVATE_RANGES = new Set([
  'loopback',
  'private',
  'linkLocal',
  'uniqueLocal',
  'carrierGradeNat',
]);

/**
 * Whether a webhook may connect to `ip`. Public unicast addresses always may; loopback,
 * private (RFC 1918, IPv6 ULA), link-local and CGNAT only with `allowPrivate`; metadata,
 * unspecified, multicast, broadcast and reserved ranges never.
 */
export function addressAllowed(ip: string, allowPrivate: boolean): boolean {
  if (!ipaddr.isValid(ip)) return false;
  let parsed = ipaddr.parse(ip);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  const normal = parsed.toString();
  if (METADATA.has(normal)) return false;
  const range = parsed.range();
  if (range === 'unicast') return true;
  return allowPrivate && PRIVATE_RANGES.has(range);
}

/** Parses an endpoint URL: absolute http(s), a host, no credentials. Null when unusable. */
export function parseWebhookUrl(raw: string): URL | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (!url.hostname || url.username || url.password) return null;
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

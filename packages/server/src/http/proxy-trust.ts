import { isIP } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';

/**
 * Fastify's `trustProxy` for `SVC_TRUST_PROXY` (addresses, CIDRs, proxy-addr's names such as
 * `loopback`): the same rule as giving Fastify the list, with the listed literal addresses found
 * by a string comparison first. Behind a proxy every request asks whether its peer is trusted,
 * and the peer is almost always the listed proxy: that answer then costs no address parsing.
 * Anything else (a subnet, a name, another spelling of an address) is asked of proxy-addr.
 */
export function proxyTrust(entries: readonly string[]): (address: string, hop: number) => boolean {
  const rule = proxyAddr.compile([...entries]);
  const listed = new Set(entries.filter((e) => isIP(e) !== 0));
  return (address, hop) => listed.has(address) || rule(address, hop);
}

/**
 * The first of `entries` that proxy-addr refuses (not an address, a CIDR range or one of its
 * names), or null when every one is valid.
 */
export function invalidProxyEntry(entries: readonly string[]): string | null {
  for (const entry of entries) {
    try {
      proxyAddr.compile([entry]);
    } catch {
      return entry;
    }
  }
  return null;
}

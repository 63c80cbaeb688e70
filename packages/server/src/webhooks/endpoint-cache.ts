import { iso } from '../clock.ts';
import type { Sealer } from '../sealing.ts';
import { openEndpointSecret } from './endpoints.ts';
import { signingKey } from './signing.ts';
import { checkTarget, type LookupAll, parseWebhookUrl, type TargetCheck } from './ssrf.ts';

/** A checked target is reused this long; then the name is resolved and checked again. */
export const TARGET_TTL_MS = 10_000;
/** Entries kept per map at most (the oldest go first). */
const MAX_ENTRIES = 10_000;

/** The endpoint columns the signing keys come from (as a claim reads them). */
export interface EndpointSecrets {
  endpoint_id: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
}

interface Keys {
  secret: string;
  previous: string | null;
  current: Buffer;
  previousKey: Buffer | null;
}

function remember<K, V>(map: Map<K, V>, key: K, value: V) {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_ENTRIES) map.delete(map.keys().next().value as K);
}

/**
 * What the worker needs for an attempt that does not change from one attempt to the next, worked
 * out once instead of per attempt: an endpoint's HMAC keys, opened from its sealed secrets (kept
 * while the stored values are the ones the claim read, so a rotated secret is used from the next
 * claim on), and a URL's checked target (kept {@link TARGET_TTL_MS}: a host name is resolved and
 * its addresses checked again that often; connections still go only to a checked address).
 */
export class EndpointCache {
  private keys = new Map<string, Keys>();
  private targets = new Map<string, { untilMs: number; check: Promise<TargetCheck> }>();

  constructor(
    private sealer: Sealer,
    private allowPrivate: boolean,
    private lookup?: LookupAll,
  ) {}

  /** The keys to sign with at `nowMs`: the current secret's, then a previous one still valid. */
  signingKeys(endpoint: EndpointSecrets, nowMs: number): Buffer[] {
    let k = this.keys.get(endpoint.endpoint_id);
    if (!k || k.secret !== endpoint.secret || k.previous !== endpoint.previous_secret) {
      const open = (stored: string) =>
        signingKey(openEndpointSecret(this.sealer, endpoint.endpoint_id, stored));
      k = {
        secret: endpoint.secret,
        previous: endpoint.previous_secret,
        current: open(endpoint.secret),
        previousKey: endpoint.previous_secret ? open(endpoint.previous_secret) : null,
      };
      remember(this.keys, endpoint.endpoint_id, k);
    }
    const previousValid =
      k.previousKey !== null &&
      endpoint.previous_secret_expires_at !== null &&
      endpoint.previous_secret_expires_at > iso(nowMs);
    return previousValid ? [k.current, k.previousKey!] : [k.current];
  }

  /** The URL's target, checked (SSRF rules) at most {@link TARGET_TTL_MS} ago. */
  target(rawUrl: string, nowMs: number): Promise<TargetCheck> {
    const cached = this.targets.get(rawUrl);
    if (cached && cached.untilMs > nowMs) return cached.check;
    const url = parseWebhookUrl(rawUrl);
    const check: Promise<TargetCheck> = url
      ? checkTarget(url, this.allowPrivate, this.lookup)
      : Promise.resolve({ ok: false, code: 'webhook_url_forbidden', detail: 'invalid URL' });
    remember(this.targets, rawUrl, { untilMs: nowMs + TARGET_TTL_MS, check });
    return check;
  }
}

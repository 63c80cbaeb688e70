import { createHmac, hkdfSync, randomInt, timingSafeEqual } from 'node:crypto';
import type { Sealer } from '../sealing.ts';

const PURPOSE = 'verify:sender-secrets';

function derive(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'svc', `svc:verify:${purpose}`, 32));
}

/**
 * The Verify area's key material, derived from the server secret (HKDF-SHA256, one key per
 * purpose), so rotating SVC_SECRET invalidates pending codes. Provider credentials are sealed
 * by the server's {@link Sealer}, so they survive a rotation done with SVC_SECRET_PREVIOUS.
 */
export class VerifySecrets {
  private codeKey: Buffer;
  private phoneKey: Buffer;

  constructor(
    serverSecret: string,
    private sealer: Sealer,
  ) {
    this.codeKey = derive(serverSecret, 'code');
    this.phoneKey = derive(serverSecret, 'phone');
  }

  /** HMAC-SHA256 of `verificationId:code` (hex): the only form in which a code is stored. */
  codeHmac(verificationId: string, code: string): string {
    return createHmac('sha256', this.codeKey).update(`${verificationId}:${code}`).digest('hex');
  }

  /** Constant-time comparison of two code HMACs (fixed-length digests). */
  sameHmac(a: string, b: string): boolean {
    const x = Buffer.from(a, 'hex');
    const y = Buffer.from(b, 'hex');
    return x.length === 32 && y.length === 32 && timingSafeEqual(x, y);
  }

  /** HMAC of a phone number (hex), so logs can be filtered by number without storing it. */
  phoneHmac(e164: string): string {
    return createHmac('sha256', this.phoneKey).update(e164).digest('hex');
  }

  /** Seals a provider credential for storage in project settings (see {@link Sealer}). */
  seal(plaintext: string): string {
    return this.sealer.seal(PURPOSE, plaintext);
  }

  /** Opens what {@link seal} produced; null when no configured server secret opens it. */
  open(sealed: string): string | null {
    return this.sealer.open(PURPOSE, sealed)?.plaintext ?? null;
  }

  /** The credential sealed again with the current secret when it is sealed with an older one. */
  resealed(sealed: string): string | null {
    const opened = this.sealer.open(PURPOSE, sealed);
    return opened?.stale ? this.seal(opened.plaintext) : null;
  }
}

/** A 6-digit code from the CSPRNG, uniformly distributed (leading zeros kept). */
export function generateCode(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, '0');
}

/** `+14155552671` → `+1********71`: the calling code and the last two digits. */
export function maskPhone(e164: string, callingCode: string | undefined): string {
  const cc = callingCode && e164.startsWith(`+${callingCode}`) ? callingCode : e164.slice(1, 2);
  const rest = e164.slice(1 + cc.length);
  const shown = rest.slice(-2);
  return `+${cc}${'*'.repeat(Math.max(0, rest.length - shown.length))}${shown}`;
}

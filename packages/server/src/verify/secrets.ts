import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  randomInt,
  timingSafeEqual,
} from 'node:crypto';

function derive(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'svc', `svc:verify:${purpose}`, 32));
}

/**
 * The Verify area's key material, derived from the server secret (HKDF-SHA256, one key per
 * purpose), so rotating SVC_SECRET invalidates pending codes and nothing else needs a key.
 */
export class VerifySecrets {
  private codeKey: Buffer;
  private phoneKey: Buffer;
  private senderKey: Buffer;

  constructor(serverSecret: string) {
    this.codeKey = derive(serverSecret, 'code');
    this.phoneKey = derive(serverSecret, 'phone');
    this.senderKey = derive(serverSecret, 'sender-secrets');
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

  /** Encrypts a provider credential for storage in project settings (AES-256-GCM). */
  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.senderKey, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv, body, cipher.getAuthTag()]
      .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
      .join('.');
  }

  /** Decrypts what {@link seal} produced; null when it was not sealed with this secret. */
  open(sealed: string): string | null {
    const [version, iv, body, tag] = sealed.split('.');
    if (version !== 'v1' || !iv || !body || tag === undefined) return null;
    try {
      const decipher = createDecipheriv(
        'aes-256-gcm',
        this.senderKey,
        Buffer.from(iv, 'base64url'),
      );
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([
        decipher.update(Buffer.from(body, 'base64url')),
        decipher.final(),
      ]).toString('utf8');
    } catch {
      return null;
    }
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

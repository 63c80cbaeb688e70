import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * What a sealed value is for. Each purpose has its own key (HKDF info `svc:<purpose>`), so a
 * value sealed for one purpose never opens as another.
 */
export type SealPurpose =
  | 'tokens:signing-keys'
  | 'webhooks:endpoint-secrets'
  | 'verify:sender-secrets';

const VERSION = 'v2';
/** Written by Verify before this module existed; read, never written. */
const LEGACY_VERSION = 'v1';

function deriveKey(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'svc', `svc:${purpose}`, 32));
}

/** A short public name for a secret, stored in each envelope: which secret sealed it. */
function keyId(secret: string): string {
  return Buffer.from(hkdfSync('sha256', secret, 'svc', 'svc:seal-key-id', 6)).toString('base64url');
}

interface SealingSecret {
  id: string;
  keys: Map<string, Buffer>;
  secret: string;
}

/** What {@link Sealer.open} found. */
export interface Opened {
  plaintext: string;
  /**
   * True when the value is not sealed with the current secret (a previous one, or the legacy
   * envelope): the caller should seal it again.
   */
  stale: boolean;
}

/**
 * Seals secrets stored in the SQL store (signing keys' private halves, webhook signing secrets,
 * SMS provider credentials) with AES-256-GCM under keys derived from the server secret
 * (HKDF-SHA256, salt `svc`, info `svc:<purpose>`), so a copy of the database alone reveals none
 * of them.
 *
 * The envelope is `v2.<key id>.<iv>.<ciphertext>.<tag>` (base64url parts): the key id names the
 * server secret that sealed it (6 bytes derived from it; it reveals nothing about the secret),
 * and `context` (a row's id) is bound as additional authenticated data, so a sealed value copied
 * to another row does not open. Values are sealed with the current secret (`SVC_SECRET`) and
 * opened with it or any previous one (`SVC_SECRET_PREVIOUS`); a value opened with a previous
 * secret is reported stale, and each store seals its stale values again on start.
 */
export class Sealer {
  private secrets: SealingSecret[];

  /** `current` seals; `previous` (newest first) are accepted only for opening. */
  constructor(current: string, previous: readonly string[] = []) {
    if (!current) throw new Error('the sealing secret is empty');
    this.secrets = [current, ...previous.filter((s) => s && s !== current)].map((secret) => ({
      id: keyId(secret),
      keys: new Map(),
      secret,
    }));
  }

  private key(secret: SealingSecret, purpose: string): Buffer {
    let key = secret.keys.get(purpose);
    if (!key) {
      key = deriveKey(secret.secret, purpose);
      secret.keys.set(purpose, key);
    }
    return key;
  }

  /** True when `value` is in a sealed envelope (of any version this server reads). */
  static isSealed(value: string): boolean {
    return value.startsWith(`${VERSION}.`) || value.startsWith(`${LEGACY_VERSION}.`);
  }

  /** Seals `plaintext` with the current secret, bound to `context` (e.g. the row's id). */
  seal(purpose: SealPurpose, plaintext: string, context = ''): string {
    const current = this.secrets[0];
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key(current, purpose), iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      VERSION,
      current.id,
      iv.toString('base64url'),
      body.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
    ].join('.');
  }

  /**
   * Opens what {@link seal} produced for the same purpose and context. Null when it is not an
   * envelope, or no known secret opens it (sealed by another server, or altered).
   */
  open(purpose: SealPurpose, sealed: string, context = ''): Opened | null {
    const parts = sealed.split('.');
    if (parts[0] === VERSION && parts.length === 5) {
      const [, id, iv, body, tag] = parts;
      const index = this.secrets.findIndex((s) => s.id === id);
      if (index === -1) return null;
      const plaintext = decrypt(this.key(this.secrets[index], purpose), iv, body, tag, context);
      return plaintext === null ? null : { plaintext, stale: index > 0 };
    }
    if (parts[0] === LEGACY_VERSION && parts.length === 4) {
      // No key id and no context: try each secret.
      const [, iv, body, tag] = parts;
      for (const secret of this.secrets) {
        const plaintext = decrypt(this.key(secret, purpose), iv, body, tag, null);
        if (plaintext !== null) return { plaintext, stale: true };
      }
    }
    return null;
  }

  /** True when a previous secret is configured, so stored values may need sealing again. */
  get rotating(): boolean {
    return this.secrets.length > 1;
  }
}

function decrypt(
  key: Buffer,
  iv: string,
  body: string,
  tag: string,
  context: string | null,
): string | null {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), {
      authTagLength: 16,
    });
    if (context !== null) decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([
      decipher.update(Buffer.from(body, 'base64url')),
      decipher.final(),
    ]).toString('utf8');
  } catch {
    return null;
  }
}

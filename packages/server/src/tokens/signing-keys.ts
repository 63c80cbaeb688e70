import { randomUUID } from 'node:crypto';
import {
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
  type JWTPayload,
  jwtVerify,
  SignJWT,
} from 'jose';
import { type Clock, iso } from '../clock.ts';
import { newId } from '../ids.ts';
import { Sealer } from '../sealing.ts';
import type { Store } from '../storage/db.ts';

const ALG = 'ES256';
const PURPOSE = 'tokens:signing-keys';

interface LoadedKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
  createdAtMs: number;
}

export interface SignOptions {
  /** Who the token is for, e.g. `svc:realtime` or `svc:verify`; checked on verification. */
  audience: string;
  subject: string;
  expiresInSeconds: number;
}

export type VerifyResult =
  | { ok: true; payload: JWTPayload }
  | { ok: false; reason: 'expired' | 'invalid' };

/**
 * The server's token-signing key set (ES256), shared by every node through the SQL store and
 * published at `/.well-known/jwks.json`. Tokens carry the signing key's `kid`, a unique `jti`,
 * `iss` (the public URL) and `aud`. Rotation adds a new active key; older keys keep verifying
 * until retired, so tokens already issued stay valid. Private keys are stored sealed (see
 * {@link Sealer}), bound to their `kid`.
 */
export class SigningKeys {
  private keys: LoadedKey[] = [];
  private lastReloadMs = 0;
  /** The look at the store that a verification met an unknown kid started, while it runs. */
  private reloading: Promise<void> | null = null;

  constructor(
    private store: Store,
    private clock: Clock,
    private issuer: string,
    private sealer: Sealer,
  ) {}

  /**
   * Seals every stored private key that is in clear or sealed with a previous secret, then loads
   * the key set, creating the first key when there is none. Throws when a stored key opens with
   * no configured secret (SVC_SECRET changed without SVC_SECRET_PREVIOUS).
   */
  async init() {
    await this.sealStored();
    await this.reload();
    if (this.keys.length === 0) await this.rotate();
  }

  /**
   * Seals the private keys stored in clear (written before sealing) or with a previous secret.
   * Each row is replaced only if unchanged since it was read, so nodes starting together agree.
   */
  async sealStored() {
    const rows = await this.store.db
      .selectFrom('signing_keys')
      .select(['kid', 'private_jwk'])
      .execute();
    for (const row of rows) {
      const jwk = this.openPrivate(row.kid, row.private_jwk);
      if (jwk.sealed) continue;
      await this.store.db
        .updateTable('signing_keys')
        .set({ private_jwk: this.sealer.seal(PURPOSE, jwk.json, row.kid) })
        .where('kid', '=', row.kid)
        .where('private_jwk', '=', row.private_jwk)
        .execute();
    }
  }

  /** A stored private JWK in clear; `sealed` when it is already sealed with the current secret. */
  private openPrivate(kid: string, stored: string): { json: string; sealed: boolean } {
    if (!Sealer.isSealed(stored)) return { json: stored, sealed: false };
    const opened = this.sealer.open(PURPOSE, stored, kid);
    if (!opened) {
      throw new Error(
        `signing key ${kid} is sealed with a secret this server does not have (set SVC_SECRET_PREVIOUS to the previous SVC_SECRET)`,
      );
    }
    return { json: opened.plaintext, sealed: !opened.stale };
  }

  /** Re-reads the key set from the store (after another node rotated). */
  async reload() {
    const rows = await this.store.db
      .selectFrom('signing_keys')
      .selectAll()
      .where('retired_at', 'is', null)
      .orderBy('created_at', 'desc')
      .orderBy('kid', 'desc')
      .execute();
    this.keys = await Promise.all(
      rows.map(async (row) => ({
        kid: row.kid,
        privateKey: (await importJWK(
          JSON.parse(this.openPrivate(row.kid, row.private_jwk).json),
          ALG,
        )) as CryptoKey,
        publicKey: (await importJWK(JSON.parse(row.public_jwk), ALG)) as CryptoKey,
        publicJwk: JSON.parse(row.public_jwk) as JWK,
        createdAtMs: Date.parse(row.created_at),
      })),
    );
  }

  /** Makes a new active signing key; earlier keys keep verifying until retired. */
  async rotate(): Promise<string> {
    const { privateKey, publicKey } = await generateKeyPair(ALG, { extractable: true });
    const kid = newId('sig', this.clock.now());
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: ALG, use: 'sig' };
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALG };
    await this.store.db
      .insertInto('signing_keys')
      .values({
        kid,
        alg: ALG,
        public_jwk: JSON.stringify(publicJwk),
        private_jwk: this.sealer.seal(PURPOSE, JSON.stringify(privateJwk), kid),
        created_at: iso(this.clock.now()),
        retired_at: null,
      })
      .execute();
    await this.reload();
    return kid;
  }

  /** Stops verifying tokens signed by `kid`. The active key cannot be retired. */
  async retire(kid: string) {
    if (this.keys[0]?.kid === kid) throw new Error('cannot retire the active signing key');
    await this.store.db
      .updateTable('signing_keys')
      .set({ retired_at: iso(this.clock.now()) })
      .where('kid', '=', kid)
      .execute();
    await this.reload();
  }

  /** The public JWK Set. */
  jwks(): { keys: JWK[] } {
    return { keys: this.keys.map((k) => k.publicJwk) };
  }

  /** Signs `claims` with the active key. Returns the JWT, its `jti` and expiry (ms). */
  async sign(
    claims: JWTPayload,
    options: SignOptions,
  ): Promise<{ token: string; jti: string; expiresAtMs: number }> {
    const active = this.keys[0];
    if (!active) throw new Error('signing keys not initialised');
    const nowSeconds = Math.floor(this.clock.now() / 1000);
    const jti = randomUUID();
    const expiresAt = nowSeconds + options.expiresInSeconds;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: ALG, kid: active.kid, typ: 'JWT' })
      .setIssuer(this.issuer)
      .setAudience(options.audience)
      .setSubject(options.subject)
      .setIssuedAt(nowSeconds)
      .setExpirationTime(expiresAt)
      .setJti(jti)
      .sign(active.privateKey);
    return { token, jti, expiresAtMs: expiresAt * 1000 };
  }

  /** Verifies signature, issuer, audience and expiry against the injected clock. */
  async verify(token: string, audience: string): Promise<VerifyResult> {
    if (typeof token !== 'string' || token.length > 8192) return { ok: false, reason: 'invalid' };
    try {
      const { payload } = await jwtVerify(
        token,
        async (header) => {
          let key = this.keys.find((k) => k.kid === header.kid);
          // Another node may have rotated since we loaded: look again, at most once a second.
          // Verifications that meet the kid while a look runs wait for it rather than fail.
          if (!key && !this.reloading && this.clock.now() - this.lastReloadMs > 1000) {
            this.lastReloadMs = this.clock.now();
            this.reloading = this.reload().finally(() => {
              this.reloading = null;
            });
          }
          if (!key && this.reloading) {
            await this.reloading;
            key = this.keys.find((k) => k.kid === header.kid);
          }
          if (!key) throw new Error('unknown kid');
          return key.publicKey;
        },
        {
          algorithms: [ALG],
          issuer: this.issuer,
          audience,
          currentDate: new Date(this.clock.now()),
          clockTolerance: 0,
        },
      );
      return { ok: true, payload };
    } catch (err) {
      const code = (err as { code?: string }).code;
      return { ok: false, reason: code === 'ERR_JWT_EXPIRED' ? 'expired' : 'invalid' };
    }
  }
}

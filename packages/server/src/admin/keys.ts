import type { ApiKey, CreatedApiKey, CreateKeyBody, UpdateKeyBody } from '@svc/protocol';
import { displayParts, generateKey, hashKey, isLegacyKey } from '../auth/key-format.ts';
import type { KeyStore } from '../auth/key-store.ts';
import { normaliseOriginPattern, parseIpRange } from '../auth/restrictions.ts';
import { type Clock, iso } from '../clock.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { json, type Store } from '../storage/db.ts';
import type { ApiKeysTable } from '../storage/schema.ts';
import type { ProjectService } from './projects.ts';

function toApiKey(row: ApiKeysTable): ApiKey {
  return {
    id: row.id,
    projectId: row.project_id,
    type: row.type,
    name: row.name,
    prefix: row.prefix,
    last4: row.last4,
    scopes: json(row.scopes),
    allowedOrigins: json(row.allowed_origins),
    allowedBundleIds: json(row.allowed_bundle_ids),
    allowedIps: json(row.allowed_ips),
    rateLimitPerMinute: row.rate_limit_per_minute,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    replacedBy: row.replaced_by,
    createdAt: row.created_at,
  };
}

function checkOrigins(origins: string[] | undefined): string[] | undefined {
  return origins?.map((o, i) => {
    const normalised = normaliseOriginPattern(o);
    if (!normalised) {
      throw invalidField(
        `body.allowedOrigins.${i}`,
        'must be an origin such as https://app.example.com or https://*.example.com',
      );
    }
    return normalised;
  });
}

function checkIps(ips: string[] | undefined): string[] | undefined {
  return ips?.map((ip, i) => {
    if (!parseIpRange(ip))
      throw invalidField(`body.allowedIps.${i}`, 'must be an IPv4/IPv6 address or CIDR range');
    return ip;
  });
}

/** API keys: create (plaintext shown once), list, update restrictions, revoke, rotate, import legacy. */
export class KeyService {
  constructor(
    private store: Store,
    private projects: ProjectService,
    private cache: KeyStore,
    private clock: Clock,
  ) {}

  private nowIso() {
    return iso(this.clock.now());
  }

  async create(projectId: string, body: CreateKeyBody): Promise<CreatedApiKey> {
    await this.projects.get(projectId);
    if (body.type === 'client') {
      if (body.allowedIps) throw invalidField('body.allowedIps', 'applies to server keys only');
    } else {
      if (body.scopes)
        throw invalidField(
          'body.scopes',
          'applies to client keys only (server keys have every enabled product)',
        );
      if (body.allowedOrigins)
        throw invalidField('body.allowedOrigins', 'applies to client keys only');
      if (body.allowedBundleIds)
        throw invalidField('body.allowedBundleIds', 'applies to client keys only');
    }
    if (body.expiresAt && Date.parse(body.expiresAt) <= this.clock.now()) {
      throw invalidField('body.expiresAt', 'must be in the future');
    }
    const plaintext = generateKey(body.type);
    const row = this.row(projectId, body.type, plaintext, {
      name: body.name ?? null,
      scopes: body.type === 'client' ? (body.scopes ?? ['realtime', 'links', 'verify']) : [],
      allowedOrigins: checkOrigins(body.allowedOrigins) ?? [],
      allowedBundleIds: body.allowedBundleIds ?? [],
      allowedIps: checkIps(body.allowedIps) ?? [],
      rateLimitPerMinute: body.rateLimitPerMinute ?? null,
      expiresAt: body.expiresAt ? new Date(body.expiresAt).toISOString() : null,
    });
    await this.store.db.insertInto('api_keys').values(row).execute();
    await this.cache.invalidateEverywhere();
    return { ...toApiKey(row), key: plaintext };
  }

  private row(
    projectId: string,
    type: ApiKeysTable['type'],
    plaintext: string,
    fields: {
      name: string | null;
      scopes: string[];
      allowedOrigins: string[];
      allowedBundleIds: string[];
      allowedIps: string[];
      rateLimitPerMinute: number | null;
      expiresAt: string | null;
    },
  ): ApiKeysTable {
    const { prefix, last4 } = displayParts(plaintext);
    return {
      id: newId('key', this.clock.now()),
      project_id: projectId,
      type,
      name: fields.name,
      key_hash: hashKey(plaintext),
      prefix,
      last4,
      scopes: JSON.stringify(fields.scopes),
      allowed_origins: JSON.stringify(fields.allowedOrigins),
      allowed_bundle_ids: JSON.stringify(fields.allowedBundleIds),
      allowed_ips: JSON.stringify(fields.allowedIps),
      rate_limit_per_minute: fields.rateLimitPerMinute,
      expires_at: fields.expiresAt,
      revoked_at: null,
      replaced_by: null,
      created_at: this.nowIso(),
    };
  }

  async list(projectId: string): Promise<ApiKey[]> {
    await this.projects.get(projectId);
    const rows = await this.store.db
      .selectFrom('api_keys')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toApiKey);
  }

  private async getRow(projectId: string, keyId: string): Promise<ApiKeysTable> {
    const row = await this.store.db
      .selectFrom('api_keys')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('id', '=', keyId)
      .executeTakeFirst();
    if (!row) {
      await this.projects.get(projectId);
      throw new ApiError('key_not_found');
    }
    return row;
  }

  async get(projectId: string, keyId: string): Promise<ApiKey> {
    return toApiKey(await this.getRow(projectId, keyId));
  }

  async update(projectId: string, keyId: string, body: UpdateKeyBody): Promise<ApiKey> {
    const row = await this.getRow(projectId, keyId);
    const isClient = row.type === 'client';
    if (isClient && body.allowedIps)
      throw invalidField('body.allowedIps', 'applies to server keys only');
    if (!isClient) {
      for (const field of ['scopes', 'allowedOrigins', 'allowedBundleIds'] as const) {
        if (body[field]) throw invalidField(`body.${field}`, 'applies to client keys only');
      }
    }
    const patch: Partial<ApiKeysTable> = {};
    if (body.name !== undefined) patch.name = body.name;
    if (body.scopes) patch.scopes = JSON.stringify(body.scopes);
    if (body.allowedOrigins)
      patch.allowed_origins = JSON.stringify(checkOrigins(body.allowedOrigins));
    if (body.allowedBundleIds) patch.allowed_bundle_ids = JSON.stringify(body.allowedBundleIds);
    if (body.allowedIps) patch.allowed_ips = JSON.stringify(checkIps(body.allowedIps));
    if (body.rateLimitPerMinute !== undefined)
      patch.rate_limit_per_minute = body.rateLimitPerMinute;
    if (body.expiresAt !== undefined) {
      patch.expires_at = body.expiresAt === null ? null : new Date(body.expiresAt).toISOString();
    }
    await this.store.db.updateTable('api_keys').set(patch).where('id', '=', keyId).execute();
    await this.cache.invalidateEverywhere();
    return this.get(projectId, keyId);
  }

  /** Revokes at once; every node refuses the key as soon as the invalidation reaches it. */
  async revoke(projectId: string, keyId: string): Promise<void> {
    const row = await this.getRow(projectId, keyId);
    const now = this.nowIso();
    if (!row.revoked_at || row.revoked_at > now) {
      await this.store.db
        .updateTable('api_keys')
        .set({ revoked_at: now })
        .where('id', '=', keyId)
        .execute();
    }
    await this.cache.invalidateEverywhere();
  }

  /**
   * Issues a new key with the same settings; the old one keeps working for
   * `gracePeriodSeconds` (default 0: revoked at once), then is refused as revoked. A key is
   * rotated once: a key already rotated is refused with `api_key_already_rotated` (rotate its
   * replacement), so that no second new key is issued. Of concurrent rotations of one key
   * exactly one wins: the old key's row is marked conditionally, and the new key is inserted in
   * the same transaction only once that mark is made.
   */
  async rotate(projectId: string, keyId: string, gracePeriodSeconds = 0): Promise<CreatedApiKey> {
    const old = await this.getRow(projectId, keyId);
    this.checkRotatable(old);
    const plaintext = generateKey(old.type);
    const row = this.row(projectId, old.type, plaintext, {
      name: old.name,
      scopes: json(old.scopes),
      allowedOrigins: json(old.allowed_origins),
      allowedBundleIds: json(old.allowed_bundle_ids),
      allowedIps: json(old.allowed_ips),
      rateLimitPerMinute: old.rate_limit_per_minute,
      expiresAt: old.expires_at,
    });
    const revokeAt = iso(this.clock.now() + gracePeriodSeconds * 1000);
    const won = await this.store.db.transaction().execute(async (trx) => {
      // Only a key neither replaced nor revoked: a concurrent rotation or revocation that
      // committed first leaves nothing to update (PostgreSQL re-checks the row once it is free),
      // and a revocation is never moved into the future.
      const marked = await trx
        .updateTable('api_keys')
        .set({ revoked_at: revokeAt, replaced_by: row.id })
        .where('id', '=', keyId)
        .where('project_id', '=', projectId)
        .where('replaced_by', 'is', null)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      if (Number(marked.numUpdatedRows) !== 1) return false;
      await trx.insertInto('api_keys').values(row).execute();
      return true;
    });
    if (!won) {
      // Say why from the row as it is now (gone: key_not_found).
      this.checkRotatable(await this.getRow(projectId, keyId));
      throw new ApiError('api_key_already_rotated');
    }
    await this.cache.invalidateEverywhere();
    return { ...toApiKey(row), key: plaintext };
  }

  /**
   * Refuses a rotation of a key already rotated (whether or not its grace period is over: the
   * answer names the replacement), a revoked key, or a legacy key. Only a rotation schedules a
   * revocation: a key not replaced that has `revoked_at` was revoked (by `revoke`, at once).
   */
  private checkRotatable(
    key: ApiKeysTable,
  ): asserts key is ApiKeysTable & { type: 'client' | 'server' } {
    if (key.replaced_by) {
      throw new ApiError(
        'api_key_already_rotated',
        `The key has already been rotated; its replacement is ${key.replaced_by}.`,
        { replacedBy: key.replaced_by },
      );
    }
    if (key.revoked_at) {
      throw invalidField('params.keyId', 'is revoked', 'A revoked key cannot be rotated.');
    }
    if (key.type === 'legacy') {
      throw invalidField(
        'params.keyId',
        'is a legacy key',
        'A legacy key cannot be rotated; create a server key and revoke the legacy key.',
      );
    }
  }

  /** Registers an existing legacy key (`svc_…`, no checksum); it acts as a server key. */
  async importLegacy(
    projectId: string,
    body: { key: string; name?: string; allowedIps?: string[]; rateLimitPerMinute?: number },
  ): Promise<ApiKey> {
    await this.projects.get(projectId);
    if (!isLegacyKey(body.key)) {
      throw invalidField(
        'body.key',
        'must be a legacy key: svc_ then 8 or more of [A-Za-z0-9_-], not svc_pk_ or svc_sk_',
      );
    }
    const hash = hashKey(body.key);
    const existing = await this.store.db
      .selectFrom('api_keys')
      .select('id')
      .where('key_hash', '=', hash)
      .executeTakeFirst();
    if (existing) throw new ApiError('key_exists');
    const row = this.row(projectId, 'legacy', body.key, {
      name: body.name ?? 'legacy',
      scopes: [],
      allowedOrigins: [],
      allowedBundleIds: [],
      allowedIps: checkIps(body.allowedIps) ?? [],
      rateLimitPerMinute: body.rateLimitPerMinute ?? null,
      expiresAt: null,
    });
    await this.store.db.insertInto('api_keys').values(row).execute();
    await this.cache.invalidateEverywhere();
    return toApiKey(row);
  }
}

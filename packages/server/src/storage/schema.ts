/**
 * Table types for Kysely. Declared differences between SQLite and PostgreSQL are avoided by
 * construction: times are ISO 8601 UTC strings (`toISOString()`, so they sort as text),
 * booleans are integers 0/1, and JSON is text.
 */
export interface ProjectsTable {
  id: string;
  name: string;
  /** JSON array of product names. */
  products: string;
  webhooks_enabled: number;
  /** JSON object: per-product settings. */
  settings: string;
  created_at: string;
  updated_at: string;
}

export interface ApiKeysTable {
  id: string;
  project_id: string;
  type: 'client' | 'server' | 'legacy';
  name: string | null;
  /** SHA-256 of the whole key, hex. The plaintext is never stored. */
  key_hash: string;
  prefix: string;
  last4: string;
  /** JSON arrays. */
  scopes: string;
  allowed_origins: string;
  allowed_bundle_ids: string;
  allowed_ips: string;
  rate_limit_per_minute: number | null;
  expires_at: string | null;
  revoked_at: string | null;
  replaced_by: string | null;
  created_at: string;
}

/** The token-signing key set (see tokens/signing-keys.ts). */
export interface SigningKeysTable {
  kid: string;
  alg: string;
  public_jwk: string;
  /** The private JWK: needed to sign, so stored as is; protect the database accordingly. */
  private_jwk: string;
  created_at: string;
  retired_at: string | null;
}

/** A value one project holds alone, as `<product>:<value>` (see ProjectService.registerSettings). */
export interface ProjectClaimsTable {
  claim: string;
  project_id: string;
}

export interface CoreTables {
  signing_keys: SigningKeysTable;
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  project_claims: ProjectClaimsTable;
}

/**
 * Every table: the core ones, plus each area's own. An area declares its tables in its folder's
 * tables.ts and adds them here by augmenting this interface
 * (`declare module '../storage/schema.ts' { interface Database extends LinksTables {} }`), so
 * storage never imports a product.
 */
export interface Database extends CoreTables {}

/** Verify tables (see storage/schema.ts for the column conventions). */

/** One verification: a phone number, the HMAC of its current code, and its counters. */
export interface VerificationsTable {
  id: string;
  project_id: string;
  /** E.164. */
  phone_number: string;
  /** ISO 3166-1 alpha-2, or null when the number's region is ambiguous (e.g. +800). */
  country: string | null;
  /** `pending`, `approved`, `max_attempts_reached`, `failed` (first send refused by the provider). */
  status: string;
  /** HMAC-SHA256 (hex) of `id:code` under a key derived from the server secret. */
  code_hmac: string;
  /** Checks made so far (right or wrong). */
  attempts: number;
  max_attempts: number;
  /** Codes sent so far (failed deliveries do not count). */
  sends: number;
  /** 1 for a project test number (no SMS, no quota). */
  test: number;
  /**
   * `project_id:phone_number` while this is the number's current verification, else null.
   * Unique: two concurrent first sends cannot both create one.
   */
  active_key: string | null;
  created_at: string;
  /** When the current code stops being accepted. */
  expires_at: string;
  last_sent_at: string;
  approved_at: string | null;
}

/** Every send and check (the logs and stats endpoints read this). Numbers only masked + HMAC. */
export interface VerifyLogsTable {
  id: string;
  project_id: string;
  created_at: string;
  /** `send` or `check`. */
  type: string;
  status: string;
  reason: string | null;
  verification_id: string | null;
  /** HMAC-SHA256 (hex) of the E.164 number, for filtering without storing it. */
  phone_hmac: string | null;
  phone_masked: string | null;
  country: string | null;
  key_id: string;
  client_ip: string;
  test: number;
}

/** Token ids consumed by `validate-token {consume: true}`; kept until the token expires. */
export interface VerifyConsumedTokensTable {
  jti: string;
  project_id: string;
  consumed_at: string;
  expires_at: string;
}

export type VerifyTables = {
  verifications: VerificationsTable;
  verify_logs: VerifyLogsTable;
  verify_consumed_tokens: VerifyConsumedTokensTable;
};

declare module '../storage/schema.ts' {
  /** Verify's tables are part of the database. */
  interface Database extends VerifyTables {}
}

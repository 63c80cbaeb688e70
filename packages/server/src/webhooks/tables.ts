import type { Generated } from 'kysely';

/** Webhooks tables (see storage/schema.ts for the column conventions). */
export interface WebhookEndpointsTable {
  id: string;
  project_id: string;
  url: string;
  description: string | null;
  /** JSON array of event types; `[]` means every type. */
  events: string;
  enabled: number;
  /** `gone` (receiver answered 410), `failing` (failed for too long), `manual`, or null. */
  disabled_reason: string | null;
  /** When the current run of failed attempts began; null while the endpoint answers. */
  failing_since: string | null;
  /** `whsec_…`: kept as is because every delivery is signed with it. */
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

/** The outbox: one row per event that had at least one matching endpoint. */
export interface WebhookEventsTable {
  /** Insertion order (SQLite rowid / PostgreSQL bigserial): the order within an ordering key. */
  seq: Generated<number | string>;
  /** `evt_…`: the `webhook-id` header and the body's `id`. */
  id: string;
  project_id: string;
  type: string;
  ordering_key: string | null;
  /** The exact body sent, serialised once so every retry sends the same bytes. */
  payload: string;
  created_at: string;
}

/** One event to one endpoint. */
export interface WebhookDeliveriesTable {
  id: string;
  event_seq: number | string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  project_id: string;
  ordering_key: string | null;
  status: 'pending' | 'succeeded' | 'failed' | 'skipped';
  attempt_count: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  /**
   * The successful attempt, kept on the row (its number is `attempt_count`, its status
   * `last_status_code`); attempt rows are written for failed attempts only. Null otherwise.
   */
  success_attempted_at: string | null;
  success_latency_ms: number | null;
  success_response_body: string | null;
  success_node_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  attempt: number;
  attempted_at: string;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  /** The receiver's answer, truncated. */
  response_body: string | null;
  next_attempt_at: string | null;
  /** Which node made the attempt. */
  node_id: string;
}

/**
 * One row per chain in flight: the node holding `lease_token` until `lease_until` is the only one
 * attempting the endpoint's deliveries of `lease_key` (the ordering key, or the delivery's id
 * for one without a key).
 */
export interface WebhookKeyLeasesTable {
  endpoint_id: string;
  lease_key: string;
  lease_until: string;
  lease_token: string;
}

export type WebhooksTables = {
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_key_leases: WebhookKeyLeasesTable;
};

declare module '../storage/schema.ts' {
  /** Webhooks's tables are part of the database. */
  interface Database extends WebhooksTables {}
}

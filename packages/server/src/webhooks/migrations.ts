import { type Kysely, type Migration, PostgresAdapter, sql } from 'kysely';

/** Webhooks migrations. Names start with 0300_ so they sort after earlier areas; append only. */
export const webhooksMigrations: Record<string, Migration> = {
  '0300_webhooks': {
    async up(db: Kysely<unknown>) {
      // The outbox's sequence: the one dialect difference, an auto-increment integer.
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      await db.schema
        .createTable('webhook_endpoints')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('events', 'text', (c) => c.notNull().defaultTo('[]'))
        .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('disabled_reason', 'text')
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('previous_secret', 'text')
        .addColumn('previous_secret_expires_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('webhook_endpoints_project_idx')
        .on('webhook_endpoints')
        .columns(['project_id', 'created_at'])
        .execute();

      await db.schema
        .createTable('webhook_events')
        .addColumn('seq', postgres ? 'bigserial' : 'integer', (c) =>
          postgres ? c.primaryKey() : c.primaryKey().autoIncrement(),
        )
        .addColumn('id', 'text', (c) => c.notNull().unique())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('ordering_key', 'text')
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('webhook_deliveries')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('event_seq', 'bigint', (c) =>
          c.notNull().references('webhook_events.seq').onDelete('cascade'),
        )
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('event_type', 'text', (c) => c.notNull())
        .addColumn('endpoint_id', 'text', (c) =>
          c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
        )
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('ordering_key', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('attempt_count', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'text')
        .addColumn('lease_until', 'text')
        .addColumn('lease_token', 'text')
        .addColumn('last_status_code', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      // The worker's two questions, both only about pending rows: what is due, and is an
      // earlier event of the same ordering key still pending for this endpoint.
      await db.schema
        .createIndex('webhook_deliveries_due_idx')
        .on('webhook_deliveries')
        // The claim's ORDER BY: lets it stop after LIMIT eligible rows instead of sorting all.
        .columns(['next_attempt_at', 'event_seq'])
        .where(sql.ref('status'), '=', 'pending')
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_order_idx')
        .on('webhook_deliveries')
        .columns(['endpoint_id', 'ordering_key', 'event_seq'])
        .where(sql.ref('status'), '=', 'pending')
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_endpoint_idx')
        .on('webhook_deliveries')
        .columns(['endpoint_id', 'created_at'])
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_event_idx')
        .on('webhook_deliveries')
        .columns(['event_seq'])
        .execute();

      await db.schema
        .createTable('webhook_attempts')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('delivery_id', 'text', (c) =>
          c.notNull().references('webhook_deliveries.id').onDelete('cascade'),
        )
        .addColumn('attempt', 'integer', (c) => c.notNull())
        .addColumn('attempted_at', 'text', (c) => c.notNull())
        .addColumn('status_code', 'integer')
        .addColumn('latency_ms', 'integer', (c) => c.notNull())
        .addColumn('error', 'text')
        .addColumn('response_body', 'text')
        .addColumn('next_attempt_at', 'text')
        .addColumn('node_id', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('webhook_attempts_delivery_idx')
        .on('webhook_attempts')
        .columns(['delivery_id', 'attempt'])
        .execute();
    },
  },
  '0301_webhooks_scale_out': {
    async up(db: Kysely<unknown>) {
      // When the endpoint's current run of failed attempts began (null while it answers): an
      // endpoint failing for SVC_WEBHOOK_DISABLE_AFTER is disabled with reason `failing`.
      await db.schema.alterTable('webhook_endpoints').addColumn('failing_since', 'text').execute();
      // Retention: the pruner looks for old events in creation order.
      await db.schema
        .createIndex('webhook_events_created_idx')
        .on('webhook_events')
        .columns(['created_at'])
        .execute();
      // The backlog per project (metrics), over pending rows only.
      await db.schema
        .createIndex('webhook_deliveries_project_pending_idx')
        .on('webhook_deliveries')
        .columns(['project_id', 'created_at'])
        .where(sql.ref('status'), '=', 'pending')
        .execute();
    },
  },
  '0302_webhooks_deliveries_fillfactor': {
    async up(db: Kysely<unknown>) {
      // PostgreSQL: room in each page for a row's next version, so that a claim's lease (no
      // indexed column) is written as a heap-only update, without new entries in the table's
      // six indexes. Applies to pages written from now on.
      if (db.getExecutor().adapter instanceof PostgresAdapter) {
        await sql`alter table webhook_deliveries set (fillfactor = 70)`.execute(db);
      }
    },
  },
  '0303_webhooks_key_leases': {
    async up(db: Kysely<unknown>) {
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      // One lease per chain: a node attempting an (endpoint, ordering key) holds its row here;
      // the deliveries themselves are read, not written, by a claim. `lease_key` is the ordering
      // key, or the delivery's id for a delivery without one. No foreign key to the endpoint:
      // a lease is coordination, not data. A claim racing an endpoint's delete then leases a
      // key with nothing left to send (given back at once), and the delete takes no lock that
      // a chain's outcome write holds; leases left behind expire and are pruned.
      await db.schema
        .createTable('webhook_key_leases')
        .addColumn('endpoint_id', 'text', (c) => c.notNull())
        .addColumn('lease_key', 'text', (c) => c.notNull())
        .addColumn('lease_until', 'text', (c) => c.notNull())
        .addColumn('lease_token', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('webhook_key_leases_pk', ['endpoint_id', 'lease_key'])
        .execute();
      // A success is recorded on its delivery row (attempt rows are for failed attempts only).
      for (const [name, type] of [
        ['success_attempted_at', 'text'],
        ['success_latency_ms', 'integer'],
        ['success_response_body', 'text'],
        ['success_node_id', 'text'],
      ] as const) {
        await db.schema.alterTable('webhook_deliveries').addColumn(name, type).execute();
      }
      // Per-row leases are gone (a lease held at upgrade time is simply dropped: the delivery is
      // pending and due, sent again at least once).
      await db.schema.alterTable('webhook_deliveries').dropColumn('lease_until').execute();
      await db.schema.alterTable('webhook_deliveries').dropColumn('lease_token').execute();
      // Every write of a delivery row now changes an indexed column: no room to keep per page.
      if (postgres) await sql`alter table webhook_deliveries reset (fillfactor)`.execute(db);
    },
  },
};

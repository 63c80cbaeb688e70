import type { Kysely, Migration } from 'kysely';

/** Verify migrations. Names start with 0200_ so they sort after earlier areas; append only. */
export const verifyMigrations: Record<string, Migration> = {
  '0200_verify': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('verifications')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('phone_number', 'text', (c) => c.notNull())
        .addColumn('country', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('code_hmac', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull())
        .addColumn('sends', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('test', 'integer', (c) => c.notNull().defaultTo(0))
        // NULLs are distinct in a unique index on both SQLite and PostgreSQL.
        .addColumn('active_key', 'text', (c) => c.unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('last_sent_at', 'text', (c) => c.notNull())
        .addColumn('approved_at', 'text')
        .execute();
      await db.schema
        .createIndex('verifications_project_created_idx')
        .on('verifications')
        .columns(['project_id', 'created_at'])
        .execute();
      await db.schema
        .createIndex('verifications_project_expires_idx')
        .on('verifications')
        .columns(['project_id', 'expires_at'])
        .execute();

      await db.schema
        .createTable('verify_logs')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('verification_id', 'text')
        .addColumn('phone_hmac', 'text')
        .addColumn('phone_masked', 'text')
        .addColumn('country', 'text')
        .addColumn('key_id', 'text', (c) => c.notNull())
        .addColumn('client_ip', 'text', (c) => c.notNull())
        .addColumn('test', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema
        .createIndex('verify_logs_project_created_idx')
        .on('verify_logs')
        .columns(['project_id', 'created_at'])
        .execute();
      await db.schema
        .createIndex('verify_logs_project_phone_idx')
        .on('verify_logs')
        .columns(['project_id', 'phone_hmac', 'created_at'])
        .execute();

      await db.schema
        .createTable('verify_consumed_tokens')
        .addColumn('jti', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('consumed_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('verify_consumed_tokens_expires_idx')
        .on('verify_consumed_tokens')
        .column('expires_at')
        .execute();
    },
  },
};

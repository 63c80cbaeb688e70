import type { ColumnDefinitionBuilder as ColumnBuilder, Kysely, Migration } from 'kysely';

/** Realtime migrations. Names start with 0400_ so they sort after earlier areas; append only. */
export const realtimeMigrations: Record<string, Migration> = {
  '0400_realtime_rooms': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('realtime_rooms')
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('room_name', 'text', (c) => c.notNull())
        .addColumn('room_id', 'text', (c) => c.notNull().unique())
        .addColumn('live_type', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('max_participants', 'integer', (c) => c.notNull())
        .addColumn('num_participants', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('can_join_with_no_host', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('metadata', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('ended_at', 'text')
        .addColumn('ended_reason', 'text')
        .addPrimaryKeyConstraint('realtime_rooms_pk', ['project_id', 'room_name'])
        .execute();
      await db.schema
        .createIndex('realtime_rooms_status_idx')
        .on('realtime_rooms')
        .columns(['project_id', 'status', 'created_at'])
        .execute();
    },
  },
  '0401_realtime_recordings': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('realtime_recordings')
        .addColumn('egress_id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('room_name', 'text', (c) => c.notNull())
        .addColumn('room_id', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('file_type', 'text', (c) => c.notNull())
        .addColumn('filepath', 'text', (c) => c.notNull())
        .addColumn('mjr_dir', 'text', (c) => c.notNull())
        .addColumn('engine', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('ended_at', 'text')
        .addColumn('completed_at', 'text')
        .addColumn('duration', 'double precision')
        .addColumn('size', 'bigint')
        .addColumn('error', 'text')
        .addColumn('error_detail', 'text')
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addUniqueConstraint('realtime_recordings_filepath_uq', ['project_id', 'filepath'])
        .execute();
      await db.schema
        .createIndex('realtime_recordings_status_idx')
        .on('realtime_recordings')
        .columns(['project_id', 'status', 'started_at'])
        .execute();
      await db.schema
        .createIndex('realtime_recordings_room_idx')
        .on('realtime_recordings')
        .columns(['project_id', 'room_name', 'started_at'])
        .execute();
    },
  },
  '0402_realtime_recordings_modes': {
    async up(db: Kysely<unknown>) {
      // `room` | `participant`; the files (JSON) once made; since when paused; made by recovery.
      const columns = [
        ['mode', 'text', (c: ColumnBuilder) => c.notNull().defaultTo('room')],
        ['files', 'text', (c: ColumnBuilder) => c],
        ['paused_at', 'text', (c: ColumnBuilder) => c],
        ['recovered', 'integer', (c: ColumnBuilder) => c.notNull().defaultTo(0)],
      ] as const;
      for (const [name, type, build] of columns) {
        await db.schema.alterTable('realtime_recordings').addColumn(name, type, build).execute();
      }
    },
  },
};

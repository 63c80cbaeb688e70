/** Realtime tables (see storage/schema.ts for the column conventions). */

/**
 * One row per (project, room name): the durable record behind list/get. Live membership lives in
 * the shared state (room-store.ts); `status` and `num_participants` are written by the room's
 * commands under its lock, so they follow it closely. A room name used again after its room
 * ENDED reuses the row with a new `room_id`.
 */
export interface RealtimeRoomsTable {
  project_id: string;
  room_name: string;
  /** The room instance id (`rm_…`), named by access tokens (`rid`). */
  room_id: string;
  live_type: string;
  status: 'IDLE' | 'ACTIVE' | 'ENDED';
  max_participants: number;
  num_participants: number;
  can_join_with_no_host: number;
  metadata: string | null;
  created_at: string;
  ended_at: string | null;
  /** `DELETED` or `EMPTY_TIMEOUT`. */
  ended_reason: string | null;
}

/**
 * One row per recording (egress). `status` moves STARTED → PROCESSING → COMPLETED | FAILED; the
 * row is the conversion job too (`attempts`), so a node that dies leaves enough to finish it.
 */
export interface RealtimeRecordingsTable {
  egress_id: string;
  project_id: string;
  room_name: string;
  /** The room instance recorded (`rm_…`). */
  room_id: string;
  status: 'STARTED' | 'PROCESSING' | 'COMPLETED' | 'FAILED';
  file_type: 'MP4' | 'WEBM' | 'OGG';
  /** Relative to `DATA_DIR/recordings/files/<project id>`; unique per project. */
  filepath: string;
  /** Where Janus writes the `.mjr` files (absolute). */
  mjr_dir: string;
  /** The media engine's key (embedded, or a Janus URL). */
  engine: string;
  started_at: string;
  ended_at: string | null;
  completed_at: string | null;
  duration: number | null;
  size: number | string | null;
  error: string | null;
  error_detail: string | null;
  /** Conversion attempts so far. */
  attempts: number;
  // Migration 0402 (defaults: `room`, null, null, 0).
  mode?: 'room' | 'participant';
  /** The files once made: JSON of `SvcRecordingFile[]`. */
  files?: string | null;
  /** While paused: since when. */
  paused_at?: string | null;
  /** 1 when the file was made by the restart path from what was written before the node died. */
  recovered?: number;
}

export type RealtimeTables = {
  realtime_rooms: RealtimeRoomsTable;
  realtime_recordings: RealtimeRecordingsTable;
};

declare module '../storage/schema.ts' {
  /** Realtime's tables are part of the database. */
  interface Database extends RealtimeTables {}
}

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

export type RealtimeTables = {
  realtime_rooms: RealtimeRoomsTable;
};

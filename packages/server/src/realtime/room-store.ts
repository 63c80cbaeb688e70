import type { SvcLiveType, SvcTrackInfo } from '@svc/protocol';
import type { ControllerState } from './controller/state.ts';

/** A published track as the shared state keeps it: the wire form plus where its media lives. */
export interface LiveTrack extends SvcTrackInfo {
  /** The SFU's id of the publisher (a Janus VideoRoom feed id). */
  feedId: number;
  /** The media line of the publisher's stream in the SFU (for server-side mute). */
  mid: string;
  /** The node holding the publisher's SFU handle. */
  nodeId: string;
  /** The SFU instance the track is on (a Janus URL, or `embedded`). */
  engine: string;
}

/** A participant as the shared state keeps it (the wire form drops the secrets). */
export interface LiveParticipant {
  sid: string;
  userId: string;
  name: string;
  avatarUrl?: string;
  isHost: boolean;
  joinedAtMs: number;
  /** SHA-256 (hex) of the session's resume token. */
  resumeTokenHash: string;
  /** The node holding the socket, and which socket (a resume or replacement changes it). */
  nodeId: string;
  connId: string;
  connected: boolean;
  /** When the socket dropped; the participant leaves at this + the departure grace period. */
  disconnectedAtMs: number | null;
  /** When the session's access token expires (a kick bans the user id until then). */
  tokenExpiresAtMs?: number;
  /**
   * The room's seq at the session's join (its `session.joined` snapshot's seq): a resume never
   * replays events at or before it. Absent only in sessions stored before it existed (they
   * cannot resume).
   */
  joinSeq?: number;
}

/** A live room: everything its commands read and change, kept as one value in the shared state. */
export interface LiveRoom {
  rid: string;
  projectId: string;
  roomName: string;
  liveType: SvcLiveType;
  maxParticipants: number;
  canJoinWithNoHost: boolean;
  metadata: string | null;
  createdAtMs: number;
  /** In join order. */
  participants: LiveParticipant[];
  /** Set while nobody is in the room; the room ends at this + the empty timeout. */
  emptySinceMs: number | null;
  /** When the first participant joined (room.started was emitted); null before. */
  startedAtMs: number | null;
  /** The room controller's state (roles, hands, polls…); created on first use. */
  controller?: ControllerState;
  /** Published tracks, in publish order (absent in rooms stored before media existed). */
  tracks?: LiveTrack[];
  /** The SFU instance the room's media is placed on (every node routes the room there). */
  mediaEngine?: string;
}

/** An event to append to a room's log. `data` is serialised once, by the store. */
export interface NewRoomEvent {
  type: string;
  data: unknown;
  /** Also keep the event in the room's history list, which holds the last `history` kept events. */
  history?: number;
}

/** An event in a room's log: `frame` is the exact text sent to sockets. */
export interface StoredRoomEvent {
  seq: number;
  type: string;
  frame: string;
}

/** The view of a room while its lock is held. */
export interface RoomTx {
  load(): Promise<LiveRoom | null>;
  /**
   * Writes the room (null deletes its state and log), appends `events` in order and sets when the
   * room must next be looked at (`dueAtMs`, null for never), in one atomic step. Fails if the
   * lock was lost (fencing). Returns the appended events and the room's last seq afterwards.
   */
  commit(
    room: LiveRoom | null,
    events: NewRoomEvent[],
    dueAtMs: number | null,
  ): Promise<{ events: StoredRoomEvent[]; lastSeq: number }>;
}

/**
 * Room state and event logs shared by every node (ARCHITECTURE.md, "Realtime across nodes").
 * Commands that read and change a room run under its lock (`withLock`); high-rate appends that
 * only need membership (messages) use `appendIfMember`. Each node follows the rooms it has sockets
 * in; every follower sees the same order. Implemented in process (memory) and in Redis.
 */
export interface RoomStore {
  withLock<T>(rid: string, fn: (tx: RoomTx) => Promise<T>): Promise<T>;
  /** Reads a room without the lock (for listings). */
  peek(rid: string): Promise<LiveRoom | null>;
  /**
   * Appends one event when `sid` is a participant of the room (any participant when `sid` is
   * null, i.e. the room exists). Null when not.
   */
  appendIfMember(
    rid: string,
    sid: string | null,
    event: NewRoomEvent,
  ): Promise<StoredRoomEvent | null>;
  /** The frames of the events kept in the room's history list (NewRoomEvent.history), in order. */
  readHistory(rid: string): Promise<string[]>;
  /**
   * The events after `seq`, in order; null when some of them have left the buffer, or when `seq`
   * is beyond the room's last seq.
   */
  readAfter(rid: string, seq: number): Promise<StoredRoomEvent[] | null>;
  /** Calls `handler` with each event appended to the room from now on, in seq order. */
  follow(rid: string, handler: (event: StoredRoomEvent) => void): Promise<() => Promise<void>>;
  /** Rooms whose due time has come (at most `limit`). */
  dueRooms(nowMs: number, limit: number): Promise<string[]>;
  /** Marks this node alive for `ttlMs`. */
  heartbeat(nodeId: string, ttlMs: number): Promise<void>;
  /** Which of `nodeIds` are alive. */
  aliveNodes(nodeIds: string[]): Promise<Set<string>>;
  close(): Promise<void>;
}

/** The text of a room event frame: `{type, seq, ts, data}`. */
export function eventFrame(type: string, seq: number, ts: number, dataJson: string) {
  return `{"type":${JSON.stringify(type)},"seq":${seq},"ts":${ts},"data":${dataJson}}`;
}

interface MemoryRoom {
  room: LiveRoom | null;
  seq: number;
  log: StoredRoomEvent[];
  history: string[];
  followers: Set<(event: StoredRoomEvent) => void>;
  lock: Promise<void>;
  /** Callers holding or waiting for the lock; the entry is kept while any. */
  lockers: number;
}

/** The in-process RoomStore: the embedded default (one node). */
export class MemoryRoomStore implements RoomStore {
  private rooms = new Map<string, MemoryRoom>();
  private due = new Map<string, number>();

  constructor(
    private now: () => number,
    private bufferSize: number,
  ) {}

  private entry(rid: string): MemoryRoom {
    let e = this.rooms.get(rid);
    if (!e) {
      e = {
        room: null,
        seq: 0,
        log: [],
        history: [],
        followers: new Set(),
        lock: Promise.resolve(),
        lockers: 0,
      };
      this.rooms.set(rid, e);
    }
    return e;
  }

  private gc(rid: string, e: MemoryRoom) {
    if (!e.room && e.followers.size === 0 && e.log.length === 0 && e.lockers === 0) {
      this.rooms.delete(rid);
    }
  }

  async withLock<T>(rid: string, fn: (tx: RoomTx) => Promise<T>): Promise<T> {
    const e = this.entry(rid);
    e.lockers += 1;
    const previous = e.lock;
    let release!: () => void;
    e.lock = new Promise<void>((resolve) => {
      release = resolve;
    });
    await previous;
    let held = true;
    const tx: RoomTx = {
      load: async () => (e.room ? structuredClone(e.room) : null),
      commit: async (room, events, dueAtMs) => {
        if (!held) throw new Error('room lock lost');
        e.room = room ? structuredClone(room) : null;
        const stored = events.map((ev) => this.push(e, ev));
        if (room === null) {
          e.log = [];
          e.history = [];
          this.due.delete(rid);
        } else if (dueAtMs === null) this.due.delete(rid);
        else this.due.set(rid, dueAtMs);
        const lastSeq = e.seq;
        for (const ev of stored) for (const f of e.followers) f(ev);
        return { events: stored, lastSeq };
      },
    };
    try {
      return await fn(tx);
    } finally {
      held = false;
      e.lockers -= 1;
      release();
      this.gc(rid, e);
    }
  }

  private push(e: MemoryRoom, ev: NewRoomEvent): StoredRoomEvent {
    e.seq += 1;
    const stored = {
      seq: e.seq,
      type: ev.type,
      frame: eventFrame(ev.type, e.seq, this.now(), JSON.stringify(ev.data)),
    };
    e.log.push(stored);
    if (e.log.length > this.bufferSize * 1.1) e.log.splice(0, e.log.length - this.bufferSize);
    if (ev.history) {
      e.history.push(stored.frame);
      if (e.history.length > ev.history) e.history.splice(0, e.history.length - ev.history);
    }
    return stored;
  }

  async peek(rid: string) {
    const room = this.rooms.get(rid)?.room;
    return room ? structuredClone(room) : null;
  }

  async appendIfMember(rid: string, sid: string | null, event: NewRoomEvent) {
    const e = this.rooms.get(rid);
    if (!e?.room) return null;
    if (sid !== null && !e.room.participants.some((p) => p.sid === sid)) return null;
    const stored = this.push(e, event);
    for (const f of e.followers) f(stored);
    return stored;
  }

  async readHistory(rid: string) {
    return [...(this.rooms.get(rid)?.history ?? [])];
  }

  async readAfter(rid: string, seq: number) {
    const e = this.rooms.get(rid);
    if (!e) return seq === 0 ? [] : null;
    if (seq > e.seq) return null;
    if (seq === e.seq) return [];
    const first = e.log[0];
    if (!first || first.seq > seq + 1) return null;
    return e.log.slice(seq + 1 - first.seq);
  }

  async follow(rid: string, handler: (event: StoredRoomEvent) => void) {
    const e = this.entry(rid);
    e.followers.add(handler);
    return async () => {
      e.followers.delete(handler);
      this.gc(rid, e);
    };
  }

  async dueRooms(nowMs: number, limit: number) {
    const out: string[] = [];
    for (const [rid, at] of this.due) {
      if (at <= nowMs) out.push(rid);
      if (out.length >= limit) break;
    }
    return out;
  }

  async heartbeat() {}

  async aliveNodes(nodeIds: string[]) {
    // One process: every node id it knows is itself.
    return new Set(nodeIds);
  }

  async close() {
    this.rooms.clear();
    this.due.clear();
  }
}

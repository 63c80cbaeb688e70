import type {
  ControllerEventData,
  ControllerEventType,
  ControllerRequestData,
  ControllerRequestType,
  ErrorCode,
  LeaveReason,
  SvcRoomRole,
} from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import type { RealtimeDeps } from '../deps.ts';
import type { LiveParticipant, LiveRoom, RoomStore } from '../room-store.ts';
import type { RoomClaims } from '../rooms.ts';
import type { ControllerConfig } from './config.ts';
import type { ControllerState } from './state.ts';

/** What a command answers: the ack's data, or a registry code (nothing changes then). */
export type CommandOutcome =
  | { ack?: Record<string, unknown>; error?: undefined }
  | { error: ErrorCode; message?: string };

export const refuse = (error: ErrorCode, message?: string): CommandOutcome => ({ error, message });

/** The view of the room a locked command gets: it changes `room`/`ctl` and emits events. */
export interface CommandContext {
  room: LiveRoom;
  ctl: ControllerState;
  /** The participant sending the command (null for commands allowed before joining). */
  actor: LiveParticipant | null;
  claims: RoomClaims;
  role: SvcRoomRole;
  now: number;
  cfg: ControllerConfig;
  svc: RealtimeDeps;
  /** Appends a room event (in call order, after the commit). `history`: keep in the chat list. */
  emit<T extends ControllerEventType>(type: T, data: ControllerEventData[T]): void;
  /** Removes a participant now (kick): participant.left, then its consequences (hands, host…). */
  remove(p: LiveParticipant, reason: LeaveReason, extra: Record<string, unknown>): void;
  /** Runs after the commit, once the room's lock is released (other rooms, webhooks). */
  after(fn: () => Promise<void>): void;
  rooms: ControllerRooms;
}

/** What the controller needs from the rooms service to run breakout rooms. */
export interface ControllerRooms {
  /** Opens a breakout room linked to `main`; resolves with its room instance id. */
  openBreakout(
    main: LiveRoom,
    roomName: string,
    breakoutId: string,
    allowed: string[],
    admins: string[],
  ): Promise<string>;
  /** Replaces who may join a breakout room and who holds a role there (demoting who lost it). */
  setBreakoutAllowed(rid: string, allowed: string[], admins: string[]): Promise<void>;
  /** Brings a main room's breakout rooms up to date with its roles, under the main room's lock. */
  syncBreakouts(mainRid: string): Promise<void>;
  /** Appends an event to another room's log (no lock, no membership check). */
  appendEvent(rid: string, type: string, data: unknown): Promise<void>;
  /** Ends a room at once (its participants get `room.deleted`). */
  deleteRoom(projectId: string, roomName: string): Promise<void>;
  /** Drops a closed breakout room from the main room's pending deletes (its delete succeeded). */
  forgetClosedBreakout(mainRid: string, roomName: string): Promise<void>;
  /** Where work done in the background reports its failures. */
  readonly log: Pick<FastifyBaseLogger, 'warn'>;
}

/** Who may send a command; the server refuses others with the code in parentheses. */
export type Who =
  | 'anyone'
  /** host or co-host (`cohost_required`) */
  | 'admin'
  /** the host (`host_required`) */
  | 'host';

/** A command that reads and changes the room under its lock. */
export interface LockedCommand<T extends ControllerRequestType = ControllerRequestType> {
  kind: 'locked';
  who: Who;
  /** Changes nothing: answered without a commit. */
  readOnly?: boolean;
  /** Accepted before `session.join` (the invitee answering an invitation). */
  beforeJoin?: boolean;
  run(
    ctx: CommandContext,
    data: ControllerRequestData<T>,
  ): CommandOutcome | Promise<CommandOutcome>;
}

/** What a direct (lock-free, high-rate) command gets. */
export interface DirectContext {
  rid: string;
  sid: string;
  claims: RoomClaims;
  now: number;
  cfg: ControllerConfig;
  svc: RealtimeDeps;
  store: RoomStore;
}

/** A high-rate command that needs only membership: appended without the room's lock. */
export interface DirectCommand<T extends ControllerRequestType = ControllerRequestType> {
  kind: 'direct';
  run(ctx: DirectContext, data: ControllerRequestData<T>): Promise<CommandOutcome>;
}

export type Command<T extends ControllerRequestType = ControllerRequestType> =
  | LockedCommand<T>
  | DirectCommand<T>;

/** One group's commands, by request type. */
export type CommandGroup = { [T in ControllerRequestType]?: Command<T> };

/** Counts one use of a per-user budget in the shared state (so it holds across nodes). */
export async function withinRate(
  ctx: DirectContext,
  bucket: string,
  limit: number,
  windowMs: number,
) {
  const result = await ctx.svc.state.rateLimit(
    `rt:${bucket}:${ctx.rid}:${ctx.claims.userId}`,
    limit,
    windowMs,
    ctx.now,
  );
  return result.allowed;
}

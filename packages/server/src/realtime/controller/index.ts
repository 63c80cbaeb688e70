import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import {
  CONTROLLER_REQUESTS,
  type ControllerSnapshot,
  type ErrorCode,
  type SvcChatMessage,
} from '@svc/protocol';
import type { RealtimeDeps } from '../deps.ts';
import type { LiveParticipant, LiveRoom, NewRoomEvent, RoomStore } from '../room-store.ts';
import type { RoomClaims } from '../rooms.ts';
import {
  breakoutAdminsOf,
  breakoutCommands,
  closeDueBreakouts,
  revokeBreakoutAdmin,
} from './breakout.ts';
import { chatCommands } from './chat.ts';
import type {
  Command,
  CommandContext,
  CommandGroup,
  CommandOutcome,
  ControllerRooms,
  DirectContext,
} from './command.ts';
import type { ControllerConfig } from './config.ts';
import { handCommands } from './hands.ts';
import { cancelInvitationsOf, expireInvitations, invitationCommands } from './invitations.ts';
import { holdMutes, type MediaModeration, mediaCommands, restoreHeldMute } from './media.ts';
import { moderationCommands } from './moderation.ts';
import { pollCommands, voterKey } from './polls.ts';
import { ReactionBatcher, reactionCommands } from './reactions.ts';
import { assignJoinRole, roleCommands, succeedHost, syncBreakoutRoles } from './roles.ts';
import {
  type ControllerState,
  controllerOf,
  controllerSnapshot,
  isAdmin,
  roleOf,
} from './state.ts';
import { waitingCommands } from './waiting-room.ts';

export type { ControllerRooms } from './command.ts';
export type { ControllerConfig } from './config.ts';
export type { MediaModeration } from './media.ts';

interface Registered {
  command: Command;
  check: ReturnType<typeof TypeCompiler.Compile<TSchema>>;
}

/** What a controller hook may add to the commit it runs in. */
export interface HookOutput {
  events: NewRoomEvent[];
  after: (() => Promise<void>)[];
}

/** A connection on a node (a waiting connection that a newer one replaced). */
export interface ConnRef {
  nodeId: string;
  connId: string;
}

export type Admission =
  | { kind: 'join' }
  /** `replaced`: the same user's earlier waiting connection, which the caller must end. */
  | { kind: 'wait'; replaced: ConnRef | null }
  | { kind: 'refuse'; code: 'banned' | 'breakout_not_assigned' };

/**
 * The room controller: a registry of commands by request type (one module per group: roles,
 * moderation, chat, hands, polls, reactions, invitations, waiting room, breakout rooms, media)
 * and the hooks the rooms service calls inside its own commits (join, leave, sweep). Every rule
 * runs on the server under the room's lock (or, for chat and reactions, as a membership-checked
 * append), so each node decides the same way.
 */
export class RoomController {
  private registry = new Map<string, Registered>();
  readonly reactions: ReactionBatcher;
  /** Set by the media plane when it can enforce mutes (see media.ts). */
  mediaEngine: MediaModeration | null = null;

  constructor(
    private svc: RealtimeDeps,
    private store: RoomStore,
    readonly cfg: ControllerConfig,
  ) {
    this.reactions = new ReactionBatcher(store, cfg.reactionBatchMs);
    const groups: CommandGroup[] = [
      roleCommands,
      moderationCommands,
      chatCommands,
      handCommands,
      pollCommands,
      reactionCommands(this.reactions),
      invitationCommands,
      waitingCommands,
      breakoutCommands,
      mediaCommands(() => this.mediaEngine),
    ];
    for (const group of groups) {
      for (const [type, command] of Object.entries(group)) {
        const schema = (CONTROLLER_REQUESTS as Record<string, TSchema>)[type]!;
        this.registry.set(type, {
          command: command as Command,
          check: TypeCompiler.Compile(schema),
        });
      }
    }
  }

  /** The command registered for a request type (own entries of a Map: no prototype keys). */
  lookup(type: string): Registered | undefined {
    return this.registry.get(type);
  }

  /** Whether `type` may be sent before session.join (answering an invitation). */
  allowedBeforeJoin(type: string) {
    const c = this.registry.get(type)?.command;
    return c?.kind === 'locked' && c.beforeJoin === true;
  }

  directContext(rid: string, sid: string, claims: RoomClaims): DirectContext {
    return {
      rid,
      sid,
      claims,
      now: this.svc.clock.now(),
      cfg: this.cfg,
      svc: this.svc,
      store: this.store,
    };
  }

  /** Checks the sender's role for a locked command; the registry code when refused. */
  permission(command: Command, ctl: ControllerState, userId: string): ErrorCode | null {
    if (command.kind !== 'locked') return null;
    if (command.who === 'host' && roleOf(ctl, userId) !== 'host') return 'host_required';
    if (command.who === 'admin' && !isAdmin(ctl, userId)) return 'cohost_required';
    return null;
  }

  // ---- Hooks inside the rooms service's commits ---------------------------------------------

  /**
   * Whether the token's user may join now, must wait for approval, or is refused. One connection
   * per user waits: a newer one (`conn`, on any node) takes over the entry and the earlier one is
   * returned as `replaced`, so that it does not wait on an entry nobody can approve any more.
   */
  admit(
    room: LiveRoom,
    claims: RoomClaims,
    rejoining: boolean,
    conn: ConnRef,
    out: HookOutput,
  ): Admission {
    const ctl = controllerOf(room, this.cfg);
    const now = this.svc.clock.now();
    if (ctl.bans.some((b) => b.userId === claims.userId && b.untilMs > now)) {
      return { kind: 'refuse', code: 'banned' };
    }
    const b = ctl.breakoutOf;
    if (b && !b.allowed.includes(claims.userId))
      return { kind: 'refuse', code: 'breakout_not_assigned' };
    if (
      !ctl.settings.waitingRoom ||
      rejoining ||
      claims.isHost ||
      isAdmin(ctl, claims.userId) ||
      b?.allowed.includes(claims.userId)
    ) {
      ctl.admitted = ctl.admitted.filter((u) => u !== claims.userId);
      return { kind: 'join' };
    }
    if (ctl.admitted.includes(claims.userId)) {
      ctl.admitted = ctl.admitted.filter((u) => u !== claims.userId);
      return { kind: 'join' };
    }
    const existing = ctl.waiting.find((w) => w.userId === claims.userId);
    if (existing) {
      const replaced =
        existing.connId !== conn.connId && existing.nodeId !== undefined
          ? { nodeId: existing.nodeId, connId: existing.connId }
          : null;
      Object.assign(existing, conn);
      return { kind: 'wait', replaced };
    }
    const entry = {
      userId: claims.userId,
      name: claims.name,
      ...(claims.avatarUrl !== undefined ? { avatarUrl: claims.avatarUrl } : {}),
      since: now,
      timeoutAtMs: now + this.cfg.waitingTimeoutMs,
      ...conn,
    };
    ctl.waiting.push(entry);
    const { timeoutAtMs: _t, connId: _c, nodeId: _n, ...participant } = entry;
    out.events.push({ type: 'waiting.joined', data: { participant } });
    return { kind: 'wait', replaced: null };
  }

  /**
   * After a participant joined (its participant.joined is already in `out`): its role, and a mute
   * held since it left. A user back in the main room without a role no longer holds one in its
   * breakout rooms.
   */
  joined(
    room: LiveRoom,
    p: LiveParticipant,
    claims: RoomClaims,
    out: HookOutput,
    rooms: ControllerRooms,
  ) {
    const ctl = controllerOf(room, this.cfg);
    const before = breakoutAdminsOf(ctl);
    // In a breakout room the main room's host and co-hosts hold the host role's rights too.
    const mayHost = claims.isHost || (ctl.breakoutOf?.admins.includes(claims.userId) ?? false);
    assignJoinRole(room, ctl, p, { ...claims, isHost: mayHost }, this.emitter(out));
    restoreHeldMute(ctl, claims.userId, this.emitter(out));
    if (!ctl.breakoutOf && !isAdmin(ctl, claims.userId)) revokeBreakoutAdmin(ctl, claims.userId);
    this.breakoutAdminsChanged(room, before, out, rooms);
  }

  /** A breakout room's lists changed (`previousAdmins` before): roles there follow. */
  breakoutAccessChanged(room: LiveRoom, previousAdmins: string[], out: HookOutput) {
    syncBreakoutRoles(room, controllerOf(room, this.cfg), previousAdmins, this.emitter(out));
  }

  /** After a join or leave changed the main room's admins: its breakout rooms follow. */
  private breakoutAdminsChanged(
    room: LiveRoom,
    before: string[],
    out: HookOutput,
    rooms: ControllerRooms,
  ) {
    const ctl = controllerOf(room, this.cfg);
    const now = breakoutAdminsOf(ctl);
    if (ctl.breakouts.length === 0) return;
    if (now.length === before.length && now.every((u) => before.includes(u))) return;
    out.after.push(() => rooms.syncBreakouts(room.rid));
  }

  /** After participants left for good (their participant.left is already in `out`). */
  left(room: LiveRoom, leaving: LiveParticipant[], out: HookOutput, rooms: ControllerRooms) {
    const ctl = controllerOf(room, this.cfg);
    const before = breakoutAdminsOf(ctl);
    const emit = this.emitter(out);
    const present = new Set(room.participants.map((p) => p.userId));
    const gone = leaving.map((p) => p.userId).filter((u) => !present.has(u));
    if (gone.length === 0) return;
    for (const userId of gone) {
      if (ctl.hands.some((h) => h.userId === userId)) emit('hand.lowered', { userId, by: null });
      if (ctl.typing.some((t) => t.userId === userId))
        emit('typing.stopped', { userId, reason: 'LEFT' });
    }
    ctl.hands = ctl.hands.filter((h) => present.has(h.userId));
    ctl.typing = ctl.typing.filter((t) => present.has(t.userId));
    if (ctl.spotlight.some((u) => !present.has(u))) {
      ctl.spotlight = ctl.spotlight.filter((u) => present.has(u));
      emit('spotlight.changed', { userIds: ctl.spotlight, by: 'server' });
    }
    holdMutes(ctl, present);
    ctl.media = ctl.media.filter((m) => present.has(m.userId));
    ctl.states = ctl.states.filter((s) => present.has(s.userId));
    ctl.quality = ctl.quality.filter((q) => present.has(q.userId));
    succeedHost(room, ctl, gone, emit);
    this.breakoutAdminsChanged(room, before, out, rooms);
    cancelInvitationsOf(this.hookContext(room, ctl, out), gone);
  }

  /** Time-based rules (typing expiry, invitation and waiting timeouts, breakout countdowns). */
  sweep(room: LiveRoom, out: HookOutput, rooms: ControllerRooms) {
    const ctl = room.controller;
    if (!ctl) return;
    const now = this.svc.clock.now();
    const emit = this.emitter(out);
    for (const t of ctl.typing.filter((x) => x.expiresAt <= now)) {
      emit('typing.stopped', { userId: t.userId, reason: 'EXPIRED' });
    }
    ctl.typing = ctl.typing.filter((x) => x.expiresAt > now);
    for (const w of ctl.waiting.filter((x) => x.timeoutAtMs <= now)) {
      emit('waiting.timed_out', { userId: w.userId });
    }
    ctl.waiting = ctl.waiting.filter((x) => x.timeoutAtMs > now);
    const ctx = this.hookContext(room, ctl, out, rooms);
    expireInvitations(ctx);
    closeDueBreakouts(ctx);
  }

  /** The earliest time a rule of this room is due (for the sweeper), or +Infinity. */
  dueAt(room: LiveRoom): number {
    const ctl = room.controller;
    if (!ctl) return Number.POSITIVE_INFINITY;
    let due = Number.POSITIVE_INFINITY;
    for (const t of ctl.typing) due = Math.min(due, t.expiresAt);
    for (const w of ctl.waiting) due = Math.min(due, w.timeoutAtMs);
    for (const i of ctl.invitations) due = Math.min(due, i.expiresAt);
    for (const b of ctl.breakouts) if (b.closesAt !== null) due = Math.min(due, b.closesAt);
    for (const c of ctl.closed ?? []) due = Math.min(due, c.dueAt);
    return due;
  }

  /** A waiting connection went away: it leaves the waiting room (if it is still that entry). */
  waitingGone(room: LiveRoom, userId: string, connId: string, out: HookOutput) {
    const ctl = room.controller;
    const w = ctl?.waiting.find((x) => x.userId === userId);
    if (!ctl || !w || w.connId !== connId) return false;
    ctl.waiting = ctl.waiting.filter((x) => x !== w);
    out.events.push({ type: 'waiting.left', data: { userId } });
    return true;
  }

  /** The controller part of a joiner's snapshot; chat history up to `lastSeq`. */
  async snapshot(room: LiveRoom, viewer: string, lastSeq: number): Promise<ControllerSnapshot> {
    const chat: SvcChatMessage[] = [];
    if (this.cfg.chatHistory > 0) {
      for (const frame of await this.store.readHistory(room.rid)) {
        const ev = JSON.parse(frame) as {
          seq: number;
          ts: number;
          data: Omit<SvcChatMessage, 'seq' | 'ts'>;
        };
        if (ev.seq <= lastSeq) chat.push({ seq: ev.seq, ts: ev.ts, ...ev.data });
      }
    }
    return controllerSnapshot(room, this.cfg, viewer, (poll) => voterKey(poll, viewer), chat);
  }

  /** Builds the context a locked command runs in. */
  commandContext(
    room: LiveRoom,
    claims: RoomClaims,
    actor: LiveParticipant | null,
    out: HookOutput,
    rooms: ControllerRooms,
    remove: CommandContext['remove'],
  ): CommandContext {
    const ctl = controllerOf(room, this.cfg);
    return {
      room,
      ctl,
      actor,
      claims,
      role: roleOf(ctl, claims.userId),
      now: this.svc.clock.now(),
      cfg: this.cfg,
      svc: this.svc,
      emit: this.emitter(out),
      remove,
      after: (fn) => out.after.push(fn),
      rooms,
    };
  }

  private hookContext(
    room: LiveRoom,
    ctl: ControllerState,
    out: HookOutput,
    rooms?: ControllerRooms,
  ) {
    return {
      room,
      ctl,
      now: this.svc.clock.now(),
      svc: this.svc,
      cfg: this.cfg,
      emit: this.emitter(out),
      after: (fn: () => Promise<void>) => {
        out.after.push(fn);
      },
      rooms: rooms as ControllerRooms,
    };
  }

  private emitter(out: HookOutput): CommandContext['emit'] {
    return (type, data) => {
      out.events.push({ type, data });
    };
  }
}

export type ControllerAnswer = CommandOutcome;

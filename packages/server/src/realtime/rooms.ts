import { createHash, randomBytes } from 'node:crypto';
import {
  type LeaveReason,
  type MediaSnapshot,
  REALTIME_TOKEN_AUDIENCE,
  type RoomSnapshot,
  type SendMessageBody,
  type SvcLiveType,
  type SvcParticipantInfo,
  type SvcRoomInfo,
  type SvcRoomOptions,
  type SvcRoomStatus,
  type SvcTokenResponse,
  type SvcTrackInfo,
  type TrackStopReason,
} from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import { iso } from '../clock.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { newId } from '../ids.ts';
import type { RealtimeConfig } from './config.ts';
import { breakoutAccess, breakoutRoomNames, pushBreakoutAccess } from './controller/breakout.ts';
import {
  type ConnRef,
  type ControllerAnswer,
  type ControllerRooms,
  type HookOutput,
  RoomController,
} from './controller/index.ts';
import { controllerOf } from './controller/state.ts';
import type { RealtimeDeps } from './deps.ts';
import type {
  LiveParticipant,
  LiveRoom,
  LiveTrack,
  NewRoomEvent,
  RoomStore,
  RoomTx,
  StoredRoomEvent,
} from './room-store.ts';
import type { RealtimeRoomsTable } from './tables.ts';

/** What a verified access token says. */
export interface RoomClaims {
  projectId: string;
  roomName: string;
  rid: string;
  userId: string;
  name: string;
  avatarUrl?: string;
  isHost: boolean;
  canJoinWithNoHost: boolean;
  /** The token's media narrowing (true when the token does not say). */
  canPublish: boolean;
  canSubscribe: boolean;
  expiresAtMs: number;
}

/** Builds the media part of a join snapshot (the media area provides it). */
export type MediaSnapshotBuilder = (room: LiveRoom, claims: RoomClaims) => MediaSnapshot;

/** The wire form of a stored track. */
export function trackInfo(t: LiveTrack): SvcTrackInfo {
  return {
    trackId: t.trackId,
    sid: t.sid,
    userId: t.userId,
    kind: t.kind,
    source: t.source,
    muted: t.muted,
  };
}

const NO_MEDIA: MediaSnapshotBuilder = () => ({
  available: false,
  iceServers: [],
  permissions: { canPublishSources: [], canSubscribe: false },
  tracks: [],
});

export type JoinResult =
  | { kind: 'joined'; snapshot: RoomSnapshot; lastSeq: number; sid: string }
  | {
      kind: 'waiting';
      reason: 'NO_HOST' | 'APPROVAL';
      /** The same user's earlier waiting connection, which this one replaced (to be ended). */
      replaced?: ConnRef | null;
    }
  | { kind: 'refused'; code: 'room_not_found' | 'room_full' | 'banned' | 'breakout_not_assigned' };

export type ResumeResult =
  | {
      kind: 'resumed';
      sid: string;
      replay: StoredRoomEvent[];
      lastSeq: number;
      /** The socket that held the session until now, when it was still connected. */
      replaced: { nodeId: string; connId: string } | null;
    }
  | { kind: 'failed' };

export interface DomainRecord {
  type: 'room.started' | 'room.ended' | 'participant.joined' | 'participant.left';
  data: Record<string, unknown>;
}

export function participantInfo(p: LiveParticipant): SvcParticipantInfo {
  return {
    sid: p.sid,
    userId: p.userId,
    name: p.name,
    ...(p.avatarUrl !== undefined ? { avatarUrl: p.avatarUrl } : {}),
    isHost: p.isHost,
    joinedAt: iso(p.joinedAtMs),
    connected: p.connected,
  };
}

export function roomInfoFromRow(row: RealtimeRoomsTable): SvcRoomInfo {
  return {
    roomName: row.room_name,
    liveType: row.live_type as SvcLiveType,
    status: row.status,
    maxParticipants: row.max_participants,
    numParticipants: row.num_participants,
    canJoinWithNoHost: row.can_join_with_no_host === 1,
    metadata: row.metadata,
    createdAt: row.created_at,
    ...(row.ended_at ? { endedAt: row.ended_at } : {}),
  };
}

function liveCounts(room: LiveRoom) {
  return {
    status: (room.participants.length > 0 ? 'ACTIVE' : 'IDLE') as SvcRoomStatus,
    numParticipants: room.participants.length,
    metadata: room.metadata,
  };
}

function roomInfoFromLive(room: LiveRoom): SvcRoomInfo {
  return {
    roomName: room.roomName,
    liveType: room.liveType,
    status: room.participants.length > 0 ? 'ACTIVE' : 'IDLE',
    maxParticipants: room.maxParticipants,
    numParticipants: room.participants.length,
    canJoinWithNoHost: room.canJoinWithNoHost,
    metadata: room.metadata,
    createdAt: iso(room.createdAtMs),
  };
}

function liveFromRow(row: RealtimeRoomsTable, nowMs: number): LiveRoom {
  return {
    rid: row.room_id,
    projectId: row.project_id,
    roomName: row.room_name,
    liveType: row.live_type as SvcLiveType,
    maxParticipants: row.max_participants,
    canJoinWithNoHost: row.can_join_with_no_host === 1,
    metadata: row.metadata,
    createdAtMs: Date.parse(row.created_at),
    participants: [],
    emptySinceMs: nowMs,
    startedAtMs: null,
  };
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * Rooms: the durable records (SQL) and the commands on live rooms (shared state, under the room's
 * lock). Every domain event (room.started, room.ended, participant.joined, participant.left) is
 * emitted by {@link RoomService.emitDomain}, right after the commit that caused it, still under
 * the lock, so their order per room is the commit order on every node.
 */
export class RoomService implements ControllerRooms {
  /** The room controller (roles, chat, polls…): its commands run through {@link command}. */
  readonly controller: RoomController;

  constructor(
    private svc: RealtimeDeps,
    private store: RoomStore,
    private cfg: RealtimeConfig,
    private multiNode: boolean,
    /** Where the steps after a commit report their failures (they cannot fail the command). */
    readonly log: Pick<FastifyBaseLogger, 'warn'>,
  ) {
    this.controller = new RoomController(svc, store, cfg.controller);
  }

  /** The media area sets this; without it snapshots say media is unavailable. */
  mediaSnapshot: MediaSnapshotBuilder = NO_MEDIA;

  private get now() {
    return this.svc.clock.now();
  }

  private get db() {
    return this.svc.store.db;
  }

  // ---- Durable records ----------------------------------------------------------------------

  async getRecord(projectId: string, roomName: string) {
    return this.db
      .selectFrom('realtime_rooms')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('room_name', '=', roomName)
      .executeTakeFirst();
  }

  async getRoom(projectId: string, roomName: string): Promise<SvcRoomInfo> {
    const row = await this.getRecord(projectId, roomName);
    if (!row) throw new ApiError('room_not_found');
    if (row.status === 'ENDED') return roomInfoFromRow(row);
    const room = await this.store.peek(row.room_id);
    return room ? { ...roomInfoFromRow(row), ...liveCounts(room) } : roomInfoFromRow(row);
  }

  async listRooms(
    projectId: string,
    status: SvcRoomStatus | undefined,
    page: number,
    limit: number,
  ) {
    let q = this.db.selectFrom('realtime_rooms').where('project_id', '=', projectId);
    if (status) q = q.where('status', '=', status);
    const total = await q
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const rows = await q
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('room_name')
      .limit(limit)
      .offset((page - 1) * limit)
      .execute();
    return { items: rows.map(roomInfoFromRow), meta: { total: Number(total.n), page, limit } };
  }

  /**
   * Creates the room, or (with `reuse`) returns the open room of that name. A name whose room has
   * ENDED starts a new room instance (new `room_id`) in the same row.
   */
  async openRoom(
    projectId: string,
    options: {
      roomName: string;
      /** Required when this call creates the room; ignored for an open room. */
      liveType?: SvcLiveType;
      maxParticipants?: number;
      metadata?: string;
      canJoinWithNoHost?: boolean;
    },
    reuse: boolean,
    attempt = 0,
  ): Promise<RealtimeRoomsTable> {
    const existing = await this.getRecord(projectId, options.roomName);
    if (existing && existing.status !== 'ENDED') {
      if (!reuse) throw new ApiError('room_exists');
      return existing;
    }
    if (!options.liveType) {
      throw invalidField('body.liveType', 'is required to create the room');
    }
    const row: RealtimeRoomsTable = {
      project_id: projectId,
      room_name: options.roomName,
      room_id: newId('rm', this.now),
      live_type: options.liveType,
      status: 'IDLE',
      max_participants: options.maxParticipants ?? this.cfg.defaultMaxParticipants,
      num_participants: 0,
      can_join_with_no_host: options.canJoinWithNoHost === false ? 0 : 1,
      metadata: options.metadata ?? null,
      created_at: iso(this.now),
      ended_at: null,
      ended_reason: null,
    };
    let written = false;
    if (existing) {
      const res = await this.db
        .updateTable('realtime_rooms')
        .set(row)
        .where('project_id', '=', projectId)
        .where('room_name', '=', options.roomName)
        .where('room_id', '=', existing.room_id)
        .where('status', '=', 'ENDED')
        .executeTakeFirst();
      written = Number(res.numUpdatedRows) === 1;
    } else {
      try {
        await this.db.insertInto('realtime_rooms').values(row).execute();
        written = true;
      } catch (err) {
        // A concurrent request created it first; look again below.
        if (!(await this.getRecord(projectId, options.roomName))) throw err;
      }
    }
    if (!written) {
      if (attempt > 2) throw new ApiError('room_exists');
      return this.openRoom(projectId, options, reuse, attempt + 1);
    }
    await this.store.withLock(row.room_id, async (tx) => {
      if (!(await tx.load()))
        await tx.commit(liveFromRow(row, this.now), [], this.dueAt(liveFromRow(row, this.now)));
    });
    return row;
  }

  /**
   * Gives every open room without live state (the in-process state after a restart) a fresh,
   * empty one, so its empty timeout runs and it ends. With Redis the state survives and nothing
   * changes. Called once at startup.
   */
  async reviveOpenRooms() {
    let after = '';
    for (;;) {
      const rows = await this.db
        .selectFrom('realtime_rooms')
        .selectAll()
        .where('status', '!=', 'ENDED')
        .where('room_id', '>', after)
        .orderBy('room_id')
        .limit(500)
        .execute();
      for (const row of rows) {
        await this.store.withLock(row.room_id, async (tx) => {
          if (await tx.load()) return;
          const live = liveFromRow(row, this.now);
          await tx.commit(live, [], this.dueAt(live));
          await this.syncRecord(live);
        });
      }
      if (rows.length < 500) return;
      after = rows[rows.length - 1]!.room_id;
    }
  }

  /** Loads the live room; revives it from its record if the shared state lost it (restart). */
  private async loadLive(tx: RoomTx, projectId: string, roomName: string, rid: string) {
    const room = await tx.load();
    if (room) return room;
    const row = await this.getRecord(projectId, roomName);
    if (!row || row.room_id !== rid || row.status === 'ENDED') return null;
    const revived = liveFromRow(row, this.now);
    if (row.status !== 'IDLE') await this.syncRecord(revived);
    return revived;
  }

  private pendingSync = new Set<string>();

  /**
   * Copies a live room's status and count to its record soon, outside the room's lock (joins
   * stay fast). Records are for listings; GET of one room reads the live state. Another node's
   * later write may briefly overtake; the next change of the room corrects it.
   */
  private scheduleSync(rid: string) {
    if (this.pendingSync.has(rid)) return;
    this.pendingSync.add(rid);
    setImmediate(() => {
      this.pendingSync.delete(rid);
      void this.store
        .peek(rid)
        .then((room) => (room ? this.syncRecord(room) : undefined))
        .catch(() => {});
    });
  }

  private async syncRecord(room: LiveRoom) {
    await this.db
      .updateTable('realtime_rooms')
      .set({
        status: room.participants.length > 0 ? 'ACTIVE' : 'IDLE',
        num_participants: room.participants.length,
        metadata: room.metadata,
      })
      .where('room_id', '=', room.rid)
      .where('status', '!=', 'ENDED')
      .execute();
  }

  private async endRecord(rid: string, reason: 'DELETED' | 'EMPTY_TIMEOUT') {
    await this.db
      .updateTable('realtime_rooms')
      .set({ status: 'ENDED', num_participants: 0, ended_at: iso(this.now), ended_reason: reason })
      .where('room_id', '=', rid)
      .execute();
  }

  /** When the room must next be looked at by the sweeper. */
  private dueAt(room: LiveRoom): number | null {
    let due = Number.POSITIVE_INFINITY;
    let anyConnected = false;
    for (const p of room.participants) {
      if (p.connected) anyConnected = true;
      else if (p.disconnectedAtMs !== null) {
        due = Math.min(due, p.disconnectedAtMs + this.cfg.departureGraceMs);
      }
    }
    // With several nodes, check now and then that the nodes holding sockets are alive.
    if (anyConnected && this.multiNode) due = Math.min(due, this.now + this.cfg.nodeTtlMs);
    if (room.participants.length === 0 && room.emptySinceMs !== null) {
      due = Math.min(due, room.emptySinceMs + this.cfg.emptyTimeoutMs);
    }
    due = Math.min(due, this.controller.dueAt(room));
    return Number.isFinite(due) ? due : null;
  }

  // ---- Domain events: the one place they are emitted ----------------------------------------

  private async emitDomain(room: LiveRoom, records: DomainRecord[]) {
    for (const r of records) {
      await this.svc.events.emit({
        projectId: room.projectId,
        type: r.type,
        data: { roomName: room.roomName, roomId: room.rid, ...r.data },
        orderingKey: `room:${room.projectId}:${room.roomName}`,
        occurredAtMs: this.now,
      });
    }
  }

  /** Commits and then emits the domain events, under the lock. */
  private async finish(
    tx: RoomTx,
    room: LiveRoom,
    events: NewRoomEvent[],
    domain: DomainRecord[],
    ended = false,
  ) {
    const result = await tx.commit(ended ? null : room, events, ended ? null : this.dueAt(room));
    await this.emitDomain(room, domain);
    return result;
  }

  // ---- REST commands ------------------------------------------------------------------------

  async issueToken(projectId: string, o: SvcRoomOptions): Promise<SvcTokenResponse> {
    const row = await this.openRoom(
      projectId,
      {
        roomName: o.roomName,
        liveType: o.liveType,
        metadata: o.roomMetadata,
        canJoinWithNoHost: o.canJoinWithNoHost,
      },
      true,
    );
    const p = o.participant;
    const { token, expiresAtMs } = await this.svc.signingKeys.sign(
      {
        pid: projectId,
        room: o.roomName,
        rid: row.room_id,
        name: p.name,
        ...(p.avatarUrl !== undefined ? { avatarUrl: p.avatarUrl } : {}),
        host: p.isHost === true,
        canJoinWithNoHost: o.canJoinWithNoHost !== false,
        ...(o.canPublish === false ? { canPublish: false } : {}),
        ...(o.canSubscribe === false ? { canSubscribe: false } : {}),
      },
      {
        audience: REALTIME_TOKEN_AUDIENCE,
        subject: p.userId,
        expiresInSeconds: this.cfg.tokenTtlSeconds,
      },
    );
    const base = this.svc.config.publicUrl.replace(/^http/, 'ws');
    const wsUrl = `${base}/v1/realtime/ws?room=${encodeURIComponent(o.roomName)}&access_token=${token}`;
    return { token, roomName: o.roomName, userId: p.userId, wsUrl, expiresAt: iso(expiresAtMs) };
  }

  async participants(projectId: string, roomName: string): Promise<SvcParticipantInfo[]> {
    const row = await this.getRecord(projectId, roomName);
    if (!row) throw new ApiError('room_not_found');
    if (row.status === 'ENDED') return [];
    const room = await this.store.peek(row.room_id);
    return room ? room.participants.map(participantInfo) : [];
  }

  /**
   * Ends the room at once: everyone is disconnected with ROOM_DELETED, and so is everyone in its
   * breakout rooms, which end with it. Idempotent, and safe to retry: the breakout rooms end
   * first and then the record, so a delete that failed part way (Redis gone mid-lock) leaves a
   * live room, or an ENDED record over a live room, which the next delete ends.
   */
  async deleteRoom(projectId: string, roomName: string) {
    const row = await this.getRecord(projectId, roomName);
    if (!row) throw new ApiError('room_not_found');
    const ended = row.status === 'ENDED';
    if (ended && !(await this.store.peek(row.room_id))) return;
    await this.store.withLock(row.room_id, async (tx) => {
      const room = (await tx.load()) ?? (ended ? null : liveFromRow(row, this.now));
      if (!room) return;
      // Under the main room's lock (the order every breakout command takes locks in): no
      // breakout room is created meanwhile, and none outlives its main room.
      for (const name of breakoutRoomNames(room.controller)) {
        await this.deleteRoom(projectId, name).catch((err: unknown) => {
          if (!(err instanceof ApiError && err.code === 'room_not_found')) throw err;
        });
      }
      if (!ended) await this.endRecord(row.room_id, 'DELETED');
      const domain: DomainRecord[] = room.participants.map((p) => ({
        type: 'participant.left',
        data: { participant: participantInfo(p), reason: 'ROOM_DELETED' },
      }));
      if (room.startedAtMs !== null)
        domain.push({ type: 'room.ended', data: { reason: 'ROOM_DELETED' } });
      await this.finish(
        tx,
        room,
        [{ type: 'room.deleted', data: { reason: 'ROOM_DELETED' } }],
        domain,
        true,
      );
    });
  }

  async sendApiMessage(projectId: string, roomName: string, body: SendMessageBody) {
    const row = await this.getRecord(projectId, roomName);
    if (!row) throw new ApiError('room_not_found');
    if (row.status === 'ENDED') throw new ApiError('room_ended');
    const event = {
      type: 'message.received',
      data: { message: body.message, sender: body.sender, viaApi: true },
    };
    let stored = await this.store.appendIfMember(row.room_id, null, event);
    if (!stored) {
      // The shared state lost the room (restart of the embedded default): revive it.
      await this.store.withLock(row.room_id, async (tx) => {
        const room = await this.loadLive(tx, projectId, roomName, row.room_id);
        if (room) await tx.commit(room, [], this.dueAt(room));
      });
      stored = await this.store.appendIfMember(row.room_id, null, event);
      if (!stored) throw new ApiError('room_ended');
    }
    return stored.seq;
  }

  // ---- Socket commands ------------------------------------------------------------------------

  /** Joins (or queues) the token's user. A previous session of the same user is replaced. */
  async join(claims: RoomClaims, nodeId: string, connId: string): Promise<JoinResult> {
    // Work the join's commit leaves for after the lock (breakout rooms following a new host).
    const after: (() => Promise<void>)[] = [];
    const result = await this.store.withLock(claims.rid, async (tx): Promise<JoinResult> => {
      const room = await this.loadLive(tx, claims.projectId, claims.roomName, claims.rid);
      if (!room) return { kind: 'refused', code: 'room_not_found' };
      if (!claims.isHost && !claims.canJoinWithNoHost && !room.participants.some((p) => p.isHost)) {
        return { kind: 'waiting', reason: 'NO_HOST' };
      }
      const previous = room.participants.find((p) => p.userId === claims.userId);
      const out: HookOutput = { events: [], after: [] };
      const admission = this.controller.admit(
        room,
        claims,
        previous !== undefined,
        { nodeId, connId },
        out,
      );
      if (admission.kind === 'refuse') return { kind: 'refused', code: admission.code };
      if (admission.kind === 'wait') {
        await tx.commit(room, out.events, this.dueAt(room));
        return { kind: 'waiting', reason: 'APPROVAL', replaced: admission.replaced };
      }
      const others = room.participants.filter((p) => p !== previous);
      if (others.length >= room.maxParticipants) return { kind: 'refused', code: 'room_full' };
      const resumeToken = randomBytes(24).toString('base64url');
      const now = this.now;
      const participant: LiveParticipant = {
        sid: newId('PA', now),
        userId: claims.userId,
        name: claims.name,
        ...(claims.avatarUrl !== undefined ? { avatarUrl: claims.avatarUrl } : {}),
        isHost: claims.isHost,
        joinedAtMs: now,
        resumeTokenHash: sha256(resumeToken),
        nodeId,
        connId,
        connected: true,
        disconnectedAtMs: null,
        tokenExpiresAtMs: claims.expiresAtMs,
      };
      const events: NewRoomEvent[] = [...out.events];
      const domain: DomainRecord[] = [];
      if (previous) {
        // The replaced session's tracks stop first, as for any leave.
        for (const t of (room.tracks ?? []).filter((x) => x.sid === previous.sid)) {
          events.push({ type: 'media.stopped', data: { track: trackInfo(t), reason: 'LEFT' } });
        }
        room.tracks = (room.tracks ?? []).filter((x) => x.sid !== previous.sid);
        const data = { participant: participantInfo(previous), reason: 'DUPLICATE_IDENTITY' };
        events.push({ type: 'participant.left', data });
        domain.push({ type: 'participant.left', data });
      }
      if (room.startedAtMs === null) {
        room.startedAtMs = now;
        domain.push({ type: 'room.started', data: {} });
      }
      room.participants = [...others, participant];
      room.emptySinceMs = null;
      const roles: HookOutput = { events: [], after: [] };
      this.controller.joined(room, participant, claims, roles, this);
      after.push(...roles.after);
      const joined = { participant: participantInfo(participant) };
      events.push({ type: 'participant.joined', data: joined }, ...roles.events);
      domain.push({ type: 'participant.joined', data: joined });
      const { lastSeq } = await this.finish(tx, room, events, domain);
      // The snapshot's seq is known once the join's events are appended (messages append without
      // the lock, so it cannot be predicted); a second write under the same lock records it.
      participant.joinSeq = lastSeq;
      await tx.commit(room, [], this.dueAt(room));
      this.scheduleSync(room.rid);
      const controller = await this.controller.snapshot(room, claims.userId, lastSeq);
      return {
        kind: 'joined',
        sid: participant.sid,
        lastSeq,
        snapshot: {
          sessionId: participant.sid,
          resumeToken,
          room: roomInfoFromLive(room),
          self: participantInfo(participant),
          participants: room.participants.map(participantInfo),
          departureGraceMs: this.cfg.departureGraceMs,
          controller,
          media: this.mediaSnapshot(room, claims),
        },
      };
    });
    await this.runAfter(claims.rid, after);
    return result;
  }

  /**
   * Restores a session within its grace period; nobody else is told. Fails when the session is
   * gone, the token is wrong, or `lastSeq` is below the session's join seq, beyond the room's
   * last seq, or older than the replay buffer.
   */
  async resume(
    claims: RoomClaims,
    data: { sessionId: string; resumeToken: string; lastSeq: number },
    nodeId: string,
    connId: string,
  ): Promise<ResumeResult> {
    return this.store.withLock(claims.rid, async (tx): Promise<ResumeResult> => {
      const room = await tx.load();
      const p = room?.participants.find((x) => x.sid === data.sessionId);
      if (!room || !p || p.userId !== claims.userId) return { kind: 'failed' };
      if (p.resumeTokenHash !== sha256(data.resumeToken)) return { kind: 'failed' };
      // Events at or before the join seq happened before the session existed: a lastSeq below it
      // is forged or corrupt, never a client's real position.
      if (p.joinSeq === undefined || data.lastSeq < p.joinSeq) return { kind: 'failed' };
      if ((await this.store.readAfter(claims.rid, data.lastSeq)) === null)
        return { kind: 'failed' };
      const replaced =
        p.connected && p.connId !== connId ? { nodeId: p.nodeId, connId: p.connId } : null;
      Object.assign(p, { connected: true, disconnectedAtMs: null, nodeId, connId });
      // Tracks published through another node stop (MOVED): that node held their engine
      // handles, and it may be gone. The client publishes them again through this node.
      const moved = (room.tracks ?? []).filter((t) => t.sid === p.sid && t.nodeId !== nodeId);
      room.tracks = (room.tracks ?? []).filter((t) => !moved.includes(t));
      const { lastSeq } = await tx.commit(
        room,
        moved.map((t) => ({
          type: 'media.stopped',
          data: { track: trackInfo(t), reason: 'MOVED' },
        })),
        this.dueAt(room),
      );
      const replay = (await this.store.readAfter(claims.rid, data.lastSeq)) ?? [];
      return { kind: 'resumed', sid: p.sid, replay, lastSeq, replaced };
    });
  }

  /**
   * Removes a participant now (session.leave, protocol violation). With `connId`, only while that
   * socket holds the session: a socket whose session resumed elsewhere changes nothing.
   */
  async leave(rid: string, sid: string, reason: LeaveReason, connId?: string) {
    await this.store
      .withLock(rid, async (tx) => {
        const room = await tx.load();
        const p = room?.participants.find((x) => x.sid === sid);
        if (!room || !p || (connId !== undefined && p.connId !== connId)) return [];
        return this.removeParticipants(tx, room, [p], reason);
      })
      .then((after) => this.runAfter(rid, after));
  }

  private async removeParticipants(
    tx: RoomTx,
    room: LiveRoom,
    leaving: LiveParticipant[],
    reason: LeaveReason,
    before: HookOutput = { events: [], after: [] },
  ) {
    const out: HookOutput = { events: [...before.events], after: [...before.after] };
    const records = this.removeFromRoom(room, leaving, reason, {}, out);
    await this.finish(tx, room, out.events, records);
    this.scheduleSync(room.rid);
    return out.after;
  }

  /**
   * Takes participants out of the room state: their participant.left events, then the
   * controller's consequences (hands, typing, host succession…), appended to `out`.
   */
  private removeFromRoom(
    room: LiveRoom,
    leaving: LiveParticipant[],
    reason: LeaveReason,
    extra: Record<string, unknown>,
    out: HookOutput,
  ): DomainRecord[] {
    room.participants = room.participants.filter((p) => !leaving.includes(p));
    if (room.participants.length === 0) room.emptySinceMs = this.now;
    // A leaving participant's tracks stop first, so nobody sees a track of someone who left.
    const sids = new Set(leaving.map((p) => p.sid));
    const stopped = (room.tracks ?? []).filter((t) => sids.has(t.sid));
    room.tracks = (room.tracks ?? []).filter((t) => !sids.has(t.sid));
    const records = leaving.map((p) => ({
      type: 'participant.left' as const,
      data: { participant: participantInfo(p), reason, ...extra },
    }));
    out.events.push(
      ...stopped.map((t) => ({
        type: 'media.stopped',
        data: { track: trackInfo(t), reason: 'LEFT' },
      })),
      ...records,
    );
    this.controller.left(room, leaving, out, this);
    return records;
  }

  /** The socket dropped: keep the participant for the departure grace period. */
  async dropped(rid: string, sid: string, connId: string) {
    await this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      const p = room?.participants.find((x) => x.sid === sid);
      if (!room || !p || p.connId !== connId || !p.connected) return;
      p.connected = false;
      p.disconnectedAtMs = this.now;
      await tx.commit(room, [], this.dueAt(room));
    });
  }

  async sendMessage(
    rid: string,
    sid: string,
    userId: string,
    name: string,
    avatarUrl: string | undefined,
    message: string,
  ) {
    return this.store.appendIfMember(rid, sid, {
      type: 'message.received',
      data: {
        message,
        sender: { userId, name, ...(avatarUrl !== undefined ? { avatarUrl } : {}), sid },
        viaApi: false,
      },
    });
  }

  async sendApp(rid: string, sid: string, userId: string, type: string, payload: unknown) {
    return this.store.appendIfMember(rid, sid, { type, data: { from: { sid, userId }, payload } });
  }

  /** Hosts only; null when the sender is not a host (or not in the room). */
  async updateMetadata(rid: string, sid: string, metadata: string) {
    return this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      const p = room?.participants.find((x) => x.sid === sid);
      if (!room || !p?.isHost) return null;
      room.metadata = metadata;
      this.scheduleSync(room.rid);
      const { events } = await tx.commit(
        room,
        [{ type: 'room.metadata_changed', data: { metadata } }],
        this.dueAt(room),
      );
      return events[0]!.seq;
    });
  }

  // ---- Media commands (the media area calls these; the SFU work happens outside the lock) -----

  /** Adds a published track; null when the publisher is no longer in the room. */
  async addTrack(rid: string, track: LiveTrack) {
    return this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      if (!room?.participants.some((p) => p.sid === track.sid)) return null;
      room.tracks = [...(room.tracks ?? []), track];
      const { events } = await tx.commit(
        room,
        [{ type: 'media.started', data: { track: trackInfo(track) } }],
        this.dueAt(room),
      );
      return events[0]!.seq;
    });
  }

  /**
   * Removes tracks: those of `trackIds` (only the ones published by `ownerSid` when it is given)
   * with media.stopped `reason` each. Returns the removed tracks.
   */
  async removeTracks(
    rid: string,
    select: (t: LiveTrack) => boolean,
    reason: TrackStopReason,
  ): Promise<LiveTrack[]> {
    return this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      const removed = (room?.tracks ?? []).filter(select);
      if (!room || removed.length === 0) return [];
      room.tracks = (room.tracks ?? []).filter((t) => !removed.includes(t));
      await tx.commit(
        room,
        removed.map((t) => ({ type: 'media.stopped', data: { track: trackInfo(t), reason } })),
        this.dueAt(room),
      );
      return removed;
    });
  }

  /**
   * Sets a track's muted flag (media.muted, `by` = who). With `ownerSid`, only that participant's
   * own track qualifies. Null when there is no such track; the seq otherwise.
   */
  async setTrackMuted(
    rid: string,
    trackId: string,
    muted: boolean,
    by: string,
    ownerSid: string | null,
  ) {
    return this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      const track = room?.tracks?.find(
        (t) => t.trackId === trackId && (ownerSid === null || t.sid === ownerSid),
      );
      if (!room || !track) return null;
      track.muted = muted;
      const { events } = await tx.commit(
        room,
        [{ type: 'media.muted', data: { track: trackInfo(track), by } }],
        this.dueAt(room),
      );
      return { seq: events[0]!.seq, track: { ...track } };
    });
  }

  /**
   * The room's SFU instance: the placed one while `usable(it)`, else `candidate` (stored, so
   * every node routes the room there). Null when the room is gone.
   */
  async placeMedia(rid: string, usable: (engine: string) => boolean, candidate: string) {
    return this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      if (!room) return null;
      if (room.mediaEngine && usable(room.mediaEngine)) return room.mediaEngine;
      room.mediaEngine = candidate;
      await tx.commit(room, [], this.dueAt(room));
      return candidate;
    });
  }

  /** A track of the room, read without the lock. */
  async findTrack(rid: string, trackId: string) {
    const room = await this.store.peek(rid);
    return room?.tracks?.find((t) => t.trackId === trackId) ?? null;
  }

  /** Ends grace periods and empty rooms that are due. Safe to run on every node at once. */
  async sweep(limit = 100) {
    const due = await this.store.dueRooms(this.now, limit);
    for (const rid of due) {
      const after = await this.store.withLock(rid, async (tx): Promise<(() => Promise<void>)[]> => {
        const room = await tx.load();
        const now = this.now;
        if (!room) {
          await tx.commit(null, [], null);
          return [];
        }
        const out: HookOutput = { events: [], after: [] };
        this.controller.sweep(room, out, this);
        if (this.multiNode) {
          const nodes = [
            ...new Set(room.participants.filter((p) => p.connected).map((p) => p.nodeId)),
          ];
          const alive = await this.store.aliveNodes(nodes);
          for (const p of room.participants) {
            if (p.connected && !alive.has(p.nodeId)) {
              p.connected = false;
              p.disconnectedAtMs = now;
            }
          }
        }
        const gone = room.participants.filter(
          (p) =>
            !p.connected &&
            p.disconnectedAtMs !== null &&
            p.disconnectedAtMs + this.cfg.departureGraceMs <= now,
        );
        if (gone.length > 0) return this.removeParticipants(tx, room, gone, 'DISCONNECTED', out);
        if (
          room.participants.length === 0 &&
          room.emptySinceMs !== null &&
          room.emptySinceMs + this.cfg.emptyTimeoutMs <= now
        ) {
          await this.endRecord(rid, 'EMPTY_TIMEOUT');
          const domain: DomainRecord[] =
            room.startedAtMs !== null
              ? [{ type: 'room.ended', data: { reason: 'EMPTY_TIMEOUT' } }]
              : [];
          await this.finish(
            tx,
            room,
            [...out.events, { type: 'room.ended', data: { reason: 'ROOM_ENDED' } }],
            domain,
            true,
          );
          return out.after;
        }
        await tx.commit(room, out.events, this.dueAt(room));
        return out.after;
      });
      await this.runAfter(rid, after);
    }
    return due.length;
  }

  // ---- Room controller ------------------------------------------------------------------------

  /**
   * Runs a controller request for the token's user (`sid` null: not joined yet, allowed only for
   * the commands that may come before `session.join`). Locked commands check the sender's role,
   * change the room and commit their events in one step; direct ones append without the lock.
   */
  async command(
    claims: RoomClaims,
    sid: string | null,
    type: string,
    data: unknown,
  ): Promise<ControllerAnswer> {
    const entry = this.controller.lookup(type);
    if (!entry) return { error: 'unknown_message_type' };
    const { command } = entry;
    if (command.kind === 'direct') {
      if (sid === null) return { error: 'not_joined' };
      return command.run(this.controller.directContext(claims.rid, sid, claims), data as never);
    }
    const out: HookOutput = { events: [], after: [] };
    const answer = await this.store.withLock(claims.rid, async (tx): Promise<ControllerAnswer> => {
      const room = await tx.load();
      if (!room) return { error: 'room_not_found' };
      const actor = sid === null ? null : (room.participants.find((p) => p.sid === sid) ?? null);
      if (sid !== null && !actor) return { error: 'not_joined' };
      if (sid === null && !command.beforeJoin) return { error: 'not_joined' };
      const refused = this.controller.permission(
        command,
        controllerOf(room, this.cfg.controller),
        claims.userId,
      );
      if (refused) return { error: refused };
      let removed = false;
      const domain: DomainRecord[] = [];
      const ctx = this.controller.commandContext(
        room,
        claims,
        actor,
        out,
        this,
        (p, reason, extra) => {
          removed = true;
          domain.push(...this.removeFromRoom(room, [p], reason, extra, out));
        },
      );
      const result = await command.run(ctx, data as never);
      if (result.error || command.readOnly) return result;
      const { events } = await this.finish(tx, room, out.events, domain);
      if (removed) this.scheduleSync(room.rid);
      const last = events[events.length - 1];
      return last ? { ack: { ...result.ack, seq: last.seq } } : result;
    });
    if (!answer.error) await this.runAfter(claims.rid, out.after);
    return answer;
  }

  /** A waiting connection closed: its entry leaves the waiting room. */
  async waitingGone(rid: string, userId: string, connId: string) {
    await this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      if (!room) return;
      const out: HookOutput = { events: [], after: [] };
      if (this.controller.waitingGone(room, userId, connId, out)) {
        await tx.commit(room, out.events, this.dueAt(room));
      }
    });
  }

  /** Records this node's measurements of its participants' network quality; sends the changes. */
  async reportQuality(
    rid: string,
    scores: { userId: string; quality: number; rttMs: number | null }[],
  ) {
    await this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      if (!room) return;
      const ctl = controllerOf(room, this.cfg.controller);
      const present = new Set(room.participants.map((p) => p.userId));
      const changed = scores.filter((s) => {
        if (!present.has(s.userId)) return false;
        const known = ctl.quality.find((q) => q.userId === s.userId);
        if (known?.quality === s.quality) {
          known.rttMs = s.rttMs;
          return false;
        }
        if (known) Object.assign(known, s);
        else ctl.quality.push({ ...s });
        return true;
      });
      if (changed.length === 0) return;
      await tx.commit(
        room,
        [{ type: 'network.quality', data: { scores: changed } }],
        this.dueAt(room),
      );
    });
  }

  async openBreakout(
    main: LiveRoom,
    roomName: string,
    breakoutId: string,
    allowed: string[],
    admins: string[],
  ) {
    const row = await this.openRoom(
      main.projectId,
      { roomName, liveType: main.liveType, maxParticipants: main.maxParticipants },
      false,
    );
    await this.setBreakoutAllowed(row.room_id, allowed, admins, {
      roomName: main.roomName,
      rid: main.rid,
      breakoutId,
    });
    return row.room_id;
  }

  async setBreakoutAllowed(
    rid: string,
    allowed: string[],
    admins: string[],
    link?: { roomName: string; rid: string; breakoutId: string },
  ) {
    await this.store.withLock(rid, async (tx) => {
      const room = await tx.load();
      if (!room) return;
      const ctl = controllerOf(room, this.cfg.controller);
      const base = link ?? ctl.breakoutOf;
      if (!base) return;
      const previousAdmins = ctl.breakoutOf?.admins ?? [];
      ctl.breakoutOf = { ...base, allowed, admins };
      const out: HookOutput = { events: [], after: [] };
      this.controller.breakoutAccessChanged(room, previousAdmins, out);
      await tx.commit(room, out.events, this.dueAt(room));
    });
  }

  async syncBreakouts(mainRid: string) {
    await this.store.withLock(mainRid, async (tx) => {
      const room = await tx.load();
      const ctl = room?.controller;
      if (!room || !ctl || ctl.breakouts.length === 0) return;
      await pushBreakoutAccess(this, breakoutAccess(ctl));
      await tx.commit(room, [], this.dueAt(room));
    });
  }

  async forgetClosedBreakout(mainRid: string, roomName: string) {
    await this.store.withLock(mainRid, async (tx) => {
      const room = await tx.load();
      const ctl = room?.controller;
      if (!room || !ctl?.closed?.some((c) => c.roomName === roomName)) return;
      ctl.closed = ctl.closed.filter((c) => c.roomName !== roomName);
      await tx.commit(room, [], this.dueAt(room));
    });
  }

  async appendEvent(rid: string, type: string, data: unknown) {
    await this.store.appendIfMember(rid, null, { type, data });
  }

  /**
   * Runs the work a commit left for after its lock (an SFU mute, a webhook, another room's event).
   * The commit stands whatever happens here, so a failure is logged and does not stop the others.
   */
  private async runAfter(rid: string, after: (() => Promise<void>)[]) {
    for (const fn of after) {
      await fn().catch((err: unknown) =>
        this.log.warn({ err, roomId: rid }, 'realtime: a step after a room commit failed'),
      );
    }
  }
}

import { type Static, Type } from '@sinclair/typebox';
import { PageMeta, PageQuery, Timestamp } from './common.ts';
import {
  MEDIA_REQUEST_TYPES,
  type MediaEndedFrameData,
  type MediaEventData,
  MediaSnapshotSchema,
  type MediaTrickleFrameData,
} from './media.ts';

/**
 * The Realtime wire contract: REST bodies (API.md, Realtime) and the signaling channel
 * (docs/realtime-protocol.md). Shared by the server and the client libraries.
 */

// ---------------------------------------------------------------------------------------------
// REST
// ---------------------------------------------------------------------------------------------

export const LIVE_TYPES = [
  'VIDEO_CALL',
  'VIDEO_CONFERENCE',
  'LIVE_STREAMING',
  'AUDIO_CONFERENCE',
] as const;
export type SvcLiveType = (typeof LIVE_TYPES)[number];
export const LiveTypeSchema = Type.Union(LIVE_TYPES.map((t) => Type.Literal(t)));

export const ROOM_STATUSES = ['IDLE', 'ACTIVE', 'ENDED'] as const;
export type SvcRoomStatus = (typeof ROOM_STATUSES)[number];
export const RoomStatusSchema = Type.Union(ROOM_STATUSES.map((s) => Type.Literal(s)));

/** 1–128 characters of `[A-Za-z0-9._:-]`. */
export const ROOM_NAME_PATTERN = '^[A-Za-z0-9._:-]{1,128}$';
export const RoomNameSchema = Type.String({
  pattern: ROOM_NAME_PATTERN,
  minLength: 1,
  maxLength: 128,
});

/** A user id: 1–128 characters, no control characters. */
export const UserIdSchema = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[^\\u0000-\\u001f\\u007f]+$',
});

/** Room metadata: opaque text set by the app (JSON is common), at most 16 KiB. */
export const MAX_METADATA_LENGTH = 16_384;
export const MetadataSchema = Type.String({ maxLength: MAX_METADATA_LENGTH });

/** A realtime message's text: at most 16 KiB (LiveKit keeps reliable data at 15 KiB). */
export const MAX_MESSAGE_LENGTH = 16_384;
export const MessageTextSchema = Type.String({ minLength: 1, maxLength: MAX_MESSAGE_LENGTH });

/** Upper bound for `maxParticipants`. */
export const MAX_PARTICIPANTS_LIMIT = 10_000;

/** A user as the app describes it: who sends a message, who joins a room. */
export const SvcUserSchema = Type.Object(
  {
    userId: UserIdSchema,
    name: Type.String({ minLength: 1, maxLength: 256 }),
    avatarUrl: Type.Optional(Type.String({ maxLength: 2048 })),
  },
  { additionalProperties: false },
);
export type SvcUser = Static<typeof SvcUserSchema>;

/** The participant part of SvcRoomOptions: a user plus the host flag. */
export const SvcParticipantOptionsSchema = Type.Object(
  {
    userId: UserIdSchema,
    name: Type.String({ minLength: 1, maxLength: 256 }),
    avatarUrl: Type.Optional(Type.String({ maxLength: 2048 })),
    /** A host admits waiting participants (see `canJoinWithNoHost`). Default false. */
    isHost: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SvcParticipantOptions = Static<typeof SvcParticipantOptionsSchema>;

/** `POST /realtime/token` body (the Android library's SvcRoomOptions). */
export const SvcRoomOptionsSchema = Type.Object(
  {
    roomName: RoomNameSchema,
    participant: SvcParticipantOptionsSchema,
    /** The room's type; required when this request creates the room, ignored otherwise. */
    liveType: Type.Optional(LiveTypeSchema),
    /** When false, this participant waits until a host is present. Default true. */
    canJoinWithNoHost: Type.Optional(Type.Boolean()),
    /** Metadata for the room when this request creates it; ignored if the room exists. */
    roomMetadata: Type.Optional(MetadataSchema),
    /**
     * When false, this participant may not publish media (the room's liveType may narrow it
     * further: AUDIO_CONFERENCE publishes audio only, LIVE_STREAMING only hosts). Default true.
     */
    canPublish: Type.Optional(Type.Boolean()),
    /** When false, this participant may not subscribe to others' media. Default true. */
    canSubscribe: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SvcRoomOptions = Static<typeof SvcRoomOptionsSchema>;

/** `POST /realtime/rooms` body (SvcCreateRoomOptions). */
export const SvcCreateRoomOptionsSchema = Type.Object(
  {
    roomName: RoomNameSchema,
    liveType: LiveTypeSchema,
    /** Default: the server's SVC_REALTIME_DEFAULT_MAX_PARTICIPANTS (1000). */
    maxParticipants: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PARTICIPANTS_LIMIT })),
    metadata: Type.Optional(MetadataSchema),
  },
  { additionalProperties: false },
);
export type SvcCreateRoomOptions = Static<typeof SvcCreateRoomOptionsSchema>;

/** A room as REST returns it. */
export const SvcRoomInfoSchema = Type.Object(
  {
    roomName: Type.String(),
    liveType: LiveTypeSchema,
    status: RoomStatusSchema,
    maxParticipants: Type.Integer(),
    numParticipants: Type.Integer(),
    canJoinWithNoHost: Type.Boolean(),
    metadata: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp,
    endedAt: Type.Optional(Timestamp),
  },
  { $id: 'RealtimeRoomInfo' },
);
export type SvcRoomInfo = Static<typeof SvcRoomInfoSchema>;

/** A participant in a room (REST and the signaling channel). */
export const SvcParticipantInfoSchema = Type.Object(
  {
    /** This participant session's public id (`PA_…`); a rejoin gets a new one. */
    sid: Type.String(),
    userId: Type.String(),
    name: Type.String(),
    avatarUrl: Type.Optional(Type.String()),
    isHost: Type.Boolean(),
    joinedAt: Timestamp,
    /** False while the socket is gone but the departure grace period has not ended. */
    connected: Type.Boolean(),
  },
  { $id: 'RealtimeParticipantInfo' },
);
export type SvcParticipantInfo = Static<typeof SvcParticipantInfoSchema>;

export const ListRoomsQuerySchema = Type.Object(
  { status: Type.Optional(RoomStatusSchema), ...PageQuery },
  { additionalProperties: false },
);
export type ListRoomsQuery = Static<typeof ListRoomsQuerySchema>;

export const RoomListSchema = Type.Object({
  items: Type.Array(SvcRoomInfoSchema),
  meta: PageMeta,
});
export type SvcRoomList = Static<typeof RoomListSchema>;

export const ParticipantListSchema = Type.Object({ items: Type.Array(SvcParticipantInfoSchema) });
export type SvcParticipantList = Static<typeof ParticipantListSchema>;

/** `POST /realtime/token` answer. `wsUrl` is complete: open it as is. */
export const SvcTokenResponseSchema = Type.Object({
  token: Type.String(),
  roomName: Type.String(),
  userId: Type.String(),
  /** `ws(s)://PUBLIC/v1/realtime/ws?room=<roomName>&access_token=<token>` */
  wsUrl: Type.String(),
  expiresAt: Timestamp,
});
export type SvcTokenResponse = Static<typeof SvcTokenResponseSchema>;

/** `POST /realtime/rooms/{roomName}/messages` body (SvcRealtimeMessage minus the room). */
export const SendMessageBodySchema = Type.Object(
  { message: MessageTextSchema, sender: SvcUserSchema },
  { additionalProperties: false },
);
export type SendMessageBody = Static<typeof SendMessageBodySchema>;

/** 202 answer of the messages route: the message's place in the room's order. */
export const SendMessageResultSchema = Type.Object({ seq: Type.Integer() });

export const RoomNameParamsSchema = Type.Object({ roomName: RoomNameSchema });

// ---------------------------------------------------------------------------------------------
// Access token claims (JWT, ES256, audience `svc:realtime`, `sub` = userId)
// ---------------------------------------------------------------------------------------------

export const REALTIME_TOKEN_AUDIENCE = 'svc:realtime';

/** Private claims of a realtime access token (besides iss, aud, sub, iat, exp, jti). */
export interface RealtimeTokenClaims {
  /** Project id. */
  pid: string;
  /** Room name. */
  room: string;
  /** The room instance id (`rm_…`); a room ended and reopened under the same name has a new one. */
  rid: string;
  name: string;
  avatarUrl?: string;
  host: boolean;
  canJoinWithNoHost: boolean;
  /** Absent means true (tokens issued before media existed). */
  canPublish?: boolean;
  /** Absent means true. */
  canSubscribe?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Signaling channel
// ---------------------------------------------------------------------------------------------

/** The largest WebSocket frame a client may send; a larger one closes with 1009. */
export const MAX_FRAME_BYTES = 65_536;

/** Why a participant left (participant.left `reason`, session.closed `reason`). */
export const LEAVE_REASONS = [
  /** The client sent session.leave (or closed with 1000 after joining). */
  'LEFT',
  /** The socket dropped and did not come back within the departure grace period. */
  'DISCONNECTED',
  /** Another connection with the same userId joined and replaced this one. */
  'DUPLICATE_IDENTITY',
  /** The room was deleted (DELETE /realtime/rooms/{roomName}). */
  'ROOM_DELETED',
  /** The room ended (empty timeout). */
  'ROOM_ENDED',
  /** Removed by a host or co-host (`participant.kick`); the user id is banned from the room. */
  'KICKED',
  /** The access token expired before a waiting participant was admitted. */
  'TOKEN_EXPIRED',
  /** The connection broke the protocol (flood, oversized frames…). */
  'PROTOCOL_VIOLATION',
  /** The server is shutting down. */
  'SERVER_SHUTDOWN',
  /** A host or co-host declined a participant in the waiting room. */
  'WAITING_REJECTED',
  /** Nobody admitted a participant from the waiting room in time. */
  'WAITING_TIMEOUT',
] as const;
export type LeaveReason = (typeof LEAVE_REASONS)[number];

/**
 * WebSocket close codes. A server that refuses or ends a session first sends a `session.closed`
 * frame (or an `error` frame for a refused handshake) naming the registry code, then closes.
 */
export const CLOSE_CODES = {
  /** The client left (session.leave) or the server ended the session normally. */
  NORMAL: 1000,
  /** The server is shutting down; reconnect (to another node). */
  GOING_AWAY: 1001,
  /** A frame larger than MAX_FRAME_BYTES (sent by the WebSocket layer; no error frame). */
  MESSAGE_TOO_BIG: 1009,
  /** An unexpected server failure; reconnect with backoff. */
  INTERNAL_ERROR: 1011,
  /**
   * `access_token` missing, malformed, badly signed, for another audience, or its project is gone
   * (`token_invalid`) or has disabled Realtime (`product_not_enabled`). Do not retry.
   */
  TOKEN_INVALID: 4001,
  /** The access token expired (at connect, or while waiting for a host). Get a new token. */
  TOKEN_EXPIRED: 4002,
  /** The token names another room than the `room` query parameter. */
  TOKEN_ROOM_MISMATCH: 4003,
  /** The room does not exist or has ended since the token was issued. Get a new token. */
  ROOM_NOT_FOUND: 4004,
  /** The room is at maxParticipants. */
  ROOM_FULL: 4005,
  /** Another connection with the same userId replaced this one. Do not reconnect automatically. */
  DUPLICATE_IDENTITY: 4006,
  /** The room was deleted. */
  ROOM_DELETED: 4007,
  /** Removed from the room by a host or co-host (`kicked`), or refused as banned (`banned`). */
  KICKED: 4008,
  /** The room ended (empty timeout) while this connection was waiting. */
  ROOM_ENDED: 4009,
  /**
   * No session.join / session.resume within the handshake timeout, no pong to pings, or a reader
   * so slow that over 4 MiB waits unsent. A drop: reconnect and resume.
   */
  TIMEOUT: 4010,
  /** A host or co-host declined this connection in the waiting room. */
  WAITING_REJECTED: 4011,
  /** Nobody admitted this connection from the waiting room in time. */
  WAITING_TIMEOUT: 4012,
  /** Repeated protocol violations (invalid frames beyond the allowance). */
  PROTOCOL_VIOLATION: 4400,
  /** The connection kept sending after being rate limited. */
  FLOOD: 4429,
} as const;
export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];

/** The namespace of application-defined messages: `app.` then 1–64 of `[a-z0-9_.-]`. */
export const APP_TYPE_PATTERN = '^app\\.[a-z0-9_.-]{1,64}$';
export const APP_TYPE_REGEX = new RegExp(APP_TYPE_PATTERN);

// ---- Client → server requests: {id, type, data} -------------------------------------------------

/** A request id chosen by the client: 1–64 characters, echoed in the ack or error. */
export const RequestIdSchema = Type.String({ minLength: 1, maxLength: 64 });

/** Every client frame: `{id, type, data}`. `data` defaults to `{}`. */
export const ClientFrameSchema = Type.Object({
  id: RequestIdSchema,
  type: Type.String({ minLength: 1, maxLength: 80 }),
  data: Type.Optional(Type.Unknown()),
});
export type ClientFrame = Static<typeof ClientFrameSchema>;

/** `session.join` data: nothing needed; the token says who and where. */
export const SessionJoinDataSchema = Type.Object({}, { additionalProperties: false });

/** `session.resume` data: the session to restore and the last room seq the client applied. */
export const SessionResumeDataSchema = Type.Object(
  {
    sessionId: Type.String({ minLength: 1, maxLength: 64 }),
    resumeToken: Type.String({ minLength: 1, maxLength: 128 }),
    lastSeq: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
export type SessionResumeData = Static<typeof SessionResumeDataSchema>;

/** `session.leave` data. */
export const SessionLeaveDataSchema = Type.Object({}, { additionalProperties: false });

/** `message.send` data. `roomName`, when given, must be the token's room. */
export const MessageSendDataSchema = Type.Object(
  { message: MessageTextSchema, roomName: Type.Optional(Type.String({ maxLength: 128 })) },
  { additionalProperties: false },
);
export type MessageSendData = Static<typeof MessageSendDataSchema>;

/** `room.update_metadata` data (hosts only). */
export const RoomUpdateMetadataDataSchema = Type.Object(
  { metadata: MetadataSchema },
  { additionalProperties: false },
);

/** `ping` data: anything small; echoed in the pong. */
export const PingDataSchema = Type.Object({}, { additionalProperties: true });

/** `app.*` data: any JSON value; broadcast to the room as is. */

export const CLIENT_REQUEST_TYPES = [
  'session.join',
  'session.resume',
  'session.leave',
  'message.send',
  'room.update_metadata',
  'ping',
  ...MEDIA_REQUEST_TYPES,
] as const;
export type ClientRequestType = (typeof CLIENT_REQUEST_TYPES)[number] | `app.${string}`;

// ---- Server → client frames ---------------------------------------------------------------------

/** The answer to a request that succeeded. */
export interface AckFrame {
  type: 'ack';
  id: string;
  data?: Record<string, unknown>;
}

/** The answer to a request that failed, or (without `id`) a frame the server could not read. */
export interface ErrorFrame {
  type: 'error';
  id?: string;
  /** A registry code (packages/protocol/src/errors). */
  code: string;
  message: string;
}

/** `pong` answers `ping` with the request id. */
export interface PongFrame {
  type: 'pong';
  id: string;
  ts: number;
}

/**
 * A room event: `seq` is the room's sequence number (1, 2, 3… without gaps for the room; every
 * participant sees the same order), `ts` the server time in ms since the epoch.
 */
export interface RoomEventFrame<T extends string = string, D = unknown> {
  type: T;
  seq: number;
  ts: number;
  data: D;
}

/**
 * A session frame: about this connection only. `seq` is the room's last seq at the time
 * (events with a larger seq follow).
 */
export interface SessionFrame<T extends string = string, D = unknown> {
  type: T;
  seq: number;
  ts: number;
  data: D;
}

export const RoomSnapshotSchema = Type.Object({
  /** This participant session's id (`sid`), for session.resume. */
  sessionId: Type.String(),
  /** A secret for session.resume; keep it in memory only. */
  resumeToken: Type.String(),
  room: SvcRoomInfoSchema,
  self: SvcParticipantInfoSchema,
  /** Everyone in the room, self included. */
  participants: Type.Array(SvcParticipantInfoSchema),
  /** The departure grace period: resume within it to keep the session. */
  departureGraceMs: Type.Integer(),
  /** The room controller's state (ControllerSnapshot in controller.ts). */
  controller: Type.Optional(Type.Unknown()),
  /** Media: engine availability, ICE servers, this participant's permissions, the room's tracks. */
  media: MediaSnapshotSchema,
});
export type RoomSnapshot = Static<typeof RoomSnapshotSchema>;

/** Session frames' `data`. */
export interface SessionFrameData {
  /** The snapshot after session.join (or after admission from waiting). */
  'session.joined': RoomSnapshot;
  /** After session.resume succeeded; the missed room events (seq > lastSeq) follow. */
  'session.resumed': { sessionId: string; replayed: number; subscriptions?: string[] };
  /** No host is present and the token does not allow joining without one. */
  'session.waiting': { reason: 'NO_HOST' | 'APPROVAL' };
  /** A host arrived; `session.joined` follows at once. */
  'session.admitted': Record<string, never>;
  /** The server ends this session; a close with `closeCode` follows. */
  'session.closed': { reason: LeaveReason; code: string; closeCode: number; message?: string };
  /** A server-side ICE candidate for one of this client's PeerConnections (media.ts). */
  'media.trickle': MediaTrickleFrameData;
  /** The server's side of one of this client's subscriptions hung up (media.ts). */
  'media.ended': MediaEndedFrameData;
}

/** Room events' `data` (media events: media.ts). */
export interface RoomEventData extends MediaEventData {
  'participant.joined': { participant: SvcParticipantInfo };
  'participant.left': { participant: SvcParticipantInfo; reason: LeaveReason };
  /** `sender` is the participant (socket) or the user named by the REST call (`viaApi: true`). */
  'message.received': { message: string; sender: SvcUser & { sid?: string }; viaApi: boolean };
  'room.metadata_changed': { metadata: string | null };
  /** The room was deleted; every session is closed with ROOM_DELETED right after. */
  'room.deleted': { reason: 'ROOM_DELETED' };
  /**
   * The room ended after its empty timeout. Only waiting connections can see it (nobody is in
   * the room); they get session.closed ROOM_ENDED and close 4009 right after.
   */
  'room.ended': { reason: 'ROOM_ENDED' };
}

/** Application-defined events: `app.*` with the sender and the payload as sent. */
export interface AppEventData {
  from: { sid: string; userId: string };
  payload: unknown;
}

export type RoomEventType = keyof RoomEventData;
export const ROOM_EVENT_TYPES: RoomEventType[] = [
  'participant.joined',
  'participant.left',
  'message.received',
  'room.metadata_changed',
  'room.deleted',
  'room.ended',
  'media.started',
  'media.stopped',
  'media.muted',
];
export type SessionFrameType = keyof SessionFrameData;

import { type TSchema, Type } from '@sinclair/typebox';
import {
  IceCandidateSchema,
  MediaAnswerDataSchema,
  MediaMuteDataSchema,
  MediaPublishDataSchema,
  MediaSubscribeDataSchema,
  MediaTrickleDataSchema,
  MediaUnpublishDataSchema,
  MediaUnsubscribeDataSchema,
  SvcTrackInfoSchema,
  TRACK_STOP_REASONS,
} from './media.ts';
import {
  ClientFrameSchema,
  LEAVE_REASONS,
  MessageSendDataSchema,
  ParticipantListSchema,
  PingDataSchema,
  RequestIdSchema,
  RoomListSchema,
  RoomSnapshotSchema,
  RoomUpdateMetadataDataSchema,
  SendMessageBodySchema,
  SendMessageResultSchema,
  SessionJoinDataSchema,
  SessionLeaveDataSchema,
  SessionResumeDataSchema,
  SvcCreateRoomOptionsSchema,
  SvcParticipantInfoSchema,
  SvcRoomInfoSchema,
  SvcRoomOptionsSchema,
  SvcTokenResponseSchema,
  SvcUserSchema,
} from './realtime.ts';

/**
 * Schemas of every signaling frame the server sends (the interfaces of realtime.ts as TypeBox
 * schemas), and the registry of schemas the conformance vectors (`packages/protocol/vectors`) name.
 * Every client library must parse each valid vector and write it back identically, and refuse each
 * invalid one.
 */

const LeaveReasonSchema = Type.Union(LEAVE_REASONS.map((r) => Type.Literal(r)));

/** `{type, seq, ts, data}`: a room event or a session frame. */
const eventFrame = <T extends string>(type: T, data: TSchema) =>
  Type.Object({
    type: Type.Literal(type),
    seq: Type.Integer({ minimum: 0 }),
    ts: Type.Integer({ minimum: 0 }),
    data,
  });

/** The server frames by `type` (`app.*` frames share one schema). */
export const SERVER_FRAME_SCHEMAS = {
  ack: Type.Object({
    type: Type.Literal('ack'),
    id: RequestIdSchema,
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
  error: Type.Object({
    type: Type.Literal('error'),
    id: Type.Optional(RequestIdSchema),
    code: Type.String({ minLength: 1 }),
    message: Type.String(),
  }),
  pong: Type.Object({ type: Type.Literal('pong'), id: RequestIdSchema, ts: Type.Integer() }),
  'session.joined': eventFrame('session.joined', RoomSnapshotSchema),
  'session.resumed': eventFrame(
    'session.resumed',
    Type.Object({
      sessionId: Type.String(),
      replayed: Type.Integer({ minimum: 0 }),
      /** The media subscriptions the server still holds for the session (see the protocol doc). */
      subscriptions: Type.Optional(Type.Array(Type.String())),
    }),
  ),
  'session.waiting': eventFrame(
    'session.waiting',
    Type.Object({ reason: Type.Literal('NO_HOST') }),
  ),
  'session.admitted': eventFrame('session.admitted', Type.Object({})),
  'session.closed': eventFrame(
    'session.closed',
    Type.Object({ reason: LeaveReasonSchema, code: Type.String(), closeCode: Type.Integer() }),
  ),
  'participant.joined': eventFrame(
    'participant.joined',
    Type.Object({ participant: SvcParticipantInfoSchema }),
  ),
  'participant.left': eventFrame(
    'participant.left',
    Type.Object({ participant: SvcParticipantInfoSchema, reason: LeaveReasonSchema }),
  ),
  'message.received': eventFrame(
    'message.received',
    Type.Object({
      message: Type.String(),
      sender: Type.Object({
        userId: Type.String(),
        name: Type.String(),
        avatarUrl: Type.Optional(Type.String()),
        sid: Type.Optional(Type.String()),
      }),
      viaApi: Type.Boolean(),
    }),
  ),
  'room.metadata_changed': eventFrame(
    'room.metadata_changed',
    Type.Object({ metadata: Type.Union([Type.String(), Type.Null()]) }),
  ),
  'room.deleted': eventFrame('room.deleted', Type.Object({ reason: Type.Literal('ROOM_DELETED') })),
  'room.ended': eventFrame('room.ended', Type.Object({ reason: Type.Literal('ROOM_ENDED') })),
  'media.started': eventFrame('media.started', Type.Object({ track: SvcTrackInfoSchema })),
  'media.stopped': eventFrame(
    'media.stopped',
    Type.Object({
      track: SvcTrackInfoSchema,
      reason: Type.Union(TRACK_STOP_REASONS.map((r) => Type.Literal(r))),
    }),
  ),
  'media.muted': eventFrame(
    'media.muted',
    Type.Object({ track: SvcTrackInfoSchema, by: Type.String() }),
  ),
  'media.trickle': eventFrame(
    'media.trickle',
    Type.Object({ id: Type.String(), candidate: Type.Union([IceCandidateSchema, Type.Null()]) }),
  ),
  'media.ended': eventFrame(
    'media.ended',
    Type.Object({ id: Type.String(), trackId: Type.String() }),
  ),
  'app.*': Type.Object({
    type: Type.String({ pattern: '^app\\.[a-z0-9_.-]{1,64}$' }),
    seq: Type.Integer({ minimum: 0 }),
    ts: Type.Integer({ minimum: 0 }),
    data: Type.Object({
      from: Type.Object({ sid: Type.String(), userId: Type.String() }),
      payload: Type.Unknown(),
    }),
  }),
} as const;

/** The `data` schema of each client request type (`app.*` data is any JSON value). */
export const CLIENT_DATA_SCHEMAS: Record<string, TSchema> = {
  'session.join': SessionJoinDataSchema,
  'session.resume': SessionResumeDataSchema,
  'session.leave': SessionLeaveDataSchema,
  'message.send': MessageSendDataSchema,
  'room.update_metadata': RoomUpdateMetadataDataSchema,
  ping: PingDataSchema,
  'media.publish': MediaPublishDataSchema,
  'media.unpublish': MediaUnpublishDataSchema,
  'media.mute': MediaMuteDataSchema,
  'media.subscribe': MediaSubscribeDataSchema,
  'media.answer': MediaAnswerDataSchema,
  'media.unsubscribe': MediaUnsubscribeDataSchema,
  'media.trickle': MediaTrickleDataSchema,
};

/** The REST bodies the vectors name, by the name they use. */
export const REST_SCHEMAS: Record<string, TSchema> = {
  SvcUser: SvcUserSchema,
  SvcRoomOptions: SvcRoomOptionsSchema,
  SvcCreateRoomOptions: SvcCreateRoomOptionsSchema,
  SvcRoomInfo: SvcRoomInfoSchema,
  SvcParticipantInfo: SvcParticipantInfoSchema,
  SvcRoomList: RoomListSchema,
  SvcParticipantList: ParticipantListSchema,
  SvcTokenResponse: SvcTokenResponseSchema,
  SendMessageBody: SendMessageBodySchema,
  SendMessageResult: SendMessageResultSchema,
};

export { ClientFrameSchema };

import type {
  LeaveReason,
  SvcCreateRoomOptions as ProtocolCreateRoomOptions,
  SvcLiveType as ProtocolLiveType,
  SvcParticipantOptions as ProtocolParticipantOptions,
  SvcRecordingDownloadUrl as ProtocolRecordingDownloadUrl,
  SvcRecordingInfo as ProtocolRecordingInfo,
  SvcRecordingPage as ProtocolRecordingPage,
  SvcRoomInfo as ProtocolRoomInfo,
  SvcRoomOptions as ProtocolRoomOptions,
  SvcRoomStatus as ProtocolRoomStatus,
  SvcStartRecordingOptions as ProtocolStartRecordingOptions,
  SvcTokenResponse as ProtocolTokenResponse,
  SvcUser as ProtocolUser,
  RoomEventData,
  SendMessageBody,
  SvcParticipantInfo,
  SvcRoomList,
} from '@svc/protocol';

/*
 * The library's public types, named as in the Android library. Wire types are aliases of
 * packages/protocol (the one contract), never redefined here.
 */

/** How the client reaches the server. */
export interface SvcConfig {
  /** The project id (sent as `X-Project-Id`). */
  projectId: string;
  /**
   * A client key (`svc_pk_…`, with the `realtime` scope) in apps; a server key (`svc_sk_…`) only
   * in trusted backends. Sent as `Authorization: Bearer`.
   */
  apiKey: string;
  /**
   * The server's base address, e.g. `https://svc.example.com` or `https://svc.example.com/v1`
   * (a trailing `/v1` is optional; requests always go to `<base>/v1/…`).
   */
  baseUrl: string;
  /** The app's package name or bundle id, sent as `X-Bundle-Id` (mobile and desktop apps). */
  bundleId?: string;
}

export type SvcUser = ProtocolUser;
export type SvcLiveType = ProtocolLiveType;
export type SvcRoomStatus = ProtocolRoomStatus;
export type SvcRoomInfo = ProtocolRoomInfo;
/** `connect()` / `getToken()` options: room, participant (user + `isHost`), live type. */
export type SvcRoomOptions = ProtocolRoomOptions;
/** The participant part of SvcRoomOptions: `{userId, name, avatarUrl?, isHost?}`. */
export type SvcParticipantOptions = ProtocolParticipantOptions;
export type SvcCreateRoomOptions = ProtocolCreateRoomOptions;
export type SvcTokenResponse = ProtocolTokenResponse;
/** A participant as the server reports it (`sid` names one session; a rejoin gets a new one). */
export type SvcParticipant = SvcParticipantInfo;
/** One page of `listRooms()`: `{items, meta: {total, page, limit}}`. */
export type SvcRoomPage = SvcRoomList;
export type SvcLeaveReason = LeaveReason;

/** A realtime message: the text, who sent it, and the room (`sendRealtimeMessage`'s argument). */
export type SvcRealtimeMessage = SendMessageBody & { roomName: string };

/** A message as received from the room: the message plus its place in the room's order. */
export type SvcReceivedMessage = SvcRealtimeMessage & {
  sender: RoomEventData['message.received']['sender'];
  /** The room's sequence number: every participant sees messages in increasing `seq`. */
  seq: number;
  /** Server time (ms since the epoch). */
  ts: number;
  /** True when sent through `POST /realtime/rooms/{roomName}/messages` (no participant). */
  viaApi: boolean;
};

/** `listRooms()` filters: `status`, `page` (from 1), `limit` (1–100, default 10). */
export interface SvcListRoomsOptions {
  status?: SvcRoomStatus;
  page?: number;
  limit?: number;
}

/** The states of the client's connection to a room. */
export const SvcConnectionState = {
  /** No room: never connected, after `disconnect()`, or after the server ended the session. */
  DISCONNECTED: 'DISCONNECTED',
  /** `connect()` is in progress (token, socket, join; or waiting for a host). */
  CONNECTING: 'CONNECTING',
  /** In the room. */
  CONNECTED: 'CONNECTED',
  /** The socket dropped; the client is reconnecting (resume, else rejoin). */
  RECONNECTING: 'RECONNECTING',
  /** `connect()` was refused, or reconnection gave up; see `client.lastError`. */
  FAILED: 'FAILED',
} as const;
export type SvcConnectionState = (typeof SvcConnectionState)[keyof typeof SvcConnectionState];

/**
 * Why the client left the room (`onDisconnected`): a server leave reason (`ROOM_DELETED`,
 * `DUPLICATE_IDENTITY`, `TOKEN_EXPIRED`…), or one of the client's own:
 * - `CLIENT_DISCONNECT`: the app called `disconnect()`;
 * - `RECONNECT_FAILED`: reconnection reached its limit or was refused (see `lastError`).
 */
export type SvcDisconnectReason = LeaveReason | 'CLIENT_DISCONNECT' | 'RECONNECT_FAILED';

/** `startRecord()` options: the room, and optionally `filepath` and `fileType` (`MP4` by default). */
export type SvcStartRecordingOptions = ProtocolStartRecordingOptions;
/** A recording (egress) as the server reports it. */
export type SvcRecordingInfo = ProtocolRecordingInfo;
/** One page of `listRecordings()`: `{items, meta: {total, page, limit}}`. */
export type SvcRecordingPage = ProtocolRecordingPage;
/** `getRecordingDownloadUrl()`'s answer. */
export type SvcRecordingDownloadUrl = ProtocolRecordingDownloadUrl;

/** `listRecordings()` filters: `status`, `page` (from 1, default 1), `limit` (1–100, default 10). */
export interface SvcListRecordingsOptions {
  status?: SvcRecordingInfo['status'];
  page?: number;
  limit?: number;
}

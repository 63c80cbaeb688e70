/**
 * @svc/client: the TypeScript client library of Svc Realtime (Node 20 and browsers).
 * See packages/client/README.md.
 */
export {
  DEFAULT_RECONNECT_POLICY,
  SvcClient,
  type SvcClientOptions,
  type SvcReconnectPolicy,
} from './client.ts';
export {
  type SvcCallInvitationOptions,
  type SvcControllerEvent,
  type SvcEmojiReaction,
  type SvcPollOptions,
  SvcRoomController,
  type SvcRoomControllerState,
} from './controller.ts';
export {
  CLIENT_ERROR_CODES,
  errorFromResponse,
  type SvcClientErrorCode,
  SvcError,
  type SvcErrorCode,
} from './errors.ts';
export { apiBaseOf, readJsonBody } from './http.ts';
export type {
  SvcAudioOptions,
  SvcLocalTrack,
  SvcMediaStreamTrack,
  SvcRemoteTrack,
  SvcVideoOptions,
} from './media.ts';
export type { SvcObservable } from './observable.ts';
export { SvcRoom } from './room.ts';
export type { SvcWebSocket, SvcWebSocketFactory } from './socket.ts';
export * from './types.ts';

import type { ErrorDefinitions } from './types.ts';

/**
 * Realtime (rooms, tokens, signaling) codes. Signaling-only codes (sent in `error` frames and
 * `session.closed`) carry the HTTP status their meaning would have, for the registry's sake.
 */
export const REALTIME_ERRORS = {
  room_not_found: { status: 404, title: 'The room was not found.' },
  room_exists: { status: 409, title: 'A room with this name already exists.' },
  room_ended: { status: 410, title: 'The room has ended.' },
  room_full: { status: 403, title: 'The room has reached its maximum number of participants.' },
  token_invalid: { status: 401, title: 'The access token is not valid.' },
  token_expired: { status: 401, title: 'The access token has expired.' },
  token_room_mismatch: { status: 403, title: 'The access token is for another room.' },
  host_required: { status: 403, title: 'Only a host may do this.' },
  resume_failed: {
    status: 409,
    title: 'The session cannot be resumed; join again.',
  },
  not_joined: { status: 409, title: 'Join the room (session.join) first.' },
  already_joined: { status: 409, title: 'This connection has already joined.' },
  invalid_message: { status: 400, title: 'The frame is not a valid JSON request.' },
  unknown_message_type: { status: 400, title: 'The request type is unknown.' },
  frame_too_large: { status: 413, title: 'The frame exceeds 64 KiB.' },
  duplicate_identity: {
    status: 409,
    title: 'Another connection with the same user id replaced this one.',
  },
  room_deleted: { status: 410, title: 'The room was deleted.' },
  media_unavailable: {
    status: 503,
    title: 'Media is off on this server (no media engine is configured or reachable).',
  },
  media_not_allowed: {
    status: 403,
    title: "The room's liveType or the access token does not allow this media.",
  },
  media_invalid_sdp: {
    status: 400,
    title: 'The SDP is not a valid single-track description for this request.',
  },
  track_not_found: { status: 404, title: 'No such track in the room.' },
  subscription_not_found: {
    status: 404,
    title: 'No such subscription or track of this participant on this connection.',
  },
  media_failed: { status: 502, title: 'The media engine refused or failed the request.' },
} as const satisfies ErrorDefinitions;

import { type Static, Type } from '@sinclair/typebox';

/**
 * The media part of the signaling channel (docs/realtime-protocol.md §8): publishing and
 * subscribing to audio/video tracks through the server's SFU. Every track is one WebRTC
 * PeerConnection with one m-line: the client offers to publish, the server offers to subscribe.
 */

/** Where a track comes from. `camera` and `screen` are video, `microphone` is audio. */
export const TRACK_SOURCES = ['camera', 'microphone', 'screen'] as const;
export type SvcTrackSource = (typeof TRACK_SOURCES)[number];
export const TrackSourceSchema = Type.Union(TRACK_SOURCES.map((s) => Type.Literal(s)));

export const TRACK_KINDS = ['audio', 'video'] as const;
export type SvcTrackKind = (typeof TRACK_KINDS)[number];

/** The kind a source produces. */
export const KIND_OF_SOURCE: Record<SvcTrackSource, SvcTrackKind> = {
  camera: 'video',
  microphone: 'audio',
  screen: 'video',
};

/** The largest SDP the server accepts (a browser's single-track offer is 3–6 KiB). */
export const MAX_SDP_LENGTH = 32_768;
export const SdpSchema = Type.String({ minLength: 10, maxLength: MAX_SDP_LENGTH });

/** A track id (`TR_…`), chosen by the server when the track is published. */
export const TrackIdSchema = Type.String({ minLength: 1, maxLength: 64 });
/** A subscription id (`SU_…`), chosen by the server when a subscription starts. */
export const SubscriptionIdSchema = Type.String({ minLength: 1, maxLength: 64 });

/** A published track as every participant sees it (events and the join snapshot). */
export const SvcTrackInfoSchema = Type.Object(
  {
    trackId: Type.String(),
    /** The publishing participant's session id. */
    sid: Type.String(),
    userId: Type.String(),
    kind: Type.Union(TRACK_KINDS.map((k) => Type.Literal(k))),
    source: TrackSourceSchema,
    /** True while the publisher (or a moderator) has muted it; media keeps its place. */
    muted: Type.Boolean(),
  },
  { $id: 'RealtimeTrackInfo' },
);
export type SvcTrackInfo = Static<typeof SvcTrackInfoSchema>;

/** An RTCIceServer as browsers and org.webrtc take it. */
export const SvcIceServerSchema = Type.Object({
  urls: Type.Array(Type.String()),
  username: Type.Optional(Type.String()),
  credential: Type.Optional(Type.String()),
});
export type SvcIceServer = Static<typeof SvcIceServerSchema>;

/** What this participant may do with media, from the room's liveType and the token. */
export const SvcMediaPermissionsSchema = Type.Object({
  /** The sources this participant may publish (empty: watch only). */
  canPublishSources: Type.Array(TrackSourceSchema),
  canSubscribe: Type.Boolean(),
});
export type SvcMediaPermissions = Static<typeof SvcMediaPermissionsSchema>;

/** The media part of the join snapshot (`session.joined` data `media`). */
export const MediaSnapshotSchema = Type.Object({
  /** False when the server runs without a media engine: media requests get media_unavailable. */
  available: Type.Boolean(),
  /** STUN/TURN servers for the PeerConnections (TURN credentials are short-lived). */
  iceServers: Type.Array(SvcIceServerSchema),
  permissions: SvcMediaPermissionsSchema,
  /** Every published track in the room, in publish order. */
  tracks: Type.Array(SvcTrackInfoSchema),
});
export type MediaSnapshot = Static<typeof MediaSnapshotSchema>;

/** An ICE candidate as `RTCIceCandidate.toJSON()` gives it. */
export const IceCandidateSchema = Type.Object(
  {
    candidate: Type.String({ maxLength: 1024 }),
    sdpMid: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    sdpMLineIndex: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0, maximum: 64 }), Type.Null()]),
    ),
    usernameFragment: Type.Optional(Type.Union([Type.String({ maxLength: 256 }), Type.Null()])),
  },
  { additionalProperties: false },
);
export type IceCandidate = Static<typeof IceCandidateSchema>;

// ---- Client → server requests -----------------------------------------------------------------

/** `media.publish`: an SDP offer with exactly one m-line of the source's kind. Ack: `{trackId, sdp}` (the answer). */
export const MediaPublishDataSchema = Type.Object(
  { source: TrackSourceSchema, sdp: SdpSchema },
  { additionalProperties: false },
);
export type MediaPublishData = Static<typeof MediaPublishDataSchema>;

/** `media.unpublish`: stops one of this participant's tracks. Ack: `{}`. */
export const MediaUnpublishDataSchema = Type.Object(
  { trackId: TrackIdSchema },
  { additionalProperties: false },
);

/** `media.mute`: mutes or unmutes one of this participant's tracks without renegotiation. Ack: `{seq}`. */
export const MediaMuteDataSchema = Type.Object(
  { trackId: TrackIdSchema, muted: Type.Boolean() },
  { additionalProperties: false },
);

/** `media.subscribe`: receive another participant's track. Ack: `{subscriptionId, trackId, sdp}` (the server's offer). */
export const MediaSubscribeDataSchema = Type.Object(
  { trackId: TrackIdSchema },
  { additionalProperties: false },
);

/** `media.answer`: the client's answer to a subscription's offer. Ack: `{}`. */
export const MediaAnswerDataSchema = Type.Object(
  { subscriptionId: SubscriptionIdSchema, sdp: SdpSchema },
  { additionalProperties: false },
);

/** `media.unsubscribe`: ends a subscription. Ack: `{}`. */
export const MediaUnsubscribeDataSchema = Type.Object(
  { subscriptionId: SubscriptionIdSchema },
  { additionalProperties: false },
);

/**
 * `media.trickle`: one ICE candidate of this client (null: gathering completed) for one of its
 * own PeerConnections, named by the trackId (publishing) or subscriptionId (subscribing). Ack: `{}`.
 */
export const MediaTrickleDataSchema = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 64 }),
    candidate: Type.Union([IceCandidateSchema, Type.Null()]),
  },
  { additionalProperties: false },
);

export const MEDIA_REQUEST_TYPES = [
  'media.publish',
  'media.unpublish',
  'media.mute',
  'media.subscribe',
  'media.answer',
  'media.unsubscribe',
  'media.trickle',
] as const;

// ---- Server → client ----------------------------------------------------------------------------

/** Why a track stopped (`media.stopped` `reason`). */
export const TRACK_STOP_REASONS = [
  /** The publisher sent media.unpublish. */
  'UNPUBLISHED',
  /** The publisher left the room (any leave reason). */
  'LEFT',
  /**
   * The media engine restarted and lost every PeerConnection. The publisher publishes the source
   * again (the client library does this by itself); subscribers see a new media.started.
   */
  'ENGINE_RESTARTED',
  /** The engine reported the publisher's PeerConnection gone (ICE failed, hang-up). */
  'HANGUP',
  /**
   * The publisher's session resumed on another server node, which does not hold the track's
   * engine handle. The client library publishes the source again through the new node.
   */
  'MOVED',
] as const;
export type TrackStopReason = (typeof TRACK_STOP_REASONS)[number];

/** Room events' `data` for media (in the room's `seq` order like every room event). */
export interface MediaEventData {
  'media.started': { track: SvcTrackInfo };
  'media.stopped': { track: SvcTrackInfo; reason: TrackStopReason };
  /** `by` is the sid of who muted it: the publisher itself, or a moderator (server-side mute). */
  'media.muted': { track: SvcTrackInfo; by: string };
}

/**
 * Session frame `media.trickle` (server → client): a candidate of the server's side for one of
 * this client's PeerConnections (null: completed). The server's SDP usually carries its
 * candidates already; apply these when they come.
 */
export interface MediaTrickleFrameData {
  id: string;
  candidate: IceCandidate | null;
}

/**
 * Session frame `media.ended` (server → client): the engine hung up the PeerConnection of the
 * subscription `id` (ICE or DTLS failed on its side) to the track `trackId`, and the server
 * dropped the subscription. The client subscribes to the track again while it is published.
 * A publisher whose PeerConnection hangs up sees `media.stopped` with reason HANGUP instead.
 */
export interface MediaEndedFrameData {
  id: string;
  trackId: string;
}

import { type Static, type TSchema, Type } from '@sinclair/typebox';

/**
 * The room controller's wire contract (docs/room-controller.md, docs/realtime-protocol.md §9):
 * the requests a participant sends over the signaling channel, the room events the server answers
 * with, and the `controller` part of the join snapshot. Every rule is decided by the server; the
 * client libraries send requests and mirror the state these events describe.
 */

// ---- Shared pieces ------------------------------------------------------------------------------

/** A participant's role in a room: one host at most, any number of co-hosts. */
export const ROOM_ROLES = ['host', 'cohost', 'participant'] as const;
export type SvcRoomRole = (typeof ROOM_ROLES)[number];

const UserId = Type.String({ minLength: 1, maxLength: 128 });
const Id = Type.String({ minLength: 1, maxLength: 64 });
const Strict = <T extends Record<string, TSchema>>(props: T) =>
  Type.Object(props, { additionalProperties: false });

/** Typing indicators expire on the server this long after the last `typing.start`. */
export const TYPING_TTL_MS = 3000;
/** A participant's `typing.start` is broadcast at most once per this period (refreshes extend). */
export const TYPING_THROTTLE_MS = 2000;
/** Chat text: 1–4096 characters. */
export const MAX_CHAT_LENGTH = 4096;
/** Polls: question ≤ 500 characters, 2–10 options of ≤ 200 characters; ≤ 50 polls per room. */
export const POLL_LIMITS = {
  question: 500,
  option: 200,
  minOptions: 2,
  maxOptions: 10,
  perRoom: 50,
};
/** Breakout rooms per main room. */
export const MAX_BREAKOUT_ROOMS = 50;
/** Invitation ring time: default from the server config (30 s), bounded to 5–180 s. */
export const INVITATION_TIMEOUT_BOUNDS_MS = { min: 5000, max: 180_000 };
/** Invitees per invitation. */
export const MAX_INVITEES = 50;
/**
 * The reactions every client can show. A reaction is one of these names or any single emoji
 * grapheme (validated on the server with `\p{Extended_Pictographic}`).
 */
export const REACTION_NAMES = [
  'like',
  'love',
  'laugh',
  'wow',
  'sad',
  'clap',
  'celebrate',
  'thinking',
] as const;
/** Results visibility of a poll: to everyone at once, to each voter after voting, or at the end. */
export const POLL_VISIBILITIES = ['live', 'after_vote', 'after_end'] as const;
export type SvcPollVisibility = (typeof POLL_VISIBILITIES)[number];
/** How an invitation ended for an invitee (or for everyone: `cancelled`). */
export const INVITATION_OUTCOMES = [
  'pending',
  'accepted',
  'declined',
  'busy',
  'cancelled',
  'timed_out',
] as const;
export type SvcInvitationOutcome = (typeof INVITATION_OUTCOMES)[number];

// ---- Requests: {id, type, data} -----------------------------------------------------------------

const Target = Strict({ userId: UserId });
const OptionalTarget = Strict({ userId: Type.Optional(UserId) });
const Empty = Strict({});

/** Background effect: the participant's own, shared so others can show it (e.g. "blurred"). */
export const BackgroundEffectSchema = Type.Union([
  Strict({ type: Type.Literal('none') }),
  Strict({
    type: Type.Literal('blur'),
    strength: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  }),
  Strict({ type: Type.Literal('image'), url: Type.String({ minLength: 1, maxLength: 2048 }) }),
]);
export type SvcBackgroundEffect = Static<typeof BackgroundEffectSchema>;

/** Accessibility settings the room may need to know (captions on, a sign-language interpreter…). */
export const AccessibilitySettingsSchema = Strict({
  captions: Type.Optional(Type.Boolean()),
  captionsLanguage: Type.Optional(Type.String({ maxLength: 35 })),
  signLanguage: Type.Optional(Type.Boolean()),
  highContrast: Type.Optional(Type.Boolean()),
  screenReader: Type.Optional(Type.Boolean()),
});
export type SvcAccessibilitySettings = Static<typeof AccessibilitySettingsSchema>;

/** Room settings a host changes with `room.update_settings`. */
export const RoomSettingsSchema = Strict({
  /** Joiners who are not host or co-host wait until a host or co-host approves them (false). */
  waitingRoom: Type.Boolean(),
  /** When the host leaves for good, a co-host (else the earliest participant) takes over (true). */
  hostSuccession: Type.Boolean(),
});
export type SvcRoomSettings = Static<typeof RoomSettingsSchema>;

/** Every controller request type and its `data` schema. */
export const CONTROLLER_REQUESTS = {
  'room.update_settings': Strict({
    waitingRoom: Type.Optional(Type.Boolean()),
    hostSuccession: Type.Optional(Type.Boolean()),
  }),
  'role.transfer_host': Target,
  'role.promote': Target,
  'role.demote': Target,
  'participant.spotlight': Target,
  'participant.unspotlight': Target,
  'participant.kick': Strict({
    userId: UserId,
    reason: Type.Optional(Type.String({ maxLength: 256 })),
  }),
  'participant.update_state': Strict({
    background: Type.Optional(BackgroundEffectSchema),
    accessibility: Type.Optional(AccessibilitySettingsSchema),
  }),
  'chat.send': Strict({ text: Type.String({ minLength: 1, maxLength: MAX_CHAT_LENGTH }) }),
  'typing.start': Empty,
  'typing.stop': Empty,
  'hand.raise': Empty,
  'hand.lower': OptionalTarget,
  'poll.create': Strict({
    question: Type.String({ minLength: 1, maxLength: POLL_LIMITS.question }),
    options: Type.Array(Type.String({ minLength: 1, maxLength: POLL_LIMITS.option }), {
      minItems: POLL_LIMITS.minOptions,
      maxItems: POLL_LIMITS.maxOptions,
    }),
    anonymous: Type.Optional(Type.Boolean()),
    visibility: Type.Optional(Type.Union(POLL_VISIBILITIES.map((v) => Type.Literal(v)))),
  }),
  'poll.respond': Strict({ pollId: Id, option: Type.Integer({ minimum: 0, maximum: 99 }) }),
  'poll.end': Strict({ pollId: Id }),
  'poll.get': Strict({ pollId: Id }),
  'reaction.send': Strict({ emoji: Type.String({ minLength: 1, maxLength: 32 }) }),
  'invitation.send': Strict({
    userIds: Type.Array(UserId, { minItems: 1, maxItems: MAX_INVITEES }),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
    metadata: Type.Optional(Type.String({ maxLength: 4096 })),
  }),
  'invitation.accept': Strict({ invitationId: Id }),
  'invitation.decline': Strict({ invitationId: Id, busy: Type.Optional(Type.Boolean()) }),
  'invitation.cancel': Strict({ invitationId: Id }),
  'waiting.approve': Target,
  'waiting.reject': Strict({
    userId: UserId,
    reason: Type.Optional(Type.String({ maxLength: 256 })),
  }),
  'breakout.create': Strict({
    name: Type.String({ minLength: 1, maxLength: 100 }),
    userIds: Type.Array(UserId, { maxItems: 1000 }),
  }),
  'breakout.move': Strict({ userId: UserId, breakoutId: Type.Union([Id, Type.Null()]) }),
  'breakout.join': Strict({ breakoutId: Id }),
  'breakout.close': Strict({
    breakoutId: Type.Optional(Id),
    countdownMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 300_000 })),
  }),
  'breakout.broadcast': Strict({
    message: Type.String({ minLength: 1, maxLength: MAX_CHAT_LENGTH }),
  }),
  // Media moderation (needs the media engine to be enforced; see docs/room-controller.md).
  'media.update_self': Strict({
    microphoneMuted: Type.Optional(Type.Boolean()),
    cameraEnabled: Type.Optional(Type.Boolean()),
    screenShareEnabled: Type.Optional(Type.Boolean()),
  }),
  'media.mute_participant': Strict({ userId: UserId }),
  'media.request_unmute': Strict({ userId: UserId }),
  'media.mute_all': Strict({ allowSelfUnmute: Type.Optional(Type.Boolean()) }),
  'media.unmute_all': Empty,
} as const;
export type ControllerRequestType = keyof typeof CONTROLLER_REQUESTS;
export type ControllerRequestData<T extends ControllerRequestType> = Static<
  (typeof CONTROLLER_REQUESTS)[T]
>;
export const CONTROLLER_REQUEST_TYPES = Object.keys(CONTROLLER_REQUESTS) as ControllerRequestType[];

// ---- State (snapshot) and events ----------------------------------------------------------------

export interface SvcChatMessage {
  /** The room seq of the message: the order everyone sees. */
  seq: number;
  /** Server time, ms since the epoch. */
  ts: number;
  text: string;
  from: { userId: string; name: string; sid: string };
}

export interface SvcRaisedHand {
  userId: string;
  /** Server time of the raise; hands are listed in this order. */
  raisedAt: number;
}

export interface SvcTypingIndicator {
  userId: string;
  /** Server time after which the indicator is gone unless refreshed. */
  expiresAt: number;
}

export interface SvcPollVote {
  userId: string;
  /** The chosen option's index. */
  option: number;
}

export interface SvcPollResults {
  /** Votes per option, in option order. */
  counts: number[];
  totalVotes: number;
  /**
   * Who chose what (option index per userId); absent for anonymous polls, and in `poll.updated`,
   * which carries only the new vote (`vote`) for mirrors to add.
   */
  votes?: SvcPollVote[];
}

export interface SvcPoll {
  id: string;
  question: string;
  options: string[];
  anonymous: boolean;
  visibility: SvcPollVisibility;
  createdBy: string;
  createdAt: number;
  endedAt: number | null;
  totalVotes: number;
  /** Present when the receiver may see them (visibility rules). */
  results?: SvcPollResults;
  /** The option the receiver chose, if any (snapshots and `poll.get` only). */
  myVote?: number | null;
}

export interface SvcInvitation {
  id: string;
  roomName: string;
  from: { userId: string; name: string };
  /** Outcome per invitee. */
  invitees: { userId: string; outcome: SvcInvitationOutcome }[];
  createdAt: number;
  expiresAt: number;
  metadata?: string;
}

export interface SvcWaitingParticipant {
  userId: string;
  name: string;
  avatarUrl?: string;
  since: number;
}

export interface SvcBreakoutRoom {
  id: string;
  name: string;
  /** The breakout's own room name: join it with a token for that room. */
  roomName: string;
  /** Assigned participants (userIds). */
  userIds: string[];
  /** Set while it is closing: when it closes. */
  closesAt: number | null;
}

export interface SvcMediaState {
  userId: string;
  microphoneMuted: boolean;
  cameraEnabled: boolean;
  screenShareEnabled: boolean;
  /** False after a host muted this participant with `allowSelfUnmute: false`. */
  selfUnmuteAllowed: boolean;
}

export interface SvcParticipantState {
  userId: string;
  background: SvcBackgroundEffect;
  accessibility: SvcAccessibilitySettings;
}

export interface SvcNetworkQuality {
  userId: string;
  /** 0 (lost) … 5 (excellent), from the signaling round-trip time. */
  quality: number;
  /** The last measured round trip, ms; null when the participant is not connected. */
  rttMs: number | null;
}

/** The controller part of `session.joined` (the state as of the snapshot's `seq`). */
export interface ControllerSnapshot {
  settings: SvcRoomSettings;
  hostUserId: string | null;
  /** Co-hosts in promotion order. */
  coHosts: string[];
  spotlight: string[];
  hands: SvcRaisedHand[];
  typing: SvcTypingIndicator[];
  /** The last messages (bounded history), oldest first. */
  chat: SvcChatMessage[];
  polls: SvcPoll[];
  /** Joiners waiting for approval, in arrival order. */
  waiting: SvcWaitingParticipant[];
  invitations: SvcInvitation[];
  breakouts: SvcBreakoutRoom[];
  /** Set in a breakout room: its main room. */
  breakoutOf: { roomName: string; breakoutId: string } | null;
  media: SvcMediaState[];
  states: SvcParticipantState[];
  quality: SvcNetworkQuality[];
}

/** Controller room events' `data`. */
export interface ControllerEventData {
  'room.settings_changed': { settings: SvcRoomSettings; by: string };
  'role.changed': {
    userId: string;
    role: SvcRoomRole;
    previousRole: SvcRoomRole;
    by: string | null;
    reason: 'TRANSFER' | 'PROMOTED' | 'DEMOTED' | 'SUCCESSION' | 'JOINED';
  };
  'spotlight.changed': { userIds: string[]; by: string };
  'participant.state_changed': SvcParticipantState;
  'chat.message': { text: string; from: { userId: string; name: string; sid: string } };
  'typing.started': { userId: string; expiresAt: number };
  'typing.stopped': { userId: string; reason: 'STOPPED' | 'EXPIRED' | 'LEFT' };
  'hand.raised': SvcRaisedHand;
  'hand.lowered': { userId: string; by: string | null };
  'poll.created': { poll: SvcPoll };
  /**
   * One more answer. With `live` results: the counts (`results` without `votes`) and, unless the
   * poll is anonymous, the new `vote`; a mirror adds it to the votes it holds (each user once).
   */
  'poll.updated': {
    pollId: string;
    totalVotes: number;
    results?: SvcPollResults;
    vote?: SvcPollVote;
  };
  'poll.ended': { poll: SvcPoll };
  'reaction.batch': { reactions: { userId: string; emoji: string; ts: number }[] };
  'invitation.created': { invitation: SvcInvitation };
  'invitation.updated': {
    invitationId: string;
    userId: string | null;
    outcome: SvcInvitationOutcome;
    invitation: SvcInvitation;
  };
  'waiting.joined': { participant: SvcWaitingParticipant };
  'waiting.approved': { userId: string; by: string };
  'waiting.rejected': { userId: string; by: string; reason?: string };
  'waiting.timed_out': { userId: string };
  'waiting.left': { userId: string };
  'breakout.created': { breakout: SvcBreakoutRoom };
  'breakout.moved': { userId: string; breakoutId: string | null; roomName: string; by: string };
  'breakout.closing': { breakoutIds: string[]; closesAt: number };
  'breakout.closed': { breakoutIds: string[] };
  'breakout.broadcast': { message: string; from: { userId: string; name: string } };
  'media.state_changed': SvcMediaState & { by: string | null };
  'media.unmute_requested': { userId: string; by: string };
  'media.all_muted': { allowSelfUnmute: boolean; by: string };
  'media.all_unmute_requested': { by: string };
  'network.quality': { scores: SvcNetworkQuality[] };
}
export type ControllerEventType = keyof ControllerEventData;

/** Every controller room event type (a compile error here when ControllerEventData changes). */
export const CONTROLLER_EVENT_TYPES = Object.keys({
  'room.settings_changed': true,
  'role.changed': true,
  'spotlight.changed': true,
  'participant.state_changed': true,
  'chat.message': true,
  'typing.started': true,
  'typing.stopped': true,
  'hand.raised': true,
  'hand.lowered': true,
  'poll.created': true,
  'poll.updated': true,
  'poll.ended': true,
  'reaction.batch': true,
  'invitation.created': true,
  'invitation.updated': true,
  'waiting.joined': true,
  'waiting.approved': true,
  'waiting.rejected': true,
  'waiting.timed_out': true,
  'waiting.left': true,
  'breakout.created': true,
  'breakout.moved': true,
  'breakout.closing': true,
  'breakout.closed': true,
  'breakout.broadcast': true,
  'media.state_changed': true,
  'media.unmute_requested': true,
  'media.all_muted': true,
  'media.all_unmute_requested': true,
  'network.quality': true,
} satisfies Record<ControllerEventType, true>) as ControllerEventType[];

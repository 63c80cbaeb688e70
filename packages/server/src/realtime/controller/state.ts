import type {
  ControllerSnapshot,
  SvcAccessibilitySettings,
  SvcBackgroundEffect,
  SvcBreakoutRoom,
  SvcChatMessage,
  SvcInvitation,
  SvcMediaState,
  SvcNetworkQuality,
  SvcPoll,
  SvcPollVisibility,
  SvcRaisedHand,
  SvcRoomRole,
  SvcRoomSettings,
  SvcWaitingParticipant,
} from '@svc/protocol';
import type { LiveParticipant, LiveRoom } from '../room-store.ts';
import type { ControllerConfig } from './config.ts';

/** A poll as the room keeps it: votes by voter key (the userId, or its hash when anonymous). */
export interface PollState {
  id: string;
  question: string;
  options: string[];
  anonymous: boolean;
  visibility: SvcPollVisibility;
  createdBy: string;
  createdAt: number;
  endedAt: number | null;
  votes: { voter: string; option: number }[];
}

export interface WaitingEntry extends SvcWaitingParticipant {
  /** When the server gives up on this joiner. */
  timeoutAtMs: number;
  /** The waiting connection (a newer one of the same user replaces it). */
  connId: string;
  /** The node holding that connection (absent in entries stored before nodes were recorded). */
  nodeId?: string;
}

/** Breakout rooms of a main room (the main room keeps the list and the assignments). */
export interface BreakoutEntry extends SvcBreakoutRoom {
  rid: string;
}

/** A closed breakout room whose delete is pending: next tried at `dueAt`. */
export interface ClosedBreakout {
  roomName: string;
  dueAt: number;
  /** Deletes tried so far. */
  attempts: number;
}

/**
 * Everything the room controller decides, kept inside the live room (one value in the shared
 * state, changed under the room's lock). Lists keyed by user id are arrays, never objects indexed
 * by client-supplied strings.
 */
export interface ControllerState {
  settings: SvcRoomSettings;
  hostUserId: string | null;
  coHosts: string[];
  spotlight: string[];
  /** Users removed by a kick, until their token's expiry. */
  bans: { userId: string; untilMs: number }[];
  hands: SvcRaisedHand[];
  /** `sentAtMs`: when `typing.started` was last broadcast (throttle). */
  typing: { userId: string; expiresAt: number; sentAtMs: number }[];
  polls: PollState[];
  waiting: WaitingEntry[];
  /** Users a host approved; the next join of each passes the waiting room once. */
  admitted: string[];
  invitations: SvcInvitation[];
  breakouts: BreakoutEntry[];
  /**
   * Users the main room made host or co-host, whom its breakout rooms admit and make co-hosts. Kept
   * when they leave the main room (a visit to a breakout room is a leave); a demotion, a kick, or a
   * return to the main room without the role takes them out.
   */
  breakoutAdmins?: string[];
  /** Closed breakout rooms still to delete, retried by the sweeper until their delete succeeds. */
  closed?: ClosedBreakout[];
  /** In a breakout room: the main room, and who may join (assigned users and main-room admins). */
  breakoutOf: {
    roomName: string;
    rid: string;
    breakoutId: string;
    allowed: string[];
    /** The main room's host and co-hosts: co-hosts here (host if none is present). */
    admins: string[];
  } | null;
  /** Media state of the participants present. */
  media: SvcMediaState[];
  /**
   * Users who left while muted with self-unmute not allowed: they rejoin muted so, until a host
   * lifts it (`media.unmute_all`), for the room instance's lifetime (like bans).
   */
  heldMutes?: string[];
  states: {
    userId: string;
    background: SvcBackgroundEffect;
    accessibility: SvcAccessibilitySettings;
  }[];
  quality: SvcNetworkQuality[];
}

export function newControllerState(cfg: ControllerConfig): ControllerState {
  return {
    settings: { waitingRoom: false, hostSuccession: cfg.hostSuccession },
    hostUserId: null,
    coHosts: [],
    spotlight: [],
    bans: [],
    hands: [],
    typing: [],
    polls: [],
    waiting: [],
    admitted: [],
    invitations: [],
    breakouts: [],
    breakoutOf: null,
    media: [],
    states: [],
    quality: [],
  };
}

/** The room's controller state, created on first use. */
export function controllerOf(room: LiveRoom, cfg: ControllerConfig): ControllerState {
  room.controller ??= newControllerState(cfg);
  return room.controller;
}

export function roleOf(ctl: ControllerState, userId: string): SvcRoomRole {
  if (ctl.hostUserId === userId) return 'host';
  return ctl.coHosts.includes(userId) ? 'cohost' : 'participant';
}

export const isAdmin = (ctl: ControllerState, userId: string) =>
  roleOf(ctl, userId) !== 'participant';

/** Keeps `isHost` of every participant equal to the controller's host. */
export function syncHostFlags(room: LiveRoom, ctl: ControllerState) {
  for (const p of room.participants) p.isHost = p.userId === ctl.hostUserId;
}

export function participantByUser(room: LiveRoom, userId: string): LiveParticipant | undefined {
  return room.participants.find((p) => p.userId === userId);
}

export function mediaOf(ctl: ControllerState, userId: string): SvcMediaState {
  let m = ctl.media.find((x) => x.userId === userId);
  if (!m) {
    m = {
      userId,
      microphoneMuted: false,
      cameraEnabled: false,
      screenShareEnabled: false,
      selfUnmuteAllowed: true,
    };
    ctl.media.push(m);
  }
  return m;
}

/** A poll as `viewer` may see it (results per the poll's visibility). */
export function pollView(poll: PollState, viewer: string | null, voterKey: string | null): SvcPoll {
  const myVote = voterKey ? (poll.votes.find((v) => v.voter === voterKey)?.option ?? null) : null;
  const visible =
    poll.visibility === 'live' ||
    poll.endedAt !== null ||
    (poll.visibility === 'after_vote' && myVote !== null) ||
    (viewer !== null && poll.createdBy === viewer);
  return {
    id: poll.id,
    question: poll.question,
    options: poll.options,
    anonymous: poll.anonymous,
    visibility: poll.visibility,
    createdBy: poll.createdBy,
    createdAt: poll.createdAt,
    endedAt: poll.endedAt,
    totalVotes: poll.votes.length,
    ...(visible ? { results: pollResults(poll) } : {}),
    ...(viewer !== null ? { myVote } : {}),
  };
}

/** Votes per option, in option order. */
export function pollCounts(poll: PollState) {
  const counts = poll.options.map(() => 0);
  for (const v of poll.votes) counts[v.option] = (counts[v.option] ?? 0) + 1;
  return counts;
}

function pollResults(poll: PollState) {
  return {
    counts: pollCounts(poll),
    totalVotes: poll.votes.length,
    ...(poll.anonymous
      ? {}
      : { votes: poll.votes.map((v) => ({ userId: v.voter, option: v.option })) }),
  };
}

/** The controller part of a join snapshot for `viewer`. */
export function controllerSnapshot(
  room: LiveRoom,
  cfg: ControllerConfig,
  viewer: string,
  voterKey: (poll: PollState) => string,
  chat: SvcChatMessage[],
): ControllerSnapshot {
  const ctl = controllerOf(room, cfg);
  return {
    settings: ctl.settings,
    hostUserId: ctl.hostUserId,
    coHosts: ctl.coHosts,
    spotlight: ctl.spotlight,
    hands: ctl.hands,
    typing: ctl.typing.map(({ userId, expiresAt }) => ({ userId, expiresAt })),
    chat,
    polls: ctl.polls.map((p) => pollView(p, viewer, voterKey(p))),
    waiting: ctl.waiting.map(({ timeoutAtMs: _t, connId: _c, nodeId: _n, ...w }) => w),
    invitations: ctl.invitations,
    breakouts: ctl.breakouts.map(({ rid: _, ...b }) => b),
    breakoutOf: ctl.breakoutOf
      ? { roomName: ctl.breakoutOf.roomName, breakoutId: ctl.breakoutOf.breakoutId }
      : null,
    media: ctl.media,
    states: ctl.states,
    quality: ctl.quality,
  };
}

import type {
  ControllerEventData,
  ControllerSnapshot,
  SvcAccessibilitySettings,
  SvcBackgroundEffect,
  SvcBreakoutRoom,
  SvcChatMessage,
  SvcInvitation,
  SvcMediaState,
  SvcNetworkQuality,
  SvcPoll,
  SvcPollResults,
  SvcPollVisibility,
  SvcPollVote,
  SvcRaisedHand,
  SvcRoomRole,
  SvcRoomSettings,
  SvcTypingIndicator,
  SvcWaitingParticipant,
} from '@svc/protocol';
import { TYPING_THROTTLE_MS } from '@svc/protocol';
import type { SvcError } from './errors.ts';
import { MutableObservable, notify, type SvcObservable } from './observable.ts';
import { notConnected, type SvcRoom } from './room.ts';
import type { SvcParticipant, SvcRoomOptions } from './types.ts';

/** A reaction as received (kept for {@link SvcRoomController.getRecentEmojiReactions}). */
export interface SvcEmojiReaction {
  userId: string;
  emoji: string;
  /** Server time of the reaction. */
  ts: number;
  /** This device's time when it arrived (recency is judged on it: clocks differ). */
  receivedAt: number;
}

/** Everything the controller mirrors, replaced as a whole on every change (never mutated). */
export interface SvcRoomControllerState extends Omit<ControllerSnapshot, 'chat'> {
  /** The room's last `seq` applied. */
  seq: number;
  chat: SvcChatMessage[];
  reactions: SvcEmojiReaction[];
  /** Participants pinned on this device only. */
  pinned: string[];
}

/** A controller event as the app sees it: the room event's type, data and place in the order. */
export interface SvcControllerEvent<
  T extends keyof ControllerEventData = keyof ControllerEventData,
> {
  type: T;
  data: ControllerEventData[T];
  seq: number;
  ts: number;
}

/** `sendCallInvitation` options. */
export interface SvcCallInvitationOptions {
  userIds: string[];
  /** Ring time in ms (server default 30000; bounded to 5000–180000 by the server). */
  timeoutMs?: number;
  /** Free text for the app (e.g. JSON with the call's topic), ≤ 4096 characters. */
  metadata?: string;
}

/** `createPoll` options. */
export interface SvcPollOptions {
  /** Voters' user ids are not kept (false). */
  anonymous?: boolean;
  /** Who sees results when (`live`). */
  visibility?: SvcPollVisibility;
}

/** How long received reactions stay in `getRecentEmojiReactions()`. */
const RECENT_REACTIONS_MS = 10_000;
/** At most this many reactions are kept. */
const MAX_REACTIONS = 200;

/**
 * A poll's results after a `poll.updated`: its counts, and the votes held so far plus the new one
 * (each user once: an answer's ack may already have brought it). An update that carries the full
 * list replaces it.
 */
function updatedResults(
  held: SvcPollResults | undefined,
  update: SvcPollResults,
  vote: SvcPollVote | undefined,
): SvcPollResults {
  if (update.votes || (!held?.votes && !vote)) return update;
  const votes = (held?.votes ?? []).filter((v) => v.userId !== vote?.userId);
  if (vote) votes.push(vote);
  return { ...update, votes };
}

const emptyState = (): SvcRoomControllerState => ({
  seq: 0,
  settings: { waitingRoom: false, hostSuccession: true },
  hostUserId: null,
  coHosts: [],
  spotlight: [],
  hands: [],
  typing: [],
  chat: [],
  polls: [],
  waiting: [],
  invitations: [],
  breakouts: [],
  breakoutOf: null,
  media: [],
  states: [],
  quality: [],
  reactions: [],
  pinned: [],
});

/** What the controller needs from its client (SvcClient implements it). */
export interface ControllerHost {
  readonly room: SvcRoom | null;
  connect(options: SvcRoomOptions): Promise<SvcRoom>;
  /** A switch the controller makes by itself: connect, retrying what a reconnection retries. */
  _switchRoom(options: SvcRoomOptions): Promise<SvcRoom>;
  answerInvitation(
    options: SvcRoomOptions,
    invitationId: string,
    answer: 'accept' | 'decline' | 'busy',
  ): Promise<void>;
}

/**
 * The room controller of the client's current room (`client.controller`): roles, participants,
 * media moderation, chat, typing, invitations, hands, network quality, polls, breakout rooms,
 * reactions, waiting room, background effect and accessibility — with the Android library's
 * operation names. Every rule is decided by the server: operations send a request and resolve once
 * the server accepted it (rejecting with an SvcError carrying the registry code, e.g.
 * `host_required`, `cohost_required`), and the state (`state`) changes only when the server's
 * event arrives, in the room's order. Queries read that mirrored state.
 */
export class SvcRoomController {
  /** Every controller event, in the room's order (after `state` has been updated). */
  onEvent?: (event: SvcControllerEvent) => void;
  /**
   * A host or co-host moved this user (`breakoutId` null: back to the main room). With
   * `autoJoinBreakoutRooms` the controller switches rooms by itself first.
   */
  onMovedToBreakoutRoom?: (breakoutId: string | null, roomName: string) => void;
  /** Switch rooms on `breakout.moved` and return to the main room when a breakout room closes. */
  autoJoinBreakoutRooms = true;

  readonly #state = new MutableObservable<SvcRoomControllerState>(emptyState());
  #pinned: string[] = [];
  #mainRoomOptions: SvcRoomOptions | null = null;
  #lastTypingSentAt = 0;

  /** @internal Created by SvcClient. */
  constructor(private readonly host: ControllerHost) {}

  /** The mirrored state: `.value`, `.subscribe(listener)`. */
  get state(): SvcObservable<SvcRoomControllerState> {
    return this.#state;
  }

  get #s() {
    return this.#state.value;
  }

  get #self(): SvcParticipant | null {
    return this.host.room?.localParticipant ?? null;
  }

  async #request(type: string, data: unknown = {}): Promise<Record<string, unknown>> {
    const room = this.host.room;
    if (!room) throw notConnected();
    return room.request(type, data);
  }

  // ---- Roles -------------------------------------------------------------------------------

  /** Whether this user (or `userId`) is the room's host. */
  isHost(userId?: string): boolean {
    const id = userId ?? this.#self?.userId;
    return id !== undefined && this.#s.hostUserId === id;
  }

  /** Whether this user (or `userId`) is a co-host. */
  isCoHost(userId?: string): boolean {
    const id = userId ?? this.#self?.userId;
    return id !== undefined && this.#s.coHosts.includes(id);
  }

  /** This user's (or `userId`'s) role. */
  getRole(userId?: string): SvcRoomRole {
    return this.isHost(userId) ? 'host' : this.isCoHost(userId) ? 'cohost' : 'participant';
  }

  /** Co-hosts' user ids, in promotion order. */
  getCoHosts(): string[] {
    return this.#s.coHosts;
  }

  /** Host only: makes `userId` the host; this user becomes a co-host. */
  async transferHost(userId: string): Promise<void> {
    await this.#request('role.transfer_host', { userId });
  }

  /** Host only. */
  async promoteToCoHost(userId: string): Promise<void> {
    await this.#request('role.promote', { userId });
  }

  /** Host only. */
  async demoteFromCoHost(userId: string): Promise<void> {
    await this.#request('role.demote', { userId });
  }

  /** The room's settings (waiting room, host succession). */
  getRoomSettings(): SvcRoomSettings {
    return this.#s.settings;
  }

  /** Host only: turns the waiting room or host succession on or off. */
  async updateRoomSettings(settings: Partial<SvcRoomSettings>): Promise<void> {
    await this.#request('room.update_settings', settings);
  }

  // ---- Participants ------------------------------------------------------------------------

  getParticipants(): SvcParticipant[] {
    return this.host.room?.participants ?? [];
  }

  getParticipant(userId: string): SvcParticipant | undefined {
    return this.getParticipants().find((p) => p.userId === userId);
  }

  /** Pins a participant on this device only (nobody else is told). */
  pin(userId: string) {
    if (this.#pinned.includes(userId)) return;
    this.#pinned = [...this.#pinned, userId];
    this.#set({ pinned: this.#pinned });
  }

  unpin(userId: string) {
    this.#pinned = this.#pinned.filter((u) => u !== userId);
    this.#set({ pinned: this.#pinned });
  }

  getPinnedParticipants(): SvcParticipant[] {
    return this.#pinned.flatMap((u) => this.getParticipant(u) ?? []);
  }

  /** Host or co-host: spotlights a participant for everyone. */
  async spotlight(userId: string): Promise<void> {
    await this.#request('participant.spotlight', { userId });
  }

  async unspotlight(userId: string): Promise<void> {
    await this.#request('participant.unspotlight', { userId });
  }

  getSpotlightedParticipants(): SvcParticipant[] {
    return this.#s.spotlight.flatMap((u) => this.getParticipant(u) ?? []);
  }

  /**
   * Host or co-host: removes a participant, who may not rejoin with its token (the server bans
   * the user id until that token expires). The kicked client gets `onDisconnected('KICKED')`
   * with the reason.
   */
  async kick(userId: string, reason?: string): Promise<void> {
    await this.#request('participant.kick', { userId, ...(reason ? { reason } : {}) });
  }

  // ---- Audio / video / screen share ----------------------------------------------------------

  #media(userId?: string): SvcMediaState | undefined {
    const id = userId ?? this.#self?.userId;
    return this.#s.media.find((m) => m.userId === id);
  }

  /** Reports this user's microphone as muted (apply it to the local track too). */
  async muteMicrophone(): Promise<void> {
    await this.#request('media.update_self', { microphoneMuted: true });
  }

  /** Rejects with `self_unmute_not_allowed` after a host's mute-all without self-unmute. */
  async unmuteMicrophone(): Promise<void> {
    await this.#request('media.update_self', { microphoneMuted: false });
  }

  async enableCamera(): Promise<void> {
    await this.#request('media.update_self', { cameraEnabled: true });
  }

  async disableCamera(): Promise<void> {
    await this.#request('media.update_self', { cameraEnabled: false });
  }

  isMicrophoneMuted(userId?: string): boolean {
    return this.#media(userId)?.microphoneMuted ?? false;
  }

  isCameraEnabled(userId?: string): boolean {
    return this.#media(userId)?.cameraEnabled ?? false;
  }

  /** Host only: mutes everyone else; `allowSelfUnmute` false keeps them muted. */
  async muteAll(allowSelfUnmute = true): Promise<void> {
    await this.#request('media.mute_all', { allowSelfUnmute });
  }

  /** Host only: asks everyone to unmute (a request; nobody is unmuted by force). */
  async unmuteAll(): Promise<void> {
    await this.#request('media.unmute_all', {});
  }

  /** Host or co-host. */
  async muteParticipant(userId: string): Promise<void> {
    await this.#request('media.mute_participant', { userId });
  }

  /** Host or co-host: asks `userId` to unmute (`media.unmute_requested`); never forced. */
  async unmuteParticipant(userId: string): Promise<void> {
    await this.#request('media.request_unmute', { userId });
  }

  async enableScreenShare(): Promise<void> {
    await this.#request('media.update_self', { screenShareEnabled: true });
  }

  async disableScreenShare(): Promise<void> {
    await this.#request('media.update_self', { screenShareEnabled: false });
  }

  isScreenShareEnabled(userId?: string): boolean {
    return this.#media(userId)?.screenShareEnabled ?? false;
  }

  // ---- Chat and typing ----------------------------------------------------------------------

  /** Sends a chat message; resolves with its `seq` (everyone sees it in that order). */
  async sendChatMessage(text: string): Promise<{ seq: number }> {
    const ack = await this.#request('chat.send', { text });
    if (this.#lastTypingSentAt > 0) void this.stopTyping().catch(() => {});
    return { seq: Number(ack.seq) };
  }

  /** The room's chat: the server's history at join, then every message since, oldest first. */
  getChatHistory(): SvcChatMessage[] {
    return this.#s.chat;
  }

  /** Forgets the chat on this device only. */
  clearChatHistory() {
    this.#set({ chat: [] });
  }

  /**
   * Says this user is typing. Call it on every keystroke: it is sent at most once per 2 s, and
   * the server ends the indicator 3 s after the last one sent.
   */
  async startTyping(): Promise<void> {
    const now = Date.now();
    if (now - this.#lastTypingSentAt < TYPING_THROTTLE_MS) return;
    this.#lastTypingSentAt = now;
    await this.#request('typing.start', {});
  }

  async stopTyping(): Promise<void> {
    this.#lastTypingSentAt = 0;
    await this.#request('typing.stop', {});
  }

  getTypingIndicators(): SvcTypingIndicator[] {
    return this.#s.typing;
  }

  // ---- Invitations ---------------------------------------------------------------------------

  /** Rings users; resolves with the invitation id. The server ends it after its timeout. */
  async sendCallInvitation(options: SvcCallInvitationOptions): Promise<string> {
    const ack = await this.#request('invitation.send', options);
    return String(ack.invitationId);
  }

  /**
   * Accepts an invitation and joins its room. From outside the room (the usual case: the app
   * learnt of it through its backend), pass the room options: the client answers on the room's
   * channel before joining, then connects.
   */
  async acceptInvitation(invitationId: string, options?: SvcRoomOptions): Promise<void> {
    if (!options) {
      await this.#request('invitation.accept', { invitationId });
      return;
    }
    await this.host.answerInvitation(options, invitationId, 'accept');
    await this.host.connect(options);
  }

  /** Declines (`busy`: the user is in another call). Without joining when `options` are given. */
  async declineInvitation(
    invitationId: string,
    options?: SvcRoomOptions,
    busy = false,
  ): Promise<void> {
    if (!options) {
      await this.#request('invitation.decline', { invitationId, busy });
      return;
    }
    await this.host.answerInvitation(options, invitationId, busy ? 'busy' : 'decline');
  }

  /** The inviter cancels a ringing invitation. */
  async cancelInvitation(invitationId: string): Promise<void> {
    await this.#request('invitation.cancel', { invitationId });
  }

  /** Invitations of this room still ringing. */
  getInvitations(): SvcInvitation[] {
    return this.#s.invitations;
  }

  // ---- Hands -------------------------------------------------------------------------------

  async raiseHand(): Promise<void> {
    await this.#request('hand.raise', {});
  }

  /** Lowers this user's hand, or (host or co-host) another user's. */
  async lowerHand(userId?: string): Promise<void> {
    await this.#request('hand.lower', userId ? { userId } : {});
  }

  /** Raised hands in server order (first raised first). */
  getRaisedHands(): SvcRaisedHand[] {
    return this.#s.hands;
  }

  // ---- Network quality ------------------------------------------------------------------------

  /** This user's network quality (0–5), or null before the first measurement. */
  getNetworkQuality(): SvcNetworkQuality | null {
    const id = this.#self?.userId;
    return id ? this.getParticipantQuality(id) : null;
  }

  getParticipantQuality(userId: string): SvcNetworkQuality | null {
    return this.#s.quality.find((q) => q.userId === userId) ?? null;
  }

  // ---- Polls -------------------------------------------------------------------------------

  /** Host or co-host; resolves with the poll id. */
  async createPoll(question: string, options: string[], settings: SvcPollOptions = {}) {
    const ack = await this.#request('poll.create', { question, options, ...settings });
    return String(ack.pollId);
  }

  /** Host or co-host. */
  async endPoll(pollId: string): Promise<void> {
    await this.#request('poll.end', { pollId });
  }

  /** Answers once (`already_voted` after); resolves with the poll as this user may now see it. */
  async respondToPoll(pollId: string, option: number): Promise<SvcPoll> {
    const ack = await this.#request('poll.respond', { pollId, option });
    const poll = ack.poll as SvcPoll;
    this.#replacePoll(poll);
    return poll;
  }

  getActivePolls(): SvcPoll[] {
    return this.#s.polls.filter((p) => p.endedAt === null);
  }

  /** The poll as mirrored; `refresh` asks the server (results this user may see now). */
  async getPoll(pollId: string, refresh = false): Promise<SvcPoll | undefined> {
    if (refresh) {
      const ack = await this.#request('poll.get', { pollId });
      this.#replacePoll(ack.poll as SvcPoll);
    }
    return this.#s.polls.find((p) => p.id === pollId);
  }

  // ---- Breakout rooms -----------------------------------------------------------------------

  /** Host or co-host: opens a breakout room with these participants; resolves with its id. */
  async createBreakoutRoom(name: string, participantIds: string[]): Promise<string> {
    const ack = await this.#request('breakout.create', { name, userIds: participantIds });
    return String(ack.breakoutId);
  }

  /** Host or co-host: assigns `userId` to a breakout room (null: back to the main room). */
  async moveToBreakoutRoom(userId: string, breakoutId: string | null): Promise<void> {
    await this.#request('breakout.move', { userId, breakoutId });
  }

  /**
   * Joins a breakout room this user is assigned to (hosts and co-hosts: any): leaves the main
   * room and connects to the breakout room. Rejects with `breakout_not_assigned`.
   */
  async joinBreakoutRoom(breakoutId: string): Promise<void> {
    const ack = await this.#request('breakout.join', { breakoutId });
    const main = this.#mainOptions();
    await this.host.connect({ ...main, roomName: String(ack.roomName) });
  }

  /** Returns from a breakout room to the main room. */
  async leaveBreakoutRoom(): Promise<void> {
    if (!this.#mainRoomOptions || !this.#s.breakoutOf) return;
    await this.host.connect(this.#mainRoomOptions);
  }

  /** Host or co-host: closes one (or every) breakout room after a countdown (ms). */
  async closeBreakoutRooms(options: { breakoutId?: string; countdownMs?: number } = {}) {
    await this.#request('breakout.close', options);
  }

  /** Host or co-host: a message to the main room and every breakout room. */
  async broadcastToBreakoutRooms(message: string): Promise<void> {
    await this.#request('breakout.broadcast', { message });
  }

  getBreakoutRooms(): SvcBreakoutRoom[] {
    return this.#s.breakouts;
  }

  #mainOptions(): SvcRoomOptions {
    if (!this.#mainRoomOptions) throw notConnected();
    return this.#mainRoomOptions;
  }

  // ---- Reactions ---------------------------------------------------------------------------

  /** One of the reaction names (`like`, `clap`…) or a single emoji; rate limited per user. */
  async sendEmojiReaction(emoji: string): Promise<void> {
    await this.#request('reaction.send', { emoji });
  }

  /** Reactions received in the last 10 s, oldest first. */
  getRecentEmojiReactions(): SvcEmojiReaction[] {
    const since = Date.now() - RECENT_REACTIONS_MS;
    return this.#s.reactions.filter((r) => r.receivedAt >= since);
  }

  // ---- Waiting room ------------------------------------------------------------------------

  /** Host or co-host. */
  async approve(userId: string): Promise<void> {
    await this.#request('waiting.approve', { userId });
  }

  /** Host or co-host. */
  async reject(userId: string, reason?: string): Promise<void> {
    await this.#request('waiting.reject', { userId, ...(reason ? { reason } : {}) });
  }

  getWaitingRoomParticipants(): SvcWaitingParticipant[] {
    return this.#s.waiting;
  }

  // ---- Background and accessibility ----------------------------------------------------------

  /**
   * Shares this user's background effect with the room. The effect itself is applied by the
   * app's media pipeline (canvas or insertable streams); the server only keeps what it is.
   */
  async applyBackgroundEffect(effect: SvcBackgroundEffect): Promise<void> {
    await this.#request('participant.update_state', { background: effect });
  }

  async removeBackgroundEffect(): Promise<void> {
    await this.applyBackgroundEffect({ type: 'none' });
  }

  getCurrentBackgroundEffect(userId?: string): SvcBackgroundEffect {
    const id = userId ?? this.#self?.userId;
    return this.#s.states.find((s) => s.userId === id)?.background ?? { type: 'none' };
  }

  async updateAccessibilitySettings(settings: SvcAccessibilitySettings): Promise<void> {
    await this.#request('participant.update_state', { accessibility: settings });
  }

  getAccessibilitySettings(userId?: string): SvcAccessibilitySettings {
    const id = userId ?? this.#self?.userId;
    return this.#s.states.find((s) => s.userId === id)?.accessibility ?? {};
  }

  // ---- Mirroring (called by SvcClient) ------------------------------------------------------

  #set(patch: Partial<SvcRoomControllerState>) {
    this.#state.set({ ...this.#s, ...patch });
  }

  /**
   * Applies a poll view from an ack. The ack can be older than events already mirrored (votes
   * committed on other nodes reached this socket before the ack): votes only grow and a poll
   * only ends, so the shared fields keep the newer of the two; the caller's own fields (`myVote`,
   * after-vote results) come from the ack.
   */
  #replacePoll(poll: SvcPoll) {
    const polls = this.#s.polls.map((p) => {
      if (p.id !== poll.id) return p;
      const stale = poll.totalVotes < p.totalVotes || (p.endedAt !== null && poll.endedAt === null);
      return stale
        ? { ...p, myVote: poll.myVote, results: p.results ?? poll.results }
        : { ...p, ...poll };
    });
    this.#set({ polls });
  }

  /** @internal A new session's snapshot (join, or rejoin after a failed resume). */
  _snapshot(snapshot: ControllerSnapshot | undefined, seq: number, options: SvcRoomOptions) {
    const ctl = snapshot ?? emptyState();
    if (!ctl.breakoutOf) this.#mainRoomOptions = options;
    this.#state.set({
      ...emptyState(),
      ...ctl,
      seq,
      chat: [...ctl.chat],
      reactions: [],
      pinned: this.#pinned,
    });
  }

  /** @internal The client left the room. */
  _reset() {
    this.#lastTypingSentAt = 0;
    this.#state.set({ ...emptyState(), pinned: this.#pinned });
  }

  /** @internal A room event (seq order, duplicates already dropped). */
  _event(room: SvcRoom, type: string, data: unknown, seq: number, ts: number) {
    const s = this.#s;
    const userId = room.localParticipant.userId;
    let patch: Partial<SvcRoomControllerState> | null = null;
    switch (type) {
      case 'room.settings_changed':
        patch = { settings: (data as ControllerEventData[typeof type]).settings };
        break;
      case 'role.changed': {
        const d = data as ControllerEventData[typeof type];
        let hostUserId = s.hostUserId;
        let coHosts = s.coHosts.filter((u) => u !== d.userId);
        if (d.role === 'host') hostUserId = d.userId;
        else if (hostUserId === d.userId) hostUserId = null;
        if (d.role === 'cohost') coHosts = [...coHosts, d.userId];
        for (const p of room.participants) {
          const isHost = p.userId === hostUserId;
          if (p.isHost !== isHost) room.upsert({ ...p, isHost });
        }
        patch = { hostUserId, coHosts };
        break;
      }
      case 'participant.left': {
        const d = data as { participant: SvcParticipant };
        const gone = d.participant.userId;
        if (room.participants.some((p) => p.userId === gone)) break;
        patch = {
          hostUserId: s.hostUserId === gone ? null : s.hostUserId,
          coHosts: s.coHosts.filter((u) => u !== gone),
          media: s.media.filter((m) => m.userId !== gone),
          states: s.states.filter((x) => x.userId !== gone),
          quality: s.quality.filter((q) => q.userId !== gone),
        };
        break;
      }
      case 'spotlight.changed':
        patch = { spotlight: (data as ControllerEventData[typeof type]).userIds };
        break;
      case 'participant.state_changed': {
        const d = data as ControllerEventData[typeof type];
        patch = { states: [...s.states.filter((x) => x.userId !== d.userId), d] };
        break;
      }
      case 'chat.message': {
        const d = data as ControllerEventData[typeof type];
        patch = { chat: [...s.chat, { seq, ts, text: d.text, from: d.from }] };
        break;
      }
      case 'typing.started': {
        const d = data as ControllerEventData[typeof type];
        patch = { typing: [...s.typing.filter((t) => t.userId !== d.userId), d] };
        break;
      }
      case 'typing.stopped': {
        const d = data as ControllerEventData[typeof type];
        patch = { typing: s.typing.filter((t) => t.userId !== d.userId) };
        break;
      }
      case 'hand.raised': {
        const d = data as ControllerEventData[typeof type];
        patch = { hands: [...s.hands.filter((h) => h.userId !== d.userId), d] };
        break;
      }
      case 'hand.lowered': {
        const d = data as ControllerEventData[typeof type];
        patch = { hands: s.hands.filter((h) => h.userId !== d.userId) };
        break;
      }
      case 'poll.created': {
        const d = data as ControllerEventData[typeof type];
        patch = { polls: [...s.polls, { ...d.poll, myVote: null }] };
        break;
      }
      case 'poll.updated': {
        const d = data as ControllerEventData[typeof type];
        patch = {
          polls: s.polls.map((p) =>
            p.id === d.pollId
              ? {
                  ...p,
                  totalVotes: d.totalVotes,
                  ...(d.results ? { results: updatedResults(p.results, d.results, d.vote) } : {}),
                }
              : p,
          ),
        };
        break;
      }
      case 'poll.ended': {
        const d = data as ControllerEventData[typeof type];
        patch = {
          polls: s.polls.map((p) => (p.id === d.poll.id ? { ...d.poll, myVote: p.myVote } : p)),
        };
        break;
      }
      case 'reaction.batch': {
        const d = data as ControllerEventData[typeof type];
        const receivedAt = Date.now();
        const added = d.reactions.map((r) => ({ ...r, receivedAt }));
        patch = { reactions: [...s.reactions, ...added].slice(-MAX_REACTIONS) };
        break;
      }
      case 'invitation.created': {
        const d = data as ControllerEventData[typeof type];
        patch = { invitations: [...s.invitations, d.invitation] };
        break;
      }
      case 'invitation.updated': {
        const d = data as ControllerEventData[typeof type];
        const open = d.invitation.invitees.some((i) => i.outcome === 'pending');
        const others = s.invitations.filter((i) => i.id !== d.invitationId);
        patch = { invitations: open ? [...others, d.invitation] : others };
        break;
      }
      case 'waiting.joined': {
        const d = data as ControllerEventData[typeof type];
        patch = {
          waiting: [...s.waiting.filter((w) => w.userId !== d.participant.userId), d.participant],
        };
        break;
      }
      case 'waiting.approved':
      case 'waiting.rejected':
      case 'waiting.timed_out':
      case 'waiting.left': {
        const d = data as { userId: string };
        patch = { waiting: s.waiting.filter((w) => w.userId !== d.userId) };
        break;
      }
      case 'breakout.created': {
        const d = data as ControllerEventData[typeof type];
        patch = { breakouts: [...s.breakouts, d.breakout] };
        break;
      }
      case 'breakout.moved': {
        const d = data as ControllerEventData[typeof type];
        patch = {
          breakouts: s.breakouts.map((b) => ({
            ...b,
            userIds:
              b.id === d.breakoutId
                ? [...b.userIds.filter((u) => u !== d.userId), d.userId]
                : b.userIds.filter((u) => u !== d.userId),
          })),
        };
        if (d.userId === userId) this.#onMoved(d.breakoutId, d.roomName);
        break;
      }
      case 'breakout.closing': {
        const d = data as ControllerEventData[typeof type];
        patch = {
          breakouts: s.breakouts.map((b) =>
            d.breakoutIds.includes(b.id) ? { ...b, closesAt: d.closesAt } : b,
          ),
        };
        break;
      }
      case 'breakout.closed': {
        const d = data as ControllerEventData[typeof type];
        patch = { breakouts: s.breakouts.filter((b) => !d.breakoutIds.includes(b.id)) };
        break;
      }
      case 'media.state_changed': {
        const { by: _, ...m } = data as ControllerEventData[typeof type];
        patch = { media: [...s.media.filter((x) => x.userId !== m.userId), m] };
        break;
      }
      case 'media.unmute_requested': {
        const d = data as ControllerEventData[typeof type];
        patch = {
          media: s.media.map((m) =>
            m.userId === d.userId ? { ...m, selfUnmuteAllowed: true } : m,
          ),
        };
        break;
      }
      case 'media.all_muted': {
        const d = data as ControllerEventData[typeof type];
        const byUser = new Map(s.media.map((m) => [m.userId, m]));
        for (const p of room.participants) {
          if (p.userId === d.by) continue;
          byUser.set(p.userId, {
            userId: p.userId,
            cameraEnabled: byUser.get(p.userId)?.cameraEnabled ?? false,
            screenShareEnabled: byUser.get(p.userId)?.screenShareEnabled ?? false,
            microphoneMuted: true,
            selfUnmuteAllowed: d.allowSelfUnmute,
          });
        }
        patch = { media: [...byUser.values()] };
        break;
      }
      case 'media.all_unmute_requested':
        patch = { media: s.media.map((m) => ({ ...m, selfUnmuteAllowed: true })) };
        break;
      case 'network.quality': {
        const d = data as ControllerEventData[typeof type];
        const changed = new Set(d.scores.map((q) => q.userId));
        patch = { quality: [...s.quality.filter((q) => !changed.has(q.userId)), ...d.scores] };
        break;
      }
      case 'breakout.broadcast':
        break;
      default:
        return;
    }
    this.#state.set({ ...s, ...(patch ?? {}), seq });
    notify(this.onEvent, { type, data, seq, ts } as SvcControllerEvent);
  }

  /** @internal The room this client was in was deleted: a closed breakout returns to main. */
  _roomDeleted() {
    const main = this.#mainRoomOptions;
    if (this.#s.breakoutOf && main && this.autoJoinBreakoutRooms) {
      queueMicrotask(() => void this.host._switchRoom(main).catch(() => {}));
    }
  }

  #onMoved(breakoutId: string | null, roomName: string) {
    notify(this.onMovedToBreakoutRoom, breakoutId, roomName);
    const main = this.#mainRoomOptions;
    if (!this.autoJoinBreakoutRooms || !main) return;
    const target = breakoutId === null ? main : { ...main, roomName };
    if (target.roomName === this.host.room?.name) return;
    // A switch that fails (e.g. the breakout room closed meanwhile) falls back to the main room,
    // unless the app connected or disconnected meanwhile.
    queueMicrotask(() => {
      this.host._switchRoom(target).catch((err: SvcError) => {
        if (target !== main && err.code !== 'client_disconnected') {
          void this.host._switchRoom(main).catch(() => {});
        }
      });
    });
  }
}

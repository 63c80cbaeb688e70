import type { RoomSnapshot, SvcTrackInfo } from '@svc/protocol';
import { SvcError } from './errors.ts';
import type { MediaSession, SvcLocalTrack, SvcRemoteTrack } from './media.ts';
import type { SvcParticipant, SvcRoomInfo } from './types.ts';

/** What a room handle needs from its client: a way to send requests on the live channel. */
export interface RoomTransport {
  request(type: string, data: unknown): Promise<Record<string, unknown>>;
}

/**
 * The room the client is connected to (`client.room`). It mirrors what the server sends and is
 * kept up to date by the client; it is replaced by `null` when the client leaves the room.
 */
export class SvcRoom {
  /** The room name. */
  readonly name: string;
  #info: SvcRoomInfo;
  #self: SvcParticipant;
  /** By sid, in join order. */
  readonly #participants = new Map<string, SvcParticipant>();

  /** @internal Built by SvcClient from the server's snapshot. */
  constructor(
    snapshot: RoomSnapshot,
    private readonly transport: RoomTransport,
  ) {
    this.name = snapshot.room.roomName;
    this.#info = snapshot.room;
    this.#self = snapshot.self;
    this.applySnapshot(snapshot);
  }

  /** The room as of the last snapshot or metadata change (`numParticipants` is not live). */
  get info(): SvcRoomInfo {
    return this.#info;
  }

  /** This client's participant. */
  get localParticipant(): SvcParticipant {
    return this.#self;
  }

  /** Everyone in the room, this client included, in join order. */
  get participants(): SvcParticipant[] {
    return [...this.#participants.values()];
  }

  /** Everyone in the room except this client. */
  get remoteParticipants(): SvcParticipant[] {
    return this.participants.filter((p) => p.sid !== this.#self.sid);
  }

  /** @internal Set by SvcClient. */
  media: MediaSession | null = null;

  /** Every published track in the room (this client's included), in the server's order. */
  get tracks(): SvcTrackInfo[] {
    return this.media?.tracks ?? [];
  }

  /** The tracks this client publishes. */
  get localTracks(): SvcLocalTrack[] {
    return this.media?.localTracks ?? [];
  }

  /** Others' tracks, with the received media once subscribed. */
  get remoteTracks(): SvcRemoteTrack[] {
    return this.media?.remoteTracks ?? [];
  }

  /** The participant with this session id, if present. */
  getParticipant(sid: string): SvcParticipant | undefined {
    return this.#participants.get(sid);
  }

  /**
   * Sends a message to everyone in the room (this client receives it too, through
   * `onMessageReceived`, in the room's order). Resolves with the message's `seq` once the server
   * has accepted it; rejects with an SvcError (`not_connected` while reconnecting, `rate_limited`,
   * `invalid_request` for an empty or > 16 KiB message).
   */
  async sendMessage(message: string): Promise<{ seq: number }> {
    const ack = await this.transport.request('message.send', { message });
    return { seq: Number(ack.seq) };
  }

  /**
   * Changes the room's metadata (hosts only: others get `host_required`). Everyone, this client
   * included, is told through `onRoomMetadataChanged`; `info.metadata` follows.
   */
  async updateMetadata(metadata: string): Promise<{ seq: number }> {
    const ack = await this.transport.request('room.update_metadata', { metadata });
    return { seq: Number(ack.seq) };
  }

  /** @internal Sends a request on the room's live channel (used by the room controller). */
  request(type: string, data: unknown): Promise<Record<string, unknown>> {
    return this.transport.request(type, data);
  }

  /** @internal Replaces the whole state; returns who appeared and who disappeared (by sid). */
  applySnapshot(snapshot: RoomSnapshot): { joined: SvcParticipant[]; left: SvcParticipant[] } {
    const before = new Map(this.#participants);
    this.#info = snapshot.room;
    this.#self = snapshot.self;
    this.#participants.clear();
    for (const p of snapshot.participants) this.#participants.set(p.sid, p);
    if (!this.#participants.has(snapshot.self.sid)) {
      this.#participants.set(snapshot.self.sid, snapshot.self);
    }
    const joined = snapshot.participants.filter(
      (p) => !before.has(p.sid) && p.sid !== snapshot.self.sid,
    );
    const left = [...before.values()].filter(
      (p) => !this.#participants.has(p.sid) && p.userId !== snapshot.self.userId,
    );
    return { joined, left };
  }

  /** @internal */
  upsert(participant: SvcParticipant): boolean {
    const isNew = !this.#participants.has(participant.sid);
    this.#participants.set(participant.sid, participant);
    if (participant.sid === this.#self.sid) this.#self = participant;
    return isNew;
  }

  /** @internal */
  remove(sid: string): SvcParticipant | undefined {
    const found = this.#participants.get(sid);
    this.#participants.delete(sid);
    return found;
  }

  /** @internal */
  setMetadata(metadata: string | null) {
    this.#info = { ...this.#info, metadata };
  }
}

/** Used by the room handle when the client has no live channel. */
export const notConnected = () =>
  new SvcError('not_connected', 'Not connected to the room (reconnecting or disconnected)');

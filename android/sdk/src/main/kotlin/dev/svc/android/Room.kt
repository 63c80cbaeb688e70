package dev.svc.android

import dev.svc.android.internal.ParticipantTable
import dev.svc.android.internal.RoomSnapshot

/**
 * The room the client is connected to ([SvcClient.room]). It mirrors what the server sends and is kept
 * up to date by the client; [SvcClient.room] becomes null when the client leaves the room.
 * Reading it is safe from any thread.
 */
public class Room internal constructor(snapshot: RoomSnapshot, private val transport: RoomTransport) {
    /** The room name. */
    public val name: String = snapshot.room.roomName

    @Volatile private var currentInfo: SvcRoomInfo = snapshot.room

    @Volatile private var self: SvcParticipant = snapshot.self

    /** By sid, in join order, packed (every client in a room holds a record per participant). */
    private val byId = ParticipantTable()

    /** By trackId, in publish order. */
    private val trackById = LinkedHashMap<String, SvcTrackInfo>()

    init {
        applySnapshot(snapshot)
    }

    /** The room as of the last snapshot or metadata change (`numParticipants` is not live). */
    public val info: SvcRoomInfo get() = currentInfo

    /** This client's participant. */
    public val localParticipant: SvcParticipant get() = self

    /** Everyone in the room, this client included, in join order. */
    public val participants: List<SvcParticipant> get() = synchronized(byId) { byId.values().map { it.toParticipant() } }

    /** Everyone in the room except this client. */
    public val remoteParticipants: List<SvcParticipant> get() = participants.filter { it.sid != self.sid }

    /** Every published track in the room (this client's included), in publish order. */
    public val tracks: List<SvcTrackInfo> get() = synchronized(byId) { trackById.values.toList() }

    /** The participant with this session id, or null. */
    public fun getParticipant(sid: String): SvcParticipant? = synchronized(byId) { byId[sid] }?.toParticipant()

    /**
     * Sends a message to everyone in the room over the signaling connection (this client receives it too,
     * through [SvcClient.onMessageReceived], in the room's order). Returns the message's `seq` once the
     * server accepted it. Throws [SvcException]: `not_connected` while reconnecting, `rate_limited`,
     * `invalid_request`.
     */
    public suspend fun sendMessage(message: String): Long {
        require(message.length in 1..MAX_TEXT_LENGTH) { "message: 1-16384 characters" }
        return transport.sendMessage(message)
    }

    /** Changes the room's metadata (hosts only: others get `host_required`). Returns the change's `seq`. */
    public suspend fun updateMetadata(metadata: String): Long {
        require(metadata.length <= MAX_TEXT_LENGTH) { "metadata: at most 16384 characters" }
        return transport.updateMetadata(metadata)
    }

    /** Replaces the whole state; returns who appeared and who disappeared (by sid). */
    internal fun applySnapshot(snapshot: RoomSnapshot): Pair<List<SvcParticipant>, List<SvcParticipant>> = synchronized(byId) {
        val before = byId.values().map { it.toParticipant() }
        val beforeSids = before.mapTo(HashSet()) { it.sid }
        currentInfo = snapshot.room
        self = snapshot.self
        byId.clear()
        snapshot.participants.forEach { byId.put(it) }
        if (snapshot.self.sid !in byId) byId.put(snapshot.self)
        trackById.clear()
        snapshot.media.tracks.forEach { trackById[it.trackId] = it }
        val joined = snapshot.participants.filter { it.sid !in beforeSids && it.sid != snapshot.self.sid }
        val left = before.filter { it.sid !in byId && it.userId != snapshot.self.userId }
        joined to left
    }

    /** Adds or replaces a participant; true if it is new. */
    internal fun upsert(participant: SvcParticipant): Boolean = synchronized(byId) {
        val isNew = participant.sid !in byId
        byId.put(participant)
        if (participant.sid == self.sid) self = participant
        isNew
    }

    internal fun remove(sid: String): SvcParticipant? = synchronized(byId) { byId.remove(sid) }?.toParticipant()

    internal fun putTrack(track: SvcTrackInfo): Unit = synchronized(byId) { trackById[track.trackId] = track }

    internal fun removeTrack(trackId: String): Unit = synchronized(byId) { trackById.remove(trackId) }

    internal fun setMetadata(metadata: String?) {
        currentInfo = currentInfo.copy(metadata = metadata)
    }

    /** What a room needs from its client: requests on the live connection. */
    internal interface RoomTransport {
        suspend fun sendMessage(message: String): Long

        suspend fun updateMetadata(metadata: String): Long
    }
}

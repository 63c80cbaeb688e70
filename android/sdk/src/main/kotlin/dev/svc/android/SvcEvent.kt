package dev.svc.android

/**
 * Everything [SvcClient] reports, as one stream ([SvcClient.events]) for coroutine users. The same
 * events reach the handler properties (`onUserJoined`…), in the same order.
 */
public sealed class SvcEvent {
    /** A participant joined the room (never sent for this client itself). */
    public data class UserJoined(
        /** Who joined. */
        val participant: SvcParticipant,
    ) : SvcEvent()

    /**
     * A participant left. [reason] is the server's; null when the client noticed the departure only by
     * comparing snapshots after a full rejoin.
     */
    public data class UserLeft(
        /** Who left. */
        val participant: SvcParticipant,
        /** Why, when the server said. */
        val reason: SvcLeaveReason?,
    ) : SvcEvent()

    /** A message arrived (this client's own included), in the room's order. */
    public data class MessageReceived(
        /** The message. */
        val message: SvcRealtimeMessage,
        /** The sender's participant, or null for a message sent through the REST API or by someone who left. */
        val participant: SvcParticipant?,
    ) : SvcEvent()

    /** [SvcClient.connect] succeeded: the client is in [room]. */
    public data class Connected(
        /** The room. */
        val room: Room,
    ) : SvcEvent()

    /** The client left the room for good. */
    public data class Disconnected(
        /** Why. */
        val reason: SvcDisconnectReason,
    ) : SvcEvent()

    /** The connection dropped; the client is reconnecting. */
    public object Reconnecting : SvcEvent() {
        override fun toString(): String = "Reconnecting"
    }

    /** The client is back in the room after a drop (resumed, or rejoined as a new session). */
    public object Reconnected : SvcEvent() {
        override fun toString(): String = "Reconnected"
    }

    /** The server holds this client until a host joins (`canJoinWithNoHost = false`). */
    public object WaitingForHost : SvcEvent() {
        override fun toString(): String = "WaitingForHost"
    }

    /** A participant published a track (this client's own included); the client subscribes by itself unless autoSubscribe is off. */
    public data class MediaStarted(
        /** The publisher, or null if it is not known (yet). */
        val participant: SvcParticipant?,
        /** The track. */
        val track: SvcTrackInfo,
    ) : SvcEvent()

    /** A track stopped. */
    public data class MediaStopped(
        /** The publisher, or null if it already left. */
        val participant: SvcParticipant?,
        /** The track. */
        val track: SvcTrackInfo,
        /** Why. */
        val reason: SvcTrackStopReason,
    ) : SvcEvent()

    /** A track was muted or unmuted ([SvcTrackInfo.muted]). */
    public data class MediaMuted(
        /** The publisher. */
        val participant: SvcParticipant?,
        /** The track, with its new muted flag. */
        val track: SvcTrackInfo,
    ) : SvcEvent()

    /**
     * Media this client publishes or receives was lost and could not be re-established: a PeerConnection
     * failed 5 times in a row without connecting (`media_failed`), or publishing a source again was refused.
     * The source is no longer published (enable it again to retry), or the track no longer received.
     */
    public data class MediaFailed(
        /** What went wrong, with the server's code where it answered. */
        val error: SvcException,
    ) : SvcEvent()

    /** A host changed the room's metadata. */
    public data class RoomMetadataChanged(
        /** The new metadata. */
        val metadata: String?,
    ) : SvcEvent()
}

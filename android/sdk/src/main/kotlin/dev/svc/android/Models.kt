package dev.svc.android

import kotlinx.serialization.Serializable

/*
 * The wire types of packages/protocol (src/realtime.ts), one Kotlin class each, with the same JSON
 * names. An optional wire field is a nullable property defaulting to null: null is omitted from the
 * JSON and the server applies its default (documented on each property). The conformance vectors in
 * packages/protocol/vectors keep these classes and the TypeScript schemas in step.
 */

/** The kind of room, which decides who may publish what. */
@Serializable
public enum class SvcLiveType {
    /** A call between a few participants. */
    VIDEO_CALL,

    /** A meeting where everyone may publish camera, microphone and screen. */
    VIDEO_CONFERENCE,

    /** Hosts publish, everyone else watches. */
    LIVE_STREAMING,

    /** Audio only. */
    AUDIO_CONFERENCE,
}

/** A room's lifecycle state. */
@Serializable
public enum class SvcRoomStatus {
    /** Nobody in the room (it ends after the server's empty timeout). */
    IDLE,

    /** At least one participant is in the room. */
    ACTIVE,

    /** Deleted or ended after the empty timeout; a new token or createRoom starts a new instance. */
    ENDED,
}

/** Why a participant left a room (`participant.left`), or why the server ended this client's session. */
@Serializable
public enum class SvcLeaveReason {
    /** The participant left (disconnect). */
    LEFT,

    /** The connection dropped and did not come back within the departure grace period. */
    DISCONNECTED,

    /** Another connection with the same userId joined and replaced this one. */
    DUPLICATE_IDENTITY,

    /** The room was deleted. */
    ROOM_DELETED,

    /** The room ended (empty timeout). */
    ROOM_ENDED,

    /** Removed by a host or the server. */
    KICKED,

    /** The access token expired before a waiting participant was admitted. */
    TOKEN_EXPIRED,

    /** The connection broke the protocol. */
    PROTOCOL_VIOLATION,

    /** The server shut down. */
    SERVER_SHUTDOWN,

    /** A host or co-host declined this participant in the waiting room. */
    WAITING_REJECTED,

    /** Nobody admitted this participant from the waiting room in time. */
    WAITING_TIMEOUT,
}

/** A user as the app describes it: who sends a message through the REST API. */
@Serializable
public data class SvcUser(
    /** The app's user id: 1–128 characters without control characters. */
    val userId: String,
    /** The display name: 1–256 characters. */
    val name: String,
    /** A picture of the user, at most 2048 characters. */
    val avatarUrl: String? = null,
) {
    init {
        require(
            userId.length in 1..MAX_ID_LENGTH && userId.none {
                it.isISOControl()
            },
        ) { "userId: 1-128 characters, no control characters" }
        require(name.length in 1..MAX_NAME_LENGTH) { "name: 1-256 characters" }
    }
}

/** Who joins a room: the user plus the host flag. */
@Serializable
public data class SvcParticipantOptions(
    /** The app's user id: 1–128 characters without control characters. One session per userId and room. */
    val userId: String,
    /** The display name: 1–256 characters. */
    val name: String,
    /** A picture of the user. */
    val avatarUrl: String? = null,
    /** A host admits waiting participants and may change the room's metadata; null means false. */
    val isHost: Boolean? = null,
) {
    init {
        require(
            userId.length in 1..MAX_ID_LENGTH && userId.none {
                it.isISOControl()
            },
        ) { "userId: 1-128 characters, no control characters" }
        require(name.length in 1..MAX_NAME_LENGTH) { "name: 1-256 characters" }
    }
}

/** What [SvcClient.connect] and [SvcClient.getToken] need: the room, who joins, and the kind of room. */
@Serializable
public data class SvcRoomOptions(
    /** 1–128 characters of `[A-Za-z0-9._:-]`. The room is created if it does not exist. */
    val roomName: String,
    /** Who joins. */
    val participant: SvcParticipantOptions,
    /** The kind of room (used when this request creates the room). */
    val liveType: SvcLiveType,
    /** When false, this participant waits until a host is in the room; null means the default, true. */
    val canJoinWithNoHost: Boolean? = null,
    /** Metadata for the room when this request creates it (at most 16384 characters); ignored if it exists. */
    val roomMetadata: String? = null,
    /** When false, this participant publishes no media; null means the default, true (the liveType may narrow it). */
    val canPublish: Boolean? = null,
    /** When false, this participant receives no media; null means the default, true. */
    val canSubscribe: Boolean? = null,
) {
    init {
        requireRoomName(roomName)
        require((roomMetadata?.length ?: 0) <= MAX_TEXT_LENGTH) { "roomMetadata: at most 16384 characters" }
    }
}

/** [SvcClient.createRoom]'s argument. */
@Serializable
public data class SvcCreateRoomOptions(
    /** 1–128 characters of `[A-Za-z0-9._:-]`. */
    val roomName: String,
    /** The kind of room. */
    val liveType: SvcLiveType,
    /** 1–10000; null means the server's default (1000 unless configured). */
    val maxParticipants: Int? = null,
    /** Opaque text for the app (JSON is common), at most 16384 characters. */
    val metadata: String? = null,
) {
    init {
        requireRoomName(roomName)
        require(maxParticipants == null || maxParticipants in 1..MAX_PARTICIPANTS) { "maxParticipants: 1-10000" }
        require((metadata?.length ?: 0) <= MAX_TEXT_LENGTH) { "metadata: at most 16384 characters" }
    }
}

/** A room as the server reports it. */
@Serializable
public data class SvcRoomInfo(
    /** The room name. */
    val roomName: String,
    /** The kind of room. */
    val liveType: SvcLiveType,
    /** IDLE, ACTIVE or ENDED. */
    val status: SvcRoomStatus,
    /** The most participants the room admits. */
    val maxParticipants: Int,
    /** How many participants were in the room when this was read. */
    val numParticipants: Int,
    /** Whether participants may join before a host. */
    val canJoinWithNoHost: Boolean,
    /** The app's metadata, or null. */
    val metadata: String?,
    /** ISO 8601 UTC creation time. */
    val createdAt: String,
    /** ISO 8601 UTC end time, once ENDED. */
    val endedAt: String? = null,
)

/** A participant in a room. */
@Serializable
public data class SvcParticipant(
    /** This participant session's id (`PA_…`); a rejoin gets a new one. */
    val sid: String,
    /** The app's user id. */
    val userId: String,
    /** The display name. */
    val name: String,
    /** A picture of the user. */
    val avatarUrl: String? = null,
    /** Whether this participant is a host. */
    val isHost: Boolean,
    /** ISO 8601 UTC join time. */
    val joinedAt: String,
    /** False while its connection is gone but the departure grace period has not ended. */
    val connected: Boolean,
)

/** A listing's page information. */
@Serializable
public data class SvcPageMeta(
    /** Items in all pages. */
    val total: Int,
    /** This page, from 1. */
    val page: Int,
    /** Items per page. */
    val limit: Int,
)

/** One page of [SvcClient.listRooms]. */
@Serializable
public data class SvcRoomPage(
    /** The rooms of this page. */
    val items: List<SvcRoomInfo>,
    /** Page information. */
    val meta: SvcPageMeta,
)

/** [SvcClient.getToken]'s answer. */
@Serializable
public data class SvcTokenResponse(
    /** The access token (a JWT) for the room. */
    val token: String,
    /** The room it admits to. */
    val roomName: String,
    /** The user it names. */
    val userId: String,
    /** The signaling WebSocket address, complete: open it as is. */
    val wsUrl: String,
    /** ISO 8601 UTC expiry. */
    val expiresAt: String,
)

/** [SvcClient.sendRealtimeMessage]'s argument: a message to everyone in a room, sent through the REST API. */
public data class SvcSendRealtimeMessageOptions(
    /** The room. */
    val roomName: String,
    /** The text: 1–16384 characters. */
    val message: String,
    /** Who the message is from, as the receivers will see it. */
    val sender: SvcUser,
) {
    init {
        requireRoomName(roomName)
        require(message.length in 1..MAX_TEXT_LENGTH) { "message: 1-16384 characters" }
    }
}

/** Who sent a received message: the user, and the participant session when it came from a participant. */
@Serializable
public data class SvcMessageSender(
    /** The sender's user id. */
    val userId: String,
    /** The sender's display name. */
    val name: String,
    /** The sender's picture. */
    val avatarUrl: String? = null,
    /** The sender's participant session id; null for messages sent through the REST API. */
    val sid: String? = null,
)

/** A message received in the room, in the room's order. */
public data class SvcRealtimeMessage(
    /** The room. */
    val roomName: String,
    /** The text. */
    val message: String,
    /** Who sent it. */
    val sender: SvcMessageSender,
    /** The room's sequence number: every participant sees messages in increasing seq. */
    val seq: Long,
    /** Server time, ms since the epoch. */
    val ts: Long,
    /** True when sent through the REST API (no participant). */
    val viaApi: Boolean,
)

/** The states of the client's connection to a room. */
public enum class SvcConnectionState {
    /** No room: never connected, after [SvcClient.disconnect], or after the server ended the session. */
    DISCONNECTED,

    /** [SvcClient.connect] is in progress (token, socket, join; or waiting for a host). */
    CONNECTING,

    /** In the room. */
    CONNECTED,

    /** The connection dropped; the client is reconnecting (resume, else a full rejoin). */
    RECONNECTING,

    /** connect was refused, or reconnection gave up; see [SvcClient.lastError]. */
    FAILED,
}

/** Why the client left its room ([SvcClient.onDisconnected]). */
public sealed class SvcDisconnectReason {
    /** The app called [SvcClient.disconnect]. */
    public object ClientDisconnect : SvcDisconnectReason() {
        override fun toString(): String = "CLIENT_DISCONNECT"
    }

    /** Reconnection reached its limit or was refused; [SvcClient.lastError] says why. */
    public object ReconnectFailed : SvcDisconnectReason() {
        override fun toString(): String = "RECONNECT_FAILED"
    }

    /** The server ended the session for [reason] (room deleted, same user joined elsewhere…). */
    public data class Server(
        /** The server's reason. */
        val reason: SvcLeaveReason,
        /** The server's text for it, if any (a kick's reason). */
        val message: String? = null,
    ) : SvcDisconnectReason()
}

internal const val MAX_ID_LENGTH = 128
internal const val MAX_NAME_LENGTH = 256
internal const val MAX_TEXT_LENGTH = 16_384
internal const val MAX_PARTICIPANTS = 10_000
private val ROOM_NAME = Regex("^[A-Za-z0-9._:-]{1,128}$")

internal fun requireRoomName(roomName: String) {
    require(ROOM_NAME.matches(roomName)) { "roomName: 1-128 characters of [A-Za-z0-9._:-]" }
}

package dev.svc.android.internal

import dev.svc.android.MAX_TEXT_LENGTH
import dev.svc.android.SvcIceServer
import dev.svc.android.SvcLeaveReason
import dev.svc.android.SvcMediaPermissions
import dev.svc.android.SvcMessageSender
import dev.svc.android.SvcParticipant
import dev.svc.android.SvcRoomInfo
import dev.svc.android.SvcTrackInfo
import dev.svc.android.SvcTrackSource
import dev.svc.android.SvcTrackStopReason
import dev.svc.android.SvcUser
import kotlinx.serialization.KSerializer
import kotlinx.serialization.Serializable
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.jsonObject

/**
 * The JSON configuration of every wire type: unknown fields are ignored (a newer server may add some),
 * nullable fields without a default are required (`metadata: string | null`), optional fields are
 * omitted when null.
 */
internal val WireJson: Json = Json {
    ignoreUnknownKeys = true
    explicitNulls = true
    encodeDefaults = false
}

private const val MAX_REQUEST_ID = 64
private const val MAX_TYPE = 80
private const val MIN_SDP = 10
private const val MAX_SDP = 32_768

// ---- client → server ------------------------------------------------------------------------------

/** Every client request: `{id, type, data}`. */
@Serializable
internal data class ClientFrame(val id: String, val type: String, val data: JsonElement? = null) {
    init {
        require(id.length in 1..MAX_REQUEST_ID) { "id: 1-64 characters" }
        require(type.length in 1..MAX_TYPE) { "type: 1-80 characters" }
    }
}

/** [ClientFrame] with data of a known type, encoded in one pass. */
@Serializable
internal class TypedClientFrame<T>(val id: String, val type: String, val data: T) {
    init {
        require(id.length in 1..MAX_REQUEST_ID) { "id: 1-64 characters" }
        require(type.length in 1..MAX_TYPE) { "type: 1-80 characters" }
    }
}

/** `session.resume` data. */
@Serializable
internal data class SessionResumeData(val sessionId: String, val resumeToken: String, val lastSeq: Long) {
    init {
        require(sessionId.isNotEmpty() && resumeToken.isNotEmpty() && lastSeq >= 0) {
            "session.resume: sessionId, resumeToken, lastSeq >= 0"
        }
    }
}

/** `message.send` data. */
@Serializable
internal data class MessageSendData(val message: String, val roomName: String? = null) {
    init {
        require(message.length in 1..MAX_TEXT_LENGTH) { "message: 1-16384 characters" }
    }
}

/** `room.update_metadata` data. */
@Serializable
internal data class UpdateMetadataData(val metadata: String)

/** `POST /realtime/rooms/{roomName}/messages` body. */
@Serializable
internal data class SendMessageBody(val message: String, val sender: SvcUser) {
    init {
        require(message.length in 1..MAX_TEXT_LENGTH) { "message: 1-16384 characters" }
    }
}

/** `GET /realtime/rooms/{roomName}/participants` answer. */
@Serializable
internal data class ParticipantList(val items: List<SvcParticipant>)

/** Its 202 answer. */
@Serializable
internal data class SendMessageResult(val seq: Long)

// ---- server → client ------------------------------------------------------------------------------

/** A frame from the server, typed by its `type`. */
internal sealed interface ServerFrame {
    val type: String
}

/** A request succeeded. */
@Serializable
internal data class AckFrame(override val type: String, val id: String, val data: JsonObject? = null) : ServerFrame

/** A request failed, or (without [id]) the server could not read a frame or refused the handshake. */
@Serializable
internal data class ErrorFrame(override val type: String, val id: String? = null, val code: String, val message: String) : ServerFrame

/** The answer to `ping`. */
@Serializable
internal data class PongFrame(override val type: String, val id: String, val ts: Long) : ServerFrame

/** A room event or a session frame: `{type, seq, ts, data}`. */
@Serializable
internal data class EventFrame<D>(override val type: String, val seq: Long, val ts: Long, val data: D) : ServerFrame

/** A frame of a type this client does not know (a newer server): ignored. */
internal data class UnknownFrame(override val type: String, val raw: JsonObject) : ServerFrame

@Serializable
internal data class RoomSnapshot(
    val sessionId: String,
    val resumeToken: String,
    val room: SvcRoomInfo,
    val self: SvcParticipant,
    val participants: List<SvcParticipant>,
    val departureGraceMs: Long,
    val media: MediaSnapshot,
    /** The room controller's state, kept as sent (the controller mirror reads it). */
    val controller: JsonObject? = null,
)

/** The media part of the join snapshot. */
@Serializable
internal data class MediaSnapshot(
    val available: Boolean,
    val iceServers: List<SvcIceServer>,
    val permissions: SvcMediaPermissions,
    val tracks: List<SvcTrackInfo>,
)

/** An ICE candidate as `RTCIceCandidate.toJSON()` gives it. */
@Serializable
internal data class IceCandidate(
    val candidate: String,
    val sdpMid: String? = null,
    val sdpMLineIndex: Int? = null,
    val usernameFragment: String? = null,
)

@Serializable
internal data class MediaTrackData(val track: SvcTrackInfo)

@Serializable
internal data class MediaStoppedData(val track: SvcTrackInfo, val reason: SvcTrackStopReason)

@Serializable
internal data class MediaMutedData(val track: SvcTrackInfo, val by: String)

/** `media.trickle` both ways: a candidate (null: gathering complete) for the PeerConnection [id]. */
@Serializable
internal data class MediaTrickleData(val id: String, val candidate: IceCandidate?) {
    init {
        require(id.length in 1..MAX_REQUEST_ID) { "id: 1-64 characters" }
    }
}

/** `media.ended` (server → client): the engine hung up the subscription [id] to [trackId]. */
@Serializable
internal data class MediaEndedData(val id: String, val trackId: String)

@Serializable
internal data class MediaPublishData(val source: SvcTrackSource, val sdp: String) {
    init {
        require(sdp.length in MIN_SDP..MAX_SDP) { "sdp: 10-32768 characters" }
    }
}

@Serializable
internal data class MediaPublishAck(val trackId: String, val sdp: String)

@Serializable
internal data class MediaTrackIdData(val trackId: String) {
    init {
        require(trackId.length in 1..MAX_REQUEST_ID) { "trackId: 1-64 characters" }
    }
}

@Serializable
internal data class MediaMuteData(val trackId: String, val muted: Boolean) {
    init {
        require(trackId.length in 1..MAX_REQUEST_ID) { "trackId: 1-64 characters" }
    }
}

@Serializable
internal data class MediaSubscribeAck(val subscriptionId: String, val trackId: String, val sdp: String)

@Serializable
internal data class MediaAnswerData(val subscriptionId: String, val sdp: String) {
    init {
        require(subscriptionId.length in 1..MAX_REQUEST_ID) { "subscriptionId: 1-64 characters" }
        require(sdp.length in MIN_SDP..MAX_SDP) { "sdp: 10-32768 characters" }
    }
}

@Serializable
internal data class MediaSubscriptionIdData(val subscriptionId: String) {
    init {
        require(subscriptionId.length in 1..MAX_REQUEST_ID) { "subscriptionId: 1-64 characters" }
    }
}

@Serializable
internal data class SessionResumedData(
    val sessionId: String,
    val replayed: Int,
    /** The media subscriptions the server still holds for the session (the others are subscribed again). */
    val subscriptions: List<String>? = null,
)

@Serializable
internal data class SessionWaitingData(val reason: String)

@Serializable
internal data class SessionClosedData(val reason: String, val code: String, val closeCode: Int, val message: String? = null)

@Serializable
internal data class ParticipantJoinedData(val participant: SvcParticipant)

@Serializable
internal data class ParticipantLeftData(val participant: SvcParticipant, val reason: SvcLeaveReason)

@Serializable
internal data class MessageReceivedData(val message: String, val sender: SvcMessageSender, val viaApi: Boolean)

@Serializable
internal data class MetadataChangedData(val metadata: String?)

@Serializable
internal data class RoomClosedData(val reason: String)

@Serializable
internal data class AppFrom(val sid: String, val userId: String)

@Serializable
internal data class AppEventData(val from: AppFrom, val payload: JsonElement)

/** The serializer of each known server frame type (the `data` part differs per type). */
private fun serializerOf(type: String): KSerializer<out ServerFrame>? = when {
    type == "ack" -> AckFrame.serializer()
    type == "error" -> ErrorFrame.serializer()
    type == "pong" -> PongFrame.serializer()
    type == "session.joined" -> EventFrame.serializer(RoomSnapshot.serializer())
    type == "session.resumed" -> EventFrame.serializer(SessionResumedData.serializer())
    type == "session.waiting" -> EventFrame.serializer(SessionWaitingData.serializer())
    type == "session.admitted" -> EventFrame.serializer(JsonObject.serializer())
    type == "session.closed" -> EventFrame.serializer(SessionClosedData.serializer())
    type == "participant.joined" -> EventFrame.serializer(ParticipantJoinedData.serializer())
    type == "participant.left" -> EventFrame.serializer(ParticipantLeftData.serializer())
    type == "message.received" -> EventFrame.serializer(MessageReceivedData.serializer())
    type == "room.metadata_changed" -> EventFrame.serializer(MetadataChangedData.serializer())
    type == "room.deleted" || type == "room.ended" -> EventFrame.serializer(RoomClosedData.serializer())
    type == "media.started" -> EventFrame.serializer(MediaTrackData.serializer())
    type == "media.stopped" -> EventFrame.serializer(MediaStoppedData.serializer())
    type == "media.muted" -> EventFrame.serializer(MediaMutedData.serializer())
    type == "media.trickle" -> EventFrame.serializer(MediaTrickleData.serializer())
    type == "media.ended" -> EventFrame.serializer(MediaEndedData.serializer())
    type.startsWith("app.") -> EventFrame.serializer(AppEventData.serializer())
    type in CONTROLLER_EVENTS -> EventFrame.serializer(CONTROLLER_EVENTS.getValue(type))
    else -> null
}

/** Reads one server frame; throws [SerializationException] (or IllegalArgumentException) when it is not the protocol. */
internal fun decodeServerFrame(text: String): ServerFrame {
    // The server writes `type` first: then the frame decodes in one pass, straight from its text.
    leadingType(text)?.let(::serializerOf)?.let { return WireJson.decodeFromString(it, text) }
    val obj = WireJson.parseToJsonElement(text).jsonObject
    val type = (obj["type"] as? JsonPrimitive)?.takeIf { it.isString }?.content
        ?: throw SerializationException("a server frame needs a string 'type'")
    val serializer = serializerOf(type) ?: return UnknownFrame(type, obj)
    return WireJson.decodeFromJsonElement(serializer, obj)
}

private const val TYPE_PREFIX = "{\"type\":\""

/** The `type` of a frame that starts with it as a plain string (`{"type":"…"`), else null. */
private fun leadingType(text: String): String? {
    if (!text.startsWith(TYPE_PREFIX)) return null
    val end = text.indexOf('"', TYPE_PREFIX.length)
    if (end < 0 || (TYPE_PREFIX.length until end).any { text[it] == '\\' }) return null
    return text.substring(TYPE_PREFIX.length, end)
}

/** Writes a server frame back (the conformance tests prove decode → encode gives the same JSON). */
@Suppress("UNCHECKED_CAST")
internal fun encodeServerFrame(frame: ServerFrame): JsonElement {
    if (frame is UnknownFrame) return frame.raw
    val serializer = serializerOf(frame.type) as KSerializer<ServerFrame>
    return WireJson.encodeToJsonElement(serializer, frame)
}

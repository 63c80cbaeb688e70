package dev.svc.android.internal

import dev.svc.android.MAX_CHAT_LENGTH
import dev.svc.android.MAX_ID_LENGTH
import dev.svc.android.SvcAccessibilitySettings
import dev.svc.android.SvcBackgroundEffect
import dev.svc.android.SvcBreakoutOf
import dev.svc.android.SvcBreakoutRoom
import dev.svc.android.SvcCallInvitationOptions
import dev.svc.android.SvcChatMessage
import dev.svc.android.SvcChatSender
import dev.svc.android.SvcInvitation
import dev.svc.android.SvcInvitationOutcome
import dev.svc.android.SvcInvitationSender
import dev.svc.android.SvcMediaState
import dev.svc.android.SvcNetworkQuality
import dev.svc.android.SvcParticipantState
import dev.svc.android.SvcPoll
import dev.svc.android.SvcPollResults
import dev.svc.android.SvcPollVisibility
import dev.svc.android.SvcPollVote
import dev.svc.android.SvcRaisedHand
import dev.svc.android.SvcRoomRole
import dev.svc.android.SvcRoomSettings
import dev.svc.android.SvcTypingIndicator
import dev.svc.android.SvcWaitingParticipant
import kotlinx.serialization.KSerializer
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.JsonObject

/*
 * The room controller's frames (packages/protocol/src/controller.ts): the `data` of each request this
 * library writes, the `data` of each controller room event, and the controller part of the snapshot.
 */

private const val MAX_CONTROLLER_ID = 64
private const val MAX_REASON = 256
private const val MAX_POLL_QUESTION = 500
private const val MAX_POLL_OPTION = 200
private const val MIN_POLL_OPTIONS = 2
private const val MAX_POLL_OPTIONS = 10
private const val MAX_POLL_OPTION_INDEX = 99
private const val MAX_EMOJI = 32
private const val MAX_BREAKOUT_NAME = 100
private const val MAX_BREAKOUT_USERS = 1000
private const val MAX_COUNTDOWN_MS = 300_000L

private fun requireUserId(userId: String) = require(userId.length in 1..MAX_ID_LENGTH) { "userId: 1-128 characters" }

private fun requireId(name: String, id: String) = require(id.length in 1..MAX_CONTROLLER_ID) { "$name: 1-64 characters" }

// ---- Requests ---------------------------------------------------------------------------------------

/** `{}`: requests without data. */
@Serializable
internal class EmptyData

/** `room.update_settings`. */
@Serializable
internal data class UpdateSettingsData(val waitingRoom: Boolean? = null, val hostSuccession: Boolean? = null)

/** Every request that names one user. */
@Serializable
internal data class TargetData(val userId: String) {
    init {
        requireUserId(userId)
    }
}

/** `hand.lower`: this user's hand, or another's. */
@Serializable
internal data class OptionalTargetData(val userId: String? = null) {
    init {
        userId?.let(::requireUserId)
    }
}

/** `participant.kick`, `waiting.reject`. */
@Serializable
internal data class TargetReasonData(val userId: String, val reason: String? = null) {
    init {
        requireUserId(userId)
        require(reason == null || reason.length <= MAX_REASON) { "reason: at most 256 characters" }
    }
}

/** `participant.update_state`. */
@Serializable
internal data class UpdateStateData(val background: SvcBackgroundEffect? = null, val accessibility: SvcAccessibilitySettings? = null)

/** `chat.send`. */
@Serializable
internal data class ChatSendData(val text: String) {
    init {
        require(text.length in 1..MAX_CHAT_LENGTH) { "text: 1-4096 characters" }
    }
}

/** `poll.create`. */
@Serializable
internal data class PollCreateData(
    val question: String,
    val options: List<String>,
    val anonymous: Boolean? = null,
    val visibility: SvcPollVisibility? = null,
) {
    init {
        require(question.length in 1..MAX_POLL_QUESTION) { "question: 1-500 characters" }
        require(options.size in MIN_POLL_OPTIONS..MAX_POLL_OPTIONS) { "options: 2-10" }
        require(options.all { it.length in 1..MAX_POLL_OPTION }) { "option: 1-200 characters" }
    }
}

/** `poll.respond`. */
@Serializable
internal data class PollRespondData(val pollId: String, val option: Int) {
    init {
        requireId("pollId", pollId)
        require(option in 0..MAX_POLL_OPTION_INDEX) { "option: 0-99" }
    }
}

/** `poll.end`, `poll.get`. */
@Serializable
internal data class PollIdData(val pollId: String) {
    init {
        requireId("pollId", pollId)
    }
}

/** `reaction.send`. */
@Serializable
internal data class ReactionSendData(val emoji: String) {
    init {
        require(emoji.length in 1..MAX_EMOJI) { "emoji: 1-32 characters" }
    }
}

/** `invitation.accept`, `invitation.cancel`. */
@Serializable
internal data class InvitationIdData(val invitationId: String) {
    init {
        requireId("invitationId", invitationId)
    }
}

/** `invitation.decline`. */
@Serializable
internal data class InvitationDeclineData(val invitationId: String, val busy: Boolean? = null) {
    init {
        requireId("invitationId", invitationId)
    }
}

/** `breakout.create`. */
@Serializable
internal data class BreakoutCreateData(val name: String, val userIds: List<String>) {
    init {
        require(name.length in 1..MAX_BREAKOUT_NAME) { "name: 1-100 characters" }
        require(userIds.size <= MAX_BREAKOUT_USERS) { "userIds: at most 1000" }
        userIds.forEach(::requireUserId)
    }
}

/** `breakout.move` (`breakoutId` null: back to the main room; always sent). */
@Serializable
internal data class BreakoutMoveData(val userId: String, val breakoutId: String?) {
    init {
        requireUserId(userId)
        breakoutId?.let { requireId("breakoutId", it) }
    }
}

/** `breakout.join`. */
@Serializable
internal data class BreakoutJoinData(val breakoutId: String) {
    init {
        requireId("breakoutId", breakoutId)
    }
}

/** `breakout.close`. */
@Serializable
internal data class BreakoutCloseData(val breakoutId: String? = null, val countdownMs: Long? = null) {
    init {
        breakoutId?.let { requireId("breakoutId", it) }
        require(countdownMs == null || countdownMs in 0..MAX_COUNTDOWN_MS) { "countdownMs: 0-300000" }
    }
}

/** `breakout.broadcast`. */
@Serializable
internal data class BreakoutBroadcastData(val message: String) {
    init {
        require(message.length in 1..MAX_CHAT_LENGTH) { "message: 1-4096 characters" }
    }
}

/** `media.update_self`. */
@Serializable
internal data class MediaUpdateSelfData(
    val microphoneMuted: Boolean? = null,
    val cameraEnabled: Boolean? = null,
    val screenShareEnabled: Boolean? = null,
)

/** `media.mute_all`. */
@Serializable
internal data class MuteAllData(val allowSelfUnmute: Boolean? = null)

/** The `data` type this library writes for each controller request. */
internal val CONTROLLER_REQUESTS: Map<String, KSerializer<*>> = mapOf(
    "room.update_settings" to UpdateSettingsData.serializer(),
    "role.transfer_host" to TargetData.serializer(),
    "role.promote" to TargetData.serializer(),
    "role.demote" to TargetData.serializer(),
    "participant.spotlight" to TargetData.serializer(),
    "participant.unspotlight" to TargetData.serializer(),
    "participant.kick" to TargetReasonData.serializer(),
    "participant.update_state" to UpdateStateData.serializer(),
    "chat.send" to ChatSendData.serializer(),
    "typing.start" to EmptyData.serializer(),
    "typing.stop" to EmptyData.serializer(),
    "hand.raise" to EmptyData.serializer(),
    "hand.lower" to OptionalTargetData.serializer(),
    "poll.create" to PollCreateData.serializer(),
    "poll.respond" to PollRespondData.serializer(),
    "poll.end" to PollIdData.serializer(),
    "poll.get" to PollIdData.serializer(),
    "reaction.send" to ReactionSendData.serializer(),
    "invitation.send" to SvcCallInvitationOptions.serializer(),
    "invitation.accept" to InvitationIdData.serializer(),
    "invitation.decline" to InvitationDeclineData.serializer(),
    "invitation.cancel" to InvitationIdData.serializer(),
    "waiting.approve" to TargetData.serializer(),
    "waiting.reject" to TargetReasonData.serializer(),
    "breakout.create" to BreakoutCreateData.serializer(),
    "breakout.move" to BreakoutMoveData.serializer(),
    "breakout.join" to BreakoutJoinData.serializer(),
    "breakout.close" to BreakoutCloseData.serializer(),
    "breakout.broadcast" to BreakoutBroadcastData.serializer(),
    "media.update_self" to MediaUpdateSelfData.serializer(),
    "media.mute_participant" to TargetData.serializer(),
    "media.request_unmute" to TargetData.serializer(),
    "media.mute_all" to MuteAllData.serializer(),
    "media.unmute_all" to EmptyData.serializer(),
)

// ---- Snapshot and events ----------------------------------------------------------------------------

/** The controller part of `session.joined` (the state as of the snapshot's `seq`). */
@Serializable
internal data class ControllerSnapshot(
    val settings: SvcRoomSettings,
    val hostUserId: String?,
    val coHosts: List<String>,
    val spotlight: List<String>,
    val hands: List<SvcRaisedHand>,
    val typing: List<SvcTypingIndicator>,
    val chat: List<SvcChatMessage>,
    val polls: List<SvcPoll>,
    val waiting: List<SvcWaitingParticipant>,
    val invitations: List<SvcInvitation>,
    val breakouts: List<SvcBreakoutRoom>,
    val breakoutOf: SvcBreakoutOf?,
    val media: List<SvcMediaState>,
    val states: List<SvcParticipantState>,
    val quality: List<SvcNetworkQuality>,
)

@Serializable
internal data class SettingsChangedData(val settings: SvcRoomSettings, val by: String)

@Serializable
internal data class RoleChangedData(
    val userId: String,
    val role: SvcRoomRole,
    val previousRole: SvcRoomRole,
    val by: String?,
    val reason: String,
) {
    init {
        require(reason in ROLE_REASONS) { "reason: one of $ROLE_REASONS" }
    }
}

private val ROLE_REASONS = setOf("TRANSFER", "PROMOTED", "DEMOTED", "SUCCESSION", "JOINED")
private val TYPING_REASONS = setOf("STOPPED", "EXPIRED", "LEFT")

@Serializable
internal data class SpotlightChangedData(val userIds: List<String>, val by: String)

@Serializable
internal data class ChatMessageData(val text: String, val from: SvcChatSender)

@Serializable
internal data class TypingStoppedData(val userId: String, val reason: String) {
    init {
        require(reason in TYPING_REASONS) { "reason: one of $TYPING_REASONS" }
    }
}

@Serializable
internal data class HandLoweredData(val userId: String, val by: String?)

@Serializable
internal data class PollData(val poll: SvcPoll)

/** One more answer: with `live` results, the counts (results without votes) and the new vote unless anonymous. */
@Serializable
internal data class PollUpdatedData(
    val pollId: String,
    val totalVotes: Int,
    val results: SvcPollResults? = null,
    val vote: SvcPollVote? = null,
)

@Serializable
internal data class Reaction(val userId: String, val emoji: String, val ts: Long)

@Serializable
internal data class ReactionBatchData(val reactions: List<Reaction>)

@Serializable
internal data class InvitationCreatedData(val invitation: SvcInvitation)

@Serializable
internal data class InvitationUpdatedData(
    val invitationId: String,
    val userId: String?,
    val outcome: SvcInvitationOutcome,
    val invitation: SvcInvitation,
)

@Serializable
internal data class WaitingJoinedData(val participant: SvcWaitingParticipant)

@Serializable
internal data class WaitingDecidedData(val userId: String, val by: String)

@Serializable
internal data class WaitingRejectedData(val userId: String, val by: String, val reason: String? = null)

/** `waiting.timed_out`, `waiting.left`. */
@Serializable
internal data class WaitingGoneData(val userId: String)

@Serializable
internal data class BreakoutCreatedData(val breakout: SvcBreakoutRoom)

@Serializable
internal data class BreakoutMovedData(val userId: String, val breakoutId: String?, val roomName: String, val by: String)

@Serializable
internal data class BreakoutClosingData(val breakoutIds: List<String>, val closesAt: Long)

@Serializable
internal data class BreakoutClosedData(val breakoutIds: List<String>)

@Serializable
internal data class BreakoutBroadcastEventData(val message: String, val from: SvcInvitationSender)

@Serializable
internal data class MediaStateChangedData(
    val userId: String,
    val microphoneMuted: Boolean,
    val cameraEnabled: Boolean,
    val screenShareEnabled: Boolean,
    val selfUnmuteAllowed: Boolean,
    val by: String?,
) {
    fun state() = SvcMediaState(userId, microphoneMuted, cameraEnabled, screenShareEnabled, selfUnmuteAllowed)
}

@Serializable
internal data class UnmuteRequestedData(val userId: String, val by: String)

@Serializable
internal data class AllMutedData(val allowSelfUnmute: Boolean, val by: String)

@Serializable
internal data class ByData(val by: String)

@Serializable
internal data class NetworkQualityData(val scores: List<SvcNetworkQuality>)

/** The `data` type of each controller room event. */
internal val CONTROLLER_EVENTS: Map<String, KSerializer<*>> = mapOf(
    "room.settings_changed" to SettingsChangedData.serializer(),
    "role.changed" to RoleChangedData.serializer(),
    "spotlight.changed" to SpotlightChangedData.serializer(),
    "participant.state_changed" to SvcParticipantState.serializer(),
    "chat.message" to ChatMessageData.serializer(),
    "typing.started" to SvcTypingIndicator.serializer(),
    "typing.stopped" to TypingStoppedData.serializer(),
    "hand.raised" to SvcRaisedHand.serializer(),
    "hand.lowered" to HandLoweredData.serializer(),
    "poll.created" to PollData.serializer(),
    "poll.updated" to PollUpdatedData.serializer(),
    "poll.ended" to PollData.serializer(),
    "reaction.batch" to ReactionBatchData.serializer(),
    "invitation.created" to InvitationCreatedData.serializer(),
    "invitation.updated" to InvitationUpdatedData.serializer(),
    "waiting.joined" to WaitingJoinedData.serializer(),
    "waiting.approved" to WaitingDecidedData.serializer(),
    "waiting.rejected" to WaitingRejectedData.serializer(),
    "waiting.timed_out" to WaitingGoneData.serializer(),
    "waiting.left" to WaitingGoneData.serializer(),
    "breakout.created" to BreakoutCreatedData.serializer(),
    "breakout.moved" to BreakoutMovedData.serializer(),
    "breakout.closing" to BreakoutClosingData.serializer(),
    "breakout.closed" to BreakoutClosedData.serializer(),
    "breakout.broadcast" to BreakoutBroadcastEventData.serializer(),
    "media.state_changed" to MediaStateChangedData.serializer(),
    "media.unmute_requested" to UnmuteRequestedData.serializer(),
    "media.all_muted" to AllMutedData.serializer(),
    "media.all_unmute_requested" to ByData.serializer(),
    "network.quality" to NetworkQualityData.serializer(),
)

/** The snapshot's controller part, or null when the server sent none. */
internal fun controllerSnapshotOf(json: JsonObject?): ControllerSnapshot? =
    json?.let { WireJson.decodeFromJsonElement(ControllerSnapshot.serializer(), it) }

package dev.svc.android

import kotlinx.serialization.SerialName
import kotlinx.serialization.Serializable

/*
 * The room controller's state types: packages/protocol/src/controller.ts, one Kotlin class each, with
 * the same JSON. packages/protocol/vectors/controller-*.json keep them in step (ConformanceTest).
 */

/** A participant's role in a room: one host at most, any number of co-hosts. */
@Serializable
public enum class SvcRoomRole {
    /** The room's host (at most one). */
    @SerialName("host")
    HOST,

    /** A co-host: moderates like the host, but does not change roles. */
    @SerialName("cohost")
    COHOST,

    /** Everyone else. */
    @SerialName("participant")
    PARTICIPANT,
}

/** Room settings a host changes ([SvcRoomController.updateRoomSettings]). */
@Serializable
public data class SvcRoomSettings(
    /** Joiners who are not host or co-host wait until a host or co-host approves them. */
    val waitingRoom: Boolean,
    /** When the host leaves for good, a co-host (else the earliest participant) takes over. */
    val hostSuccession: Boolean,
)

/** Who sent a chat message. */
@Serializable
public data class SvcChatSender(
    /** The sender's user id. */
    val userId: String,
    /** The sender's display name. */
    val name: String,
    /** The sender's session id. */
    val sid: String,
)

/** A chat message, in the room's order. */
@Serializable
public data class SvcChatMessage(
    /** The room `seq` of the message: the order everyone sees. */
    val seq: Long,
    /** Server time, ms since the epoch. */
    val ts: Long,
    /** The text. */
    val text: String,
    /** The sender. */
    val from: SvcChatSender,
)

/** A raised hand; hands are listed in server order. */
@Serializable
public data class SvcRaisedHand(
    /** Whose hand. */
    val userId: String,
    /** Server time of the raise. */
    val raisedAt: Long,
)

/** Someone is typing. */
@Serializable
public data class SvcTypingIndicator(
    /** Who. */
    val userId: String,
    /** Server time after which the indicator is gone unless refreshed. */
    val expiresAt: Long,
)

/** Results visibility of a poll. */
@Serializable
public enum class SvcPollVisibility {
    /** Everyone sees results at once. */
    @SerialName("live")
    LIVE,

    /** Each voter sees them after voting. */
    @SerialName("after_vote")
    AFTER_VOTE,

    /** Everyone sees them when the poll ends. */
    @SerialName("after_end")
    AFTER_END,
}

/** Who chose what in a poll that is not anonymous. */
@Serializable
public data class SvcPollVote(
    /** The voter. */
    val userId: String,
    /** The chosen option's index. */
    val option: Int,
)

/** A poll's results. */
@Serializable
public data class SvcPollResults(
    /** Votes per option, in option order. */
    val counts: List<Int>,
    /** Every vote. */
    val totalVotes: Int,
    /** Who chose what; absent for anonymous polls. */
    val votes: List<SvcPollVote>? = null,
)

/** A poll. */
@Serializable
public data class SvcPoll(
    /** Its id. */
    val id: String,
    /** The question. */
    val question: String,
    /** The options (2–10). */
    val options: List<String>,
    /** Voters' user ids are not kept. */
    val anonymous: Boolean,
    /** Who sees results when. */
    val visibility: SvcPollVisibility,
    /** The creator's user id. */
    val createdBy: String,
    /** Server time of creation. */
    val createdAt: Long,
    /** Server time of its end, or null while it runs. */
    val endedAt: Long?,
    /** Answers so far. */
    val totalVotes: Int,
    /** Present when this user may see them (visibility rules). */
    val results: SvcPollResults? = null,
    /** The option this user chose, if known (snapshots, answers and `getPoll(refresh = true)`). */
    val myVote: Int? = null,
)

/** How an invitation ended for an invitee (or for everyone: [CANCELLED]). */
@Serializable
public enum class SvcInvitationOutcome {
    /** Still ringing. */
    @SerialName("pending")
    PENDING,

    /** Accepted. */
    @SerialName("accepted")
    ACCEPTED,

    /** Declined. */
    @SerialName("declined")
    DECLINED,

    /** Declined as busy (in another call). */
    @SerialName("busy")
    BUSY,

    /** The inviter cancelled it. */
    @SerialName("cancelled")
    CANCELLED,

    /** Nobody answered in time (the server's timeout). */
    @SerialName("timed_out")
    TIMED_OUT,
}

/** Who sent an invitation. */
@Serializable
public data class SvcInvitationSender(
    /** The inviter's user id. */
    val userId: String,
    /** The inviter's name. */
    val name: String,
)

/** One invitee of an invitation and its outcome. */
@Serializable
public data class SvcInvitee(
    /** The invitee's user id. */
    val userId: String,
    /** Its outcome so far. */
    val outcome: SvcInvitationOutcome,
)

/** A call invitation (ringing) of this room. */
@Serializable
public data class SvcInvitation(
    /** Its id. */
    val id: String,
    /** The room the invitees are asked to join. */
    val roomName: String,
    /** The inviter. */
    val from: SvcInvitationSender,
    /** Outcome per invitee. */
    val invitees: List<SvcInvitee>,
    /** Server time of creation. */
    val createdAt: Long,
    /** Server time at which the server times it out. */
    val expiresAt: Long,
    /** The app's text. */
    val metadata: String? = null,
)

/** [SvcRoomController.sendCallInvitation] options. */
@Serializable
public data class SvcCallInvitationOptions(
    /** Who to ring (1–50 user ids). */
    val userIds: List<String>,
    /** Ring time in ms (server default 30000; bounded to 5000–180000 by the server). */
    val timeoutMs: Long? = null,
    /** Free text for the app (e.g. JSON with the call's topic), at most 4096 characters. */
    val metadata: String? = null,
) {
    init {
        require(userIds.size in 1..MAX_INVITEES && userIds.all { it.length in 1..MAX_ID_LENGTH }) { "userIds: 1-50 user ids" }
        require(timeoutMs == null || timeoutMs in 1..MAX_INVITATION_TIMEOUT_MS) { "timeoutMs: 1-3600000" }
        require(metadata == null || metadata.length <= MAX_CHAT_LENGTH) { "metadata: at most 4096 characters" }
    }
}

/** Someone waiting for approval in the waiting room. */
@Serializable
public data class SvcWaitingParticipant(
    /** The user id. */
    val userId: String,
    /** The display name. */
    val name: String,
    /** A picture of the user. */
    val avatarUrl: String? = null,
    /** Server time since which it waits. */
    val since: Long,
)

/** A breakout room of the main room. */
@Serializable
public data class SvcBreakoutRoom(
    /** Its id. */
    val id: String,
    /** Its display name. */
    val name: String,
    /** Its own room name (`<main room>.br-<id>`). */
    val roomName: String,
    /** Assigned participants (user ids). */
    val userIds: List<String>,
    /** Set while it is closing: when it closes (server time). */
    val closesAt: Long?,
)

/** In a breakout room: its main room. */
@Serializable
public data class SvcBreakoutOf(
    /** The main room's name. */
    val roomName: String,
    /** This breakout room's id. */
    val breakoutId: String,
)

/** A participant's microphone, camera and screen share as the room knows them. */
@Serializable
public data class SvcMediaState(
    /** Whose. */
    val userId: String,
    /** Microphone muted. */
    val microphoneMuted: Boolean,
    /** Camera on. */
    val cameraEnabled: Boolean,
    /** Screen share on. */
    val screenShareEnabled: Boolean,
    /** False after a host muted this participant with `allowSelfUnmute = false`. */
    val selfUnmuteAllowed: Boolean,
)

/**
 * A participant's background effect, shared so others can show it ("blurred"). The library does not
 * process video: see [SvcRoomController.applyBackgroundEffect].
 */
@Serializable
public sealed class SvcBackgroundEffect {
    /** No effect. */
    @Serializable
    @SerialName("none")
    public object None : SvcBackgroundEffect() {
        override fun toString(): String = "None"
    }

    /** A blurred background. */
    @Serializable
    @SerialName("blur")
    public data class Blur(
        /** 0–1; null: the app's default. */
        val strength: Double? = null,
    ) : SvcBackgroundEffect() {
        init {
            require(strength == null || strength in 0.0..1.0) { "strength: 0-1" }
        }
    }

    /** An image instead of the background. */
    @Serializable
    @SerialName("image")
    public data class Image(
        /** The image's address (1–2048 characters). */
        val url: String,
    ) : SvcBackgroundEffect() {
        init {
            require(url.length in 1..MAX_URL_LENGTH) { "url: 1-2048 characters" }
        }
    }
}

/** Accessibility settings the room may need to know (captions on, a sign-language interpreter…). */
@Serializable
public data class SvcAccessibilitySettings(
    /** Captions wanted. */
    val captions: Boolean? = null,
    /** Captions' language (BCP 47, at most 35 characters). */
    val captionsLanguage: String? = null,
    /** Sign language used or wanted. */
    val signLanguage: Boolean? = null,
    /** High contrast display. */
    val highContrast: Boolean? = null,
    /** A screen reader is on. */
    val screenReader: Boolean? = null,
) {
    init {
        require(captionsLanguage == null || captionsLanguage.length <= MAX_LANGUAGE_LENGTH) { "captionsLanguage: at most 35 characters" }
    }
}

/** A participant's own shared state. */
@Serializable
public data class SvcParticipantState(
    /** Whose. */
    val userId: String,
    /** The background effect. */
    val background: SvcBackgroundEffect,
    /** The accessibility settings. */
    val accessibility: SvcAccessibilitySettings,
)

/** A participant's network quality, measured by the server. */
@Serializable
public data class SvcNetworkQuality(
    /** Whose. */
    val userId: String,
    /** 0 (lost) … 5 (excellent), from the signaling round-trip time. */
    val quality: Int,
    /** The last measured round trip in ms; null when the participant is not connected. */
    val rttMs: Long?,
)

/** A reaction as received, kept for [SvcRoomController.getRecentEmojiReactions]. */
public data class SvcEmojiReaction(
    /** Who reacted. */
    val userId: String,
    /** A reaction name (`like`, `clap`…) or one emoji. */
    val emoji: String,
    /** Server time of the reaction. */
    val ts: Long,
    /** This device's time when it arrived (recency is judged on it: clocks differ). */
    val receivedAt: Long,
)

/** A controller event as the app sees it: the room event's type, its data as sent, and its place in the order. */
public data class SvcControllerEvent(
    /** The room event's type (`hand.raised`, `poll.created`…; docs/realtime-protocol.md §9). */
    val type: String,
    /** Its data as the server sent it (JSON). */
    val data: String,
    /** Its place in the room's order. */
    val seq: Long,
    /** Server time. */
    val ts: Long,
)

/** Everything the controller mirrors; replaced as a whole on every change. */
public data class SvcRoomControllerState(
    /** The room's last `seq` applied. */
    val seq: Long = 0,
    /** The room's settings. */
    val settings: SvcRoomSettings = SvcRoomSettings(waitingRoom = false, hostSuccession = true),
    /** The host's user id, or null. */
    val hostUserId: String? = null,
    /** Co-hosts in promotion order. */
    val coHosts: List<String> = emptyList(),
    /** Spotlighted user ids. */
    val spotlight: List<String> = emptyList(),
    /** Raised hands in server order. */
    val hands: List<SvcRaisedHand> = emptyList(),
    /** Who is typing. */
    val typing: List<SvcTypingIndicator> = emptyList(),
    /** The chat: the server's history at join, then every message since, oldest first. */
    val chat: List<SvcChatMessage> = emptyList(),
    /** Every poll of the room instance. */
    val polls: List<SvcPoll> = emptyList(),
    /** Joiners waiting for approval, in arrival order. */
    val waiting: List<SvcWaitingParticipant> = emptyList(),
    /** Invitations still ringing. */
    val invitations: List<SvcInvitation> = emptyList(),
    /** The main room's breakout rooms. */
    val breakouts: List<SvcBreakoutRoom> = emptyList(),
    /** Set in a breakout room: its main room. */
    val breakoutOf: SvcBreakoutOf? = null,
    /** Media state per participant. */
    val media: List<SvcMediaState> = emptyList(),
    /** Background and accessibility per participant. */
    val states: List<SvcParticipantState> = emptyList(),
    /** Network quality per participant. */
    val quality: List<SvcNetworkQuality> = emptyList(),
    /** Reactions received (the last 200). */
    val reactions: List<SvcEmojiReaction> = emptyList(),
    /** Participants pinned on this device only (user ids). */
    val pinned: List<String> = emptyList(),
)

internal const val MAX_INVITEES = 50
internal const val MAX_INVITATION_TIMEOUT_MS = 3_600_000L
internal const val MAX_CHAT_LENGTH = 4096
internal const val MAX_URL_LENGTH = 2048
internal const val MAX_LANGUAGE_LENGTH = 35

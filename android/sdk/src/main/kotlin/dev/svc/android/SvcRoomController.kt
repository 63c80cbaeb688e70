package dev.svc.android

import android.content.Context
import dev.svc.android.internal.BreakoutBroadcastData
import dev.svc.android.internal.BreakoutCloseData
import dev.svc.android.internal.BreakoutCreateData
import dev.svc.android.internal.BreakoutJoinData
import dev.svc.android.internal.BreakoutMoveData
import dev.svc.android.internal.ChatSendData
import dev.svc.android.internal.ControllerMirror
import dev.svc.android.internal.EmptyData
import dev.svc.android.internal.InvitationDeclineData
import dev.svc.android.internal.InvitationIdData
import dev.svc.android.internal.MediaUpdateSelfData
import dev.svc.android.internal.MuteAllData
import dev.svc.android.internal.OptionalTargetData
import dev.svc.android.internal.PollCreateData
import dev.svc.android.internal.PollIdData
import dev.svc.android.internal.PollRespondData
import dev.svc.android.internal.ReactionSendData
import dev.svc.android.internal.SystemAccessibility
import dev.svc.android.internal.TargetData
import dev.svc.android.internal.TargetReasonData
import dev.svc.android.internal.UpdateSettingsData
import dev.svc.android.internal.UpdateStateData
import dev.svc.android.internal.WireJson
import java.util.concurrent.atomic.AtomicLong
import kotlinx.coroutines.flow.SharedFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.update
import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.longOrNull

/**
 * The room controller of a client's current room: roles, participants, media moderation, chat, typing,
 * invitations, hands, network quality, polls, breakout rooms, reactions, waiting room, background
 * effect and accessibility (docs/room-controller.md).
 *
 * ```kotlin
 * val controller = SvcRoomController.instance.initialize(client, context)
 * controller.raiseHand()
 * lifecycleScope.launch { controller.state.collect { render(it.hands, it.chat) } }
 * ```
 *
 * **The server decides every rule.** Operations send a request and return once the server accepted
 * it; a refusal throws [SvcException] with the registry code (`host_required`, `cohost_required`,
 * `already_voted`, `self_unmute_not_allowed`, `rate_limited`…). The [state] changes only when the
 * server's event arrives, in the room's order; queries read that mirrored state. [SvcClient.controller]
 * is the same controller for one client; [instance] is the app-wide one, bound by [initialize].
 */
public class SvcRoomController internal constructor() {
    @Volatile private var bound: SvcClient? = null

    @Volatile private var appContext: Context? = null

    private val lastTypingSentAt = AtomicLong(0)

    private val listener = object : ControllerMirror.Listener {
        override fun onControllerEvent(event: SvcControllerEvent) {
            onEvent?.invoke(event)
        }

        override fun onMoved(breakoutId: String?, roomName: String) {
            onMovedToBreakoutRoom?.invoke(breakoutId, roomName)
        }
    }

    /** Every controller event, after [state] changed (main thread, in the room's order). */
    public var onEvent: ((event: SvcControllerEvent) -> Unit)? = null

    /** A host or co-host moved this user (`breakoutId` null: back to the main room). */
    public var onMovedToBreakoutRoom: ((breakoutId: String?, roomName: String) -> Unit)? = null

    /**
     * Binds this controller to [client] (a client has one room at a time; the controller follows it).
     * [context] gives the system's accessibility state ([systemAccessibilitySettings]); the application
     * context is kept. Returns this controller.
     */
    public fun initialize(client: SvcClient, context: Context): SvcRoomController {
        appContext = context.applicationContext ?: context
        bind(client)
        return this
    }

    internal fun bind(client: SvcClient) {
        if (bound === client) return
        bound?.mirror?.listeners?.remove(listener)
        bound = client
        client.mirror.listeners.addIfAbsent(listener)
    }

    /** Whether [initialize] was called. */
    public val isInitialized: Boolean get() = bound != null

    private fun client(): SvcClient =
        bound ?: throw IllegalStateException("Call SvcRoomController.instance.initialize(client, context) first")

    private val mirror: ControllerMirror get() = client().mirror

    /** The mirrored state (replaced on every change). */
    public val state: StateFlow<SvcRoomControllerState> get() = mirror.state

    /** Every controller event, in the room's order. */
    public val events: SharedFlow<SvcControllerEvent> get() = mirror.events

    /** Switch rooms by itself on a breakout move, and back to the main room when a breakout room closes (true). */
    public var autoJoinBreakoutRooms: Boolean
        get() = mirror.autoJoinBreakoutRooms
        set(value) {
            mirror.autoJoinBreakoutRooms = value
        }

    private val s: SvcRoomControllerState get() = mirror.state.value

    private val selfId: String? get() = client().room?.localParticipant?.userId

    private suspend fun <T> send(type: String, serializer: KSerializer<T>, data: T): JsonObject =
        client().controllerRequest(type, WireJson.encodeToJsonElement(serializer, data))

    private suspend fun sendEmpty(type: String): JsonObject = send(type, EmptyData.serializer(), EmptyData())

    private fun JsonObject.string(key: String): String =
        (this[key] as? JsonPrimitive)?.content ?: throw SvcException("invalid_response", "The ack has no $key")

    // ---- Roles -----------------------------------------------------------------------------------

    /** Whether this user (or [userId]) is the room's host. */
    public fun isHost(userId: String? = null): Boolean = (userId ?: selfId)?.let { it == s.hostUserId } ?: false

    /** Whether this user (or [userId]) is a co-host. */
    public fun isCoHost(userId: String? = null): Boolean = (userId ?: selfId)?.let { it in s.coHosts } ?: false

    /** This user's (or [userId]'s) role. */
    public fun getRole(userId: String? = null): SvcRoomRole = when {
        isHost(userId) -> SvcRoomRole.HOST
        isCoHost(userId) -> SvcRoomRole.COHOST
        else -> SvcRoomRole.PARTICIPANT
    }

    /** Co-hosts' user ids, in promotion order. */
    public fun getCoHosts(): List<String> = s.coHosts

    /** Host only: makes [userId] the host; this user becomes a co-host. */
    public suspend fun transferHost(userId: String) {
        send("role.transfer_host", TargetData.serializer(), TargetData(userId))
    }

    /** Host only. */
    public suspend fun promoteToCoHost(userId: String) {
        send("role.promote", TargetData.serializer(), TargetData(userId))
    }

    /** Host only. */
    public suspend fun demoteFromCoHost(userId: String) {
        send("role.demote", TargetData.serializer(), TargetData(userId))
    }

    /** The room's settings (waiting room, host succession). */
    public fun getRoomSettings(): SvcRoomSettings = s.settings

    /** Host only: turns the waiting room or host succession on or off (null: unchanged). */
    public suspend fun updateRoomSettings(waitingRoom: Boolean? = null, hostSuccession: Boolean? = null) {
        send("room.update_settings", UpdateSettingsData.serializer(), UpdateSettingsData(waitingRoom, hostSuccession))
    }

    // ---- Participants ----------------------------------------------------------------------------

    /** Everyone in the room, this user included, in join order. */
    public fun getParticipants(): List<SvcParticipant> = client().room?.participants ?: emptyList()

    /** The participant with this user id, or null. */
    public fun getParticipant(userId: String): SvcParticipant? = getParticipants().firstOrNull { it.userId == userId }

    /** Pins a participant on this device only (nobody else is told). */
    public fun pin(userId: String) {
        mirror.state.update { if (userId in it.pinned) it else it.copy(pinned = it.pinned + userId) }
    }

    /** Unpins (this device only). */
    public fun unpin(userId: String) {
        mirror.state.update { it.copy(pinned = it.pinned - userId) }
    }

    /** Participants pinned on this device who are in the room. */
    public fun getPinnedParticipants(): List<SvcParticipant> = s.pinned.mapNotNull(::getParticipant)

    /** Host or co-host: spotlights a participant for everyone. */
    public suspend fun spotlight(userId: String) {
        send("participant.spotlight", TargetData.serializer(), TargetData(userId))
    }

    /** Host or co-host. */
    public suspend fun unspotlight(userId: String) {
        send("participant.unspotlight", TargetData.serializer(), TargetData(userId))
    }

    /** Spotlighted participants who are in the room. */
    public fun getSpotlightedParticipants(): List<SvcParticipant> = s.spotlight.mapNotNull(::getParticipant)

    /**
     * Host or co-host: removes a participant at once; the server bans the user id from the room until
     * the kicked session's token expires. The kicked client gets `onDisconnected(Server(KICKED, reason))`.
     */
    public suspend fun kick(userId: String, reason: String? = null) {
        send("participant.kick", TargetReasonData.serializer(), TargetReasonData(userId, reason?.takeIf { it.isNotEmpty() }))
    }

    // ---- Audio / video / screen share ---------------------------------------------------------------

    private fun media(userId: String?): SvcMediaState? = (userId ?: selfId)?.let { id -> s.media.firstOrNull { it.userId == id } }

    private suspend fun updateSelf(data: MediaUpdateSelfData) {
        send("media.update_self", MediaUpdateSelfData.serializer(), data)
    }

    /**
     * Reports this user's microphone as muted to the room. These calls report state; the tracks are
     * published with [SvcClient.enableMicrophone], [SvcClient.enableCamera] and
     * [SvcClient.enableScreenShare] (a host's forced mute is enforced by the server's SFU).
     */
    public suspend fun muteMicrophone(): Unit = updateSelf(MediaUpdateSelfData(microphoneMuted = true))

    /** Throws `self_unmute_not_allowed` after a host's mute-all without self-unmute. */
    public suspend fun unmuteMicrophone(): Unit = updateSelf(MediaUpdateSelfData(microphoneMuted = false))

    /** Reports this user's camera as on. */
    public suspend fun enableCamera(): Unit = updateSelf(MediaUpdateSelfData(cameraEnabled = true))

    /** Reports this user's camera as off. */
    public suspend fun disableCamera(): Unit = updateSelf(MediaUpdateSelfData(cameraEnabled = false))

    /** Whether this user's (or [userId]'s) microphone is muted. */
    public fun isMicrophoneMuted(userId: String? = null): Boolean = media(userId)?.microphoneMuted ?: false

    /** Whether this user's (or [userId]'s) camera is on. */
    public fun isCameraEnabled(userId: String? = null): Boolean = media(userId)?.cameraEnabled ?: false

    /** Host only: mutes everyone else; [allowSelfUnmute] false keeps them muted until asked. */
    public suspend fun muteAll(allowSelfUnmute: Boolean = true) {
        send("media.mute_all", MuteAllData.serializer(), MuteAllData(allowSelfUnmute))
    }

    /** Host only: asks everyone to unmute (a request; nobody is unmuted by force). */
    public suspend fun unmuteAll() {
        sendEmpty("media.unmute_all")
    }

    /** Host or co-host: mutes [userId] (enforced in the SFU). */
    public suspend fun muteParticipant(userId: String) {
        send("media.mute_participant", TargetData.serializer(), TargetData(userId))
    }

    /** Host or co-host: asks [userId] to unmute (`media.unmute_requested`); never forced. */
    public suspend fun unmuteParticipant(userId: String) {
        send("media.request_unmute", TargetData.serializer(), TargetData(userId))
    }

    /** Reports this user's screen share as on. */
    public suspend fun enableScreenShare(): Unit = updateSelf(MediaUpdateSelfData(screenShareEnabled = true))

    /** Reports this user's screen share as off. */
    public suspend fun disableScreenShare(): Unit = updateSelf(MediaUpdateSelfData(screenShareEnabled = false))

    /** Whether this user's (or [userId]'s) screen share is on. */
    public fun isScreenShareEnabled(userId: String? = null): Boolean = media(userId)?.screenShareEnabled ?: false

    // ---- Chat and typing ---------------------------------------------------------------------------

    /** Sends a chat message (1–4096 characters); returns its `seq` (everyone sees it in that order). Stops typing. */
    public suspend fun sendChatMessage(text: String): Long {
        val ack = send("chat.send", ChatSendData.serializer(), ChatSendData(text))
        if (lastTypingSentAt.get() > 0) runCatching { stopTyping() }
        return (ack["seq"] as? JsonPrimitive)?.longOrNull ?: throw SvcException("invalid_response", "The ack has no seq")
    }

    /** The room's chat: the server's history at join, then every message since, oldest first. */
    public fun getChatHistory(): List<SvcChatMessage> = s.chat

    /** Forgets the chat on this device only. */
    public fun clearChatHistory() {
        mirror.state.update { it.copy(chat = emptyList()) }
    }

    /**
     * Says this user is typing. Call it on every keystroke: it is sent at most once per 2 s, and the
     * server ends the indicator 3 s after the last one sent.
     */
    public suspend fun startTyping() {
        val now = System.currentTimeMillis()
        val last = lastTypingSentAt.get()
        if (now - last < TYPING_THROTTLE_MS || !lastTypingSentAt.compareAndSet(last, now)) return
        sendEmpty("typing.start")
    }

    /** Ends this user's typing indicator. */
    public suspend fun stopTyping() {
        lastTypingSentAt.set(0)
        sendEmpty("typing.stop")
    }

    /** Who is typing (the server expires indicators). */
    public fun getTypingIndicators(): List<SvcTypingIndicator> = s.typing

    // ---- Invitations -------------------------------------------------------------------------------

    /** Rings users; returns the invitation id. The server ends it after its timeout. */
    public suspend fun sendCallInvitation(options: SvcCallInvitationOptions): String =
        send("invitation.send", SvcCallInvitationOptions.serializer(), options).string("invitationId")

    /**
     * Accepts an invitation. In the room: pass no options. From outside the room (the usual case: the app
     * learnt of it through its backend), pass the invitation room's options: the client answers on the
     * room's channel before joining, then connects.
     */
    public suspend fun acceptInvitation(invitationId: String, roomOptions: SvcRoomOptions? = null) {
        if (roomOptions == null) {
            send("invitation.accept", InvitationIdData.serializer(), InvitationIdData(invitationId))
            return
        }
        client().answerInvitation(roomOptions, "invitation.accept", InvitationIdData.serializer(), InvitationIdData(invitationId))
        client().connect(roomOptions)
    }

    /** Declines ([busy]: the user is in another call); from outside the room with [roomOptions], without joining. */
    public suspend fun declineInvitation(invitationId: String, roomOptions: SvcRoomOptions? = null, busy: Boolean = false) {
        val data = InvitationDeclineData(invitationId, busy)
        if (roomOptions == null) {
            send("invitation.decline", InvitationDeclineData.serializer(), data)
        } else {
            client().answerInvitation(roomOptions, "invitation.decline", InvitationDeclineData.serializer(), data)
        }
    }

    /** The inviter cancels a ringing invitation. */
    public suspend fun cancelInvitation(invitationId: String) {
        send("invitation.cancel", InvitationIdData.serializer(), InvitationIdData(invitationId))
    }

    /** Invitations of this room still ringing. */
    public fun getInvitations(): List<SvcInvitation> = s.invitations

    // ---- Hands -------------------------------------------------------------------------------------

    /** Raises this user's hand (stamped and ordered by the server). */
    public suspend fun raiseHand() {
        sendEmpty("hand.raise")
    }

    /** Lowers this user's hand, or (host or co-host) [userId]'s. */
    public suspend fun lowerHand(userId: String? = null) {
        send("hand.lower", OptionalTargetData.serializer(), OptionalTargetData(userId))
    }

    /** Raised hands in server order (first raised first). */
    public fun getRaisedHands(): List<SvcRaisedHand> = s.hands

    // ---- Network quality ---------------------------------------------------------------------------

    /** This user's network quality, or null before the first measurement. */
    public fun getNetworkQuality(): SvcNetworkQuality? = selfId?.let(::getParticipantQuality)

    /** [userId]'s network quality (0–5), or null. */
    public fun getParticipantQuality(userId: String): SvcNetworkQuality? = s.quality.firstOrNull { it.userId == userId }

    // ---- Polls -------------------------------------------------------------------------------------

    /** Host or co-host: returns the poll id. */
    public suspend fun createPoll(
        question: String,
        options: List<String>,
        anonymous: Boolean? = null,
        visibility: SvcPollVisibility? = null,
    ): String = send("poll.create", PollCreateData.serializer(), PollCreateData(question, options, anonymous, visibility)).string("pollId")

    /** Host or co-host. */
    public suspend fun endPoll(pollId: String) {
        send("poll.end", PollIdData.serializer(), PollIdData(pollId))
    }

    /** Answers once (`already_voted` after); returns the poll as this user may now see it. */
    public suspend fun respondToPoll(pollId: String, option: Int): SvcPoll {
        val ack = send("poll.respond", PollRespondData.serializer(), PollRespondData(pollId, option))
        return pollOf(ack)
    }

    /** Polls not ended yet. */
    public fun getActivePolls(): List<SvcPoll> = s.polls.filter { it.endedAt == null }

    /** The poll as mirrored; [refresh] asks the server (the results this user may see now). */
    public suspend fun getPoll(pollId: String, refresh: Boolean = false): SvcPoll? {
        if (refresh) pollOf(send("poll.get", PollIdData.serializer(), PollIdData(pollId)))
        return s.polls.firstOrNull { it.id == pollId }
    }

    private fun pollOf(ack: JsonObject): SvcPoll {
        val json = ack["poll"] as? JsonObject ?: throw SvcException("invalid_response", "The ack has no poll")
        return WireJson.decodeFromJsonElement(SvcPoll.serializer(), json).also(mirror::replacePoll)
    }

    // ---- Breakout rooms ----------------------------------------------------------------------------

    /** Host or co-host: opens a breakout room with these participants; returns its id. */
    public suspend fun createBreakoutRoom(name: String, participantIds: List<String>): String =
        send("breakout.create", BreakoutCreateData.serializer(), BreakoutCreateData(name, participantIds)).string("breakoutId")

    /** Host or co-host: assigns [userId] to a breakout room (null: back to the main room). */
    public suspend fun moveToBreakoutRoom(userId: String, breakoutId: String?) {
        send("breakout.move", BreakoutMoveData.serializer(), BreakoutMoveData(userId, breakoutId))
    }

    /**
     * Joins a breakout room this user is assigned to (hosts and co-hosts: any): leaves the main room and
     * connects to the breakout room. Throws `breakout_not_assigned`.
     */
    public suspend fun joinBreakoutRoom(breakoutId: String) {
        val roomName = send("breakout.join", BreakoutJoinData.serializer(), BreakoutJoinData(breakoutId)).string("roomName")
        val main = mirror.mainRoomOptions ?: throw SvcException("not_connected", "Connect to the main room first")
        client().connect(main.copy(roomName = roomName))
    }

    /** Returns from a breakout room to the main room (nothing when not in a breakout room). */
    public suspend fun leaveBreakoutRoom() {
        val main = mirror.mainRoomOptions ?: return
        if (s.breakoutOf == null) return
        client().connect(main)
    }

    /** Host or co-host: closes one (or every) breakout room after a countdown in ms (server default when null). */
    public suspend fun closeBreakoutRooms(breakoutId: String? = null, countdownMs: Long? = null) {
        send("breakout.close", BreakoutCloseData.serializer(), BreakoutCloseData(breakoutId, countdownMs))
    }

    /** Host or co-host: a message to the main room and every breakout room. */
    public suspend fun broadcastToBreakoutRooms(message: String) {
        send("breakout.broadcast", BreakoutBroadcastData.serializer(), BreakoutBroadcastData(message))
    }

    /** The main room's breakout rooms. */
    public fun getBreakoutRooms(): List<SvcBreakoutRoom> = s.breakouts

    // ---- Reactions ---------------------------------------------------------------------------------

    /** One of the reaction names (`like`, `love`, `laugh`, `wow`, `sad`, `clap`, `celebrate`, `thinking`) or one emoji. */
    public suspend fun sendEmojiReaction(emoji: String) {
        send("reaction.send", ReactionSendData.serializer(), ReactionSendData(emoji))
    }

    /** Reactions received in the last 10 s (this device's clock), oldest first. */
    public fun getRecentEmojiReactions(): List<SvcEmojiReaction> {
        val since = System.currentTimeMillis() - RECENT_REACTIONS_MS
        return s.reactions.filter { it.receivedAt >= since }
    }

    // ---- Waiting room ------------------------------------------------------------------------------

    /** Host or co-host: admits a waiting joiner. */
    public suspend fun approve(userId: String) {
        send("waiting.approve", TargetData.serializer(), TargetData(userId))
    }

    /** Host or co-host: refuses a waiting joiner (it gets [reason]). */
    public suspend fun reject(userId: String, reason: String? = null) {
        send("waiting.reject", TargetReasonData.serializer(), TargetReasonData(userId, reason?.takeIf { it.isNotEmpty() }))
    }

    /** Joiners waiting for approval, in arrival order. */
    public fun getWaitingRoomParticipants(): List<SvcWaitingParticipant> = s.waiting

    // ---- Background and accessibility ----------------------------------------------------------------

    /**
     * Shares this user's background effect with the room, so others can label it. **The library does not
     * process video on Android**: it has no segmentation model and changes no frame. The app applies the
     * effect to the camera itself (for example an `org.webrtc.VideoProcessor` with a segmentation model
     * such as ML Kit's selfie segmentation) and reports it here; see the README.
     */
    public suspend fun applyBackgroundEffect(effect: SvcBackgroundEffect) {
        send("participant.update_state", UpdateStateData.serializer(), UpdateStateData(background = effect))
    }

    /** Shares "no effect". */
    public suspend fun removeBackgroundEffect(): Unit = applyBackgroundEffect(SvcBackgroundEffect.None)

    /** This user's (or [userId]'s) background effect as shared. */
    public fun getCurrentBackgroundEffect(userId: String? = null): SvcBackgroundEffect =
        (userId ?: selfId)?.let { id -> s.states.firstOrNull { it.userId == id }?.background } ?: SvcBackgroundEffect.None

    /** Shares this user's accessibility settings with the room (replaces the whole object). */
    public suspend fun updateAccessibilitySettings(settings: SvcAccessibilitySettings) {
        send("participant.update_state", UpdateStateData.serializer(), UpdateStateData(accessibility = settings))
    }

    /** This user's (or [userId]'s) accessibility settings as shared. */
    public fun getAccessibilitySettings(userId: String? = null): SvcAccessibilitySettings =
        (userId ?: selfId)?.let { id -> s.states.firstOrNull { it.userId == id }?.accessibility } ?: SvcAccessibilitySettings()

    /**
     * The device's own accessibility state, read from the [Context] given to [initialize]: captions
     * (`CaptioningManager`: enabled, locale) and a screen reader (`AccessibilityManager` touch
     * exploration). Share it with [updateAccessibilitySettings] if the user agrees.
     */
    public fun systemAccessibilitySettings(): SvcAccessibilitySettings =
        SystemAccessibility.read(appContext ?: throw IllegalStateException("Call initialize(client, context) first"))

    public companion object {
        /** The app-wide controller; bind it with [initialize]. */
        @JvmStatic
        public val instance: SvcRoomController by lazy { SvcRoomController() }

        private const val TYPING_THROTTLE_MS = 2_000L
        private const val RECENT_REACTIONS_MS = 10_000L
    }
}

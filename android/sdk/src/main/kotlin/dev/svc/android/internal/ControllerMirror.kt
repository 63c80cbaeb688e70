package dev.svc.android.internal

import dev.svc.android.Room
import dev.svc.android.SvcChatMessage
import dev.svc.android.SvcControllerEvent
import dev.svc.android.SvcEmojiReaction
import dev.svc.android.SvcMediaState
import dev.svc.android.SvcPoll
import dev.svc.android.SvcPollResults
import dev.svc.android.SvcRoomControllerState
import dev.svc.android.SvcRoomOptions
import dev.svc.android.SvcRoomRole
import java.util.concurrent.CopyOnWriteArrayList
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.update
import kotlinx.serialization.json.JsonObject

/**
 * The client's mirror of its room's controller state: set from the join snapshot, changed by each
 * controller room event in the room's order (called holding the client's state lock), reset when the
 * client leaves. Nothing here decides a rule; it only applies what the server said.
 */
internal class ControllerMirror(
    /** Runs an app handler on the client's callback thread, in order. */
    private val deliver: (() -> Unit) -> Unit,
    /** Switches the client to another room (breakout moves and returns). */
    private val switchRoom: (target: SvcRoomOptions, fallback: SvcRoomOptions?) -> Unit,
) {
    val state = MutableStateFlow(SvcRoomControllerState())
    val events = MutableSharedFlow<SvcControllerEvent>(extraBufferCapacity = Int.MAX_VALUE)

    /** The app's listeners (every bound [dev.svc.android.SvcRoomController]). */
    val listeners = CopyOnWriteArrayList<Listener>()

    @Volatile var autoJoinBreakoutRooms: Boolean = true

    /** The options of the main room the client joined (breakout switches reuse them). */
    @Volatile var mainRoomOptions: SvcRoomOptions? = null

    interface Listener {
        fun onControllerEvent(event: SvcControllerEvent)

        fun onMoved(breakoutId: String?, roomName: String)
    }

    /** A new session's snapshot (join, or rejoin after a failed resume). */
    fun snapshot(controller: JsonObject?, seq: Long, options: SvcRoomOptions) {
        val ctl = controllerSnapshotOf(controller)
        if (ctl?.breakoutOf == null) mainRoomOptions = options
        state.update { s ->
            val base = SvcRoomControllerState(seq = seq, pinned = s.pinned)
            if (ctl == null) {
                base
            } else {
                base.copy(
                    settings = ctl.settings,
                    hostUserId = ctl.hostUserId,
                    coHosts = ctl.coHosts,
                    spotlight = ctl.spotlight,
                    hands = ctl.hands,
                    typing = ctl.typing,
                    chat = ctl.chat,
                    polls = ctl.polls,
                    waiting = ctl.waiting,
                    invitations = ctl.invitations,
                    breakouts = ctl.breakouts,
                    breakoutOf = ctl.breakoutOf,
                    media = ctl.media,
                    states = ctl.states,
                    quality = ctl.quality,
                )
            }
        }
    }

    /** The client left the room. */
    fun reset() {
        state.update { SvcRoomControllerState(pinned = it.pinned) }
    }

    /** The client's room was deleted: a closed breakout room returns to the main room. */
    fun roomDeleted() {
        val main = mainRoomOptions
        if (state.value.breakoutOf != null && main != null && autoJoinBreakoutRooms) switchRoom(main, null)
    }

    /**
     * A poll view from an ack. It can be older than events already mirrored (votes committed on other nodes
     * reached the socket first): votes only grow and a poll only ends, so the shared fields keep the newer of
     * the two; the caller's own fields (myVote, after-vote results) come from the ack.
     */
    fun replacePoll(poll: SvcPoll) {
        state.update { s ->
            s.copy(
                polls = s.polls.map {
                    when {
                        it.id != poll.id -> it

                        poll.totalVotes < it.totalVotes || (it.endedAt != null && poll.endedAt == null) ->
                            it.copy(myVote = poll.myVote ?: it.myVote, results = it.results ?: poll.results)

                        else -> poll.copy(myVote = poll.myVote ?: it.myVote)
                    }
                },
            )
        }
    }

    /** A room event in seq order (duplicates already dropped); non-controller events only touch what they change. */
    @Suppress("CyclomaticComplexMethod", "LongMethod")
    fun event(room: Room, frame: EventFrame<*>) {
        val s = state.value
        val seq = frame.seq
        val next: SvcRoomControllerState = when (val d = frame.data) {
            is SettingsChangedData -> s.copy(settings = d.settings)

            is RoleChangedData -> {
                var host = s.hostUserId
                var coHosts = s.coHosts.filter { it != d.userId }
                if (d.role == SvcRoomRole.HOST) {
                    host = d.userId
                } else if (host == d.userId) {
                    host = null
                }
                if (d.role == SvcRoomRole.COHOST) coHosts = coHosts + d.userId
                for (p in room.participants) {
                    val isHost = p.userId == host
                    if (p.isHost != isHost) room.upsert(p.copy(isHost = isHost))
                }
                s.copy(hostUserId = host, coHosts = coHosts)
            }

            is ParticipantLeftData -> {
                val gone = d.participant.userId
                if (room.participants.any { it.userId == gone }) return
                s.copy(
                    hostUserId = if (s.hostUserId == gone) null else s.hostUserId,
                    coHosts = s.coHosts.filter { it != gone },
                    media = s.media.filter { it.userId != gone },
                    states = s.states.filter { it.userId != gone },
                    quality = s.quality.filter { it.userId != gone },
                )
            }

            is SpotlightChangedData -> s.copy(spotlight = d.userIds)

            is dev.svc.android.SvcParticipantState -> s.copy(states = s.states.filter { it.userId != d.userId } + d)

            is ChatMessageData -> s.copy(chat = s.chat + SvcChatMessage(seq, frame.ts, d.text, d.from))

            is dev.svc.android.SvcTypingIndicator -> s.copy(typing = s.typing.filter { it.userId != d.userId } + d)

            is TypingStoppedData -> s.copy(typing = s.typing.filter { it.userId != d.userId })

            is dev.svc.android.SvcRaisedHand -> s.copy(hands = s.hands.filter { it.userId != d.userId } + d)

            is HandLoweredData -> s.copy(hands = s.hands.filter { it.userId != d.userId })

            is PollData -> if (frame.type == "poll.created") {
                s.copy(polls = s.polls + d.poll.copy(myVote = null))
            } else {
                s.copy(polls = s.polls.map { p -> if (p.id == d.poll.id) d.poll.copy(myVote = p.myVote) else p })
            }

            is PollUpdatedData -> s.copy(
                polls = s.polls.map { p ->
                    if (p.id == d.pollId) p.copy(totalVotes = d.totalVotes, results = updatedResults(p.results, d)) else p
                },
            )

            is ReactionBatchData -> {
                val receivedAt = System.currentTimeMillis()
                val added = d.reactions.map { SvcEmojiReaction(it.userId, it.emoji, it.ts, receivedAt) }
                s.copy(reactions = (s.reactions + added).takeLast(MAX_REACTIONS))
            }

            is InvitationCreatedData -> s.copy(invitations = s.invitations + d.invitation)

            is InvitationUpdatedData -> {
                val open = d.invitation.invitees.any { it.outcome == dev.svc.android.SvcInvitationOutcome.PENDING }
                val others = s.invitations.filter { it.id != d.invitationId }
                s.copy(invitations = if (open) others + d.invitation else others)
            }

            is WaitingJoinedData -> s.copy(waiting = s.waiting.filter { it.userId != d.participant.userId } + d.participant)

            is WaitingDecidedData -> s.copy(waiting = s.waiting.filter { it.userId != d.userId })

            is WaitingRejectedData -> s.copy(waiting = s.waiting.filter { it.userId != d.userId })

            is WaitingGoneData -> s.copy(waiting = s.waiting.filter { it.userId != d.userId })

            is BreakoutCreatedData -> s.copy(breakouts = s.breakouts + d.breakout)

            is BreakoutMovedData -> s.copy(
                breakouts = s.breakouts.map { b ->
                    val without = b.userIds.filter { it != d.userId }
                    b.copy(userIds = if (b.id == d.breakoutId) without + d.userId else without)
                },
            )

            is BreakoutClosingData -> s.copy(
                breakouts = s.breakouts.map {
                    if (it.id in
                        d.breakoutIds
                    ) {
                        it.copy(closesAt = d.closesAt)
                    } else {
                        it
                    }
                },
            )

            is BreakoutClosedData -> s.copy(breakouts = s.breakouts.filter { it.id !in d.breakoutIds })

            is BreakoutBroadcastEventData -> s

            is MediaStateChangedData -> s.copy(media = s.media.filter { it.userId != d.userId } + d.state())

            is UnmuteRequestedData -> s.copy(media = s.media.map { if (it.userId == d.userId) it.copy(selfUnmuteAllowed = true) else it })

            is AllMutedData -> {
                val byUser = LinkedHashMap<String, SvcMediaState>()
                s.media.forEach { byUser[it.userId] = it }
                for (p in room.participants) {
                    if (p.userId == d.by) continue
                    val m = byUser[p.userId]
                    byUser[p.userId] = SvcMediaState(
                        p.userId,
                        microphoneMuted = true,
                        cameraEnabled = m?.cameraEnabled ?: false,
                        screenShareEnabled = m?.screenShareEnabled ?: false,
                        selfUnmuteAllowed = d.allowSelfUnmute,
                    )
                }
                s.copy(media = byUser.values.toList())
            }

            is ByData -> s.copy(media = s.media.map { it.copy(selfUnmuteAllowed = true) })

            is NetworkQualityData -> {
                val changed = d.scores.map { it.userId }.toSet()
                s.copy(quality = s.quality.filter { it.userId !in changed } + d.scores)
            }

            else -> return
        }
        state.value = next.copy(seq = seq)
        if (frame.type !in CONTROLLER_EVENTS) return
        val serializer = CONTROLLER_EVENTS.getValue(frame.type)

        @Suppress("UNCHECKED_CAST")
        val json = WireJson.encodeToString(serializer as kotlinx.serialization.KSerializer<Any?>, frame.data)
        val event = SvcControllerEvent(frame.type, json, seq, frame.ts)
        events.tryEmit(event)
        deliver { listeners.forEach { it.onControllerEvent(event) } }
        val moved = frame.data
        if (moved is BreakoutMovedData && moved.userId == room.localParticipant.userId) onMoved(room, moved)
    }

    private fun onMoved(room: Room, d: BreakoutMovedData) {
        deliver { listeners.forEach { it.onMoved(d.breakoutId, d.roomName) } }
        val main = mainRoomOptions
        if (!autoJoinBreakoutRooms || main == null) return
        val target = if (d.breakoutId == null) main else main.copy(roomName = d.roomName)
        if (target.roomName == room.name) return
        // A switch that fails (the breakout room closed meanwhile…) falls back to the main room.
        switchRoom(target, if (target === main) null else main)
    }

    private companion object {
        /** At most this many reactions are kept. */
        const val MAX_REACTIONS = 200
    }
}

/**
 * A poll's results after a `poll.updated`: its counts, and the votes held so far plus the new one
 * (each user once: an answer's ack may already have brought it). An update that carries the full
 * list replaces it; one without results leaves them as they are.
 */
private fun updatedResults(held: SvcPollResults?, update: PollUpdatedData): SvcPollResults? {
    val results = update.results ?: return held
    val vote = update.vote
    if (results.votes != null || (held?.votes == null && vote == null)) return results
    val votes = held?.votes.orEmpty().filter { it.userId != vote?.userId } + listOfNotNull(vote)
    return results.copy(votes = votes)
}

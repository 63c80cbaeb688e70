package dev.svc.android

import dev.svc.android.internal.SharedHttp
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.atomic.AtomicBoolean
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.Protocol
import okhttp3.Response
import okhttp3.ResponseBody.Companion.toResponseBody
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** [SvcRoomController] against the real server: every operation group, the role refusals, and the rules the server keeps. */
class ControllerTest {
    private val TestClient.ctl: SvcRoomController get() = client.controller

    /** Waits (on the mirrored state, never on time) until [predicate] holds. */
    private suspend fun SvcRoomController.await(
        description: String,
        predicate: (SvcRoomControllerState) -> Boolean,
    ): SvcRoomControllerState = try {
        withTimeout(WAIT_MS) { state.first(predicate) }
    } catch (e: kotlinx.coroutines.TimeoutCancellationException) {
        throw AssertionError("timed out waiting for $description; state ${state.value}", e)
    }

    private suspend fun refused(code: String, block: suspend () -> Unit) {
        val e = assertThrows<SvcException> { block() }
        assertEquals(code, e.code, e.message)
    }

    @Test
    fun `roles, moderation, media and hands are decided by the server, refusals carry their codes, the host succeeds`() =
        runBlocking<Unit> {
            val name = uniqueRoom("ctl-roles")
            TestClient().use { h ->
                TestClient().use { a ->
                    TestClient().use { b ->
                        h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                        a.client.connect(roomOptions(name, "a", "Ann"))
                        b.client.connect(roomOptions(name, "b", "Bob"))
                        h.ctl.await("three participants") { h.ctl.getParticipants().size == 3 }
                        assertTrue(h.ctl.isHost())
                        assertTrue(a.ctl.isHost("h"))
                        assertFalse(a.ctl.isHost())
                        assertEquals(SvcRoomRole.PARTICIPANT, a.ctl.getRole())

                        // Participants may not moderate.
                        refused("host_required") { a.ctl.promoteToCoHost("b") }
                        refused("cohost_required") { a.ctl.spotlight("b") }
                        refused("cohost_required") { a.ctl.kick("b") }
                        refused("cohost_required") { a.ctl.muteParticipant("b") }
                        refused("host_required") { a.ctl.muteAll() }
                        refused("host_required") { a.ctl.updateRoomSettings(waitingRoom = true) }

                        h.ctl.promoteToCoHost("a")
                        // Each client mirrors the room on its own socket: wait on the one asserted on.
                        b.ctl.await("a is a co-host") { "a" in it.coHosts }
                        a.ctl.await("a sees itself a co-host") { "a" in it.coHosts }
                        assertTrue(a.ctl.isCoHost())
                        assertEquals(listOf("a"), b.ctl.getCoHosts())
                        // A co-host moderates but does not change roles.
                        refused("host_required") { a.ctl.promoteToCoHost("b") }
                        refused("host_required") { a.ctl.muteAll() }
                        a.ctl.spotlight("b")
                        h.ctl.await("b spotlighted") { it.spotlight == listOf("b") }
                        assertEquals(listOf("b"), h.ctl.getSpotlightedParticipants().map { it.userId })
                        a.ctl.unspotlight("b")
                        h.ctl.await("no spotlight") { it.spotlight.isEmpty() }

                        // Pin is local: nobody else hears of it.
                        b.ctl.pin("h")
                        assertEquals(listOf("h"), b.ctl.getPinnedParticipants().map { it.userId })
                        assertTrue(h.ctl.state.value.pinned.isEmpty())
                        b.ctl.unpin("h")
                        assertTrue(b.ctl.getPinnedParticipants().isEmpty())

                        // Media: own state, forced mute, mute-all without self-unmute, unmute only as a request.
                        b.ctl.enableCamera()
                        b.ctl.enableScreenShare()
                        h.ctl.await("b's camera and screen") { h.ctl.isCameraEnabled("b") && h.ctl.isScreenShareEnabled("b") }
                        a.ctl.muteParticipant("b")
                        b.ctl.await("b muted") { b.ctl.isMicrophoneMuted() }
                        h.ctl.muteAll(allowSelfUnmute = false)
                        b.ctl.await("mute-all reached b") { s -> s.media.any { it.userId == "b" && !it.selfUnmuteAllowed } }
                        refused("self_unmute_not_allowed") { b.ctl.unmuteMicrophone() }
                        h.ctl.unmuteParticipant("b")
                        b.ctl.await("b asked to unmute") { s -> s.media.any { it.userId == "b" && it.selfUnmuteAllowed } }
                        b.ctl.unmuteMicrophone()
                        h.ctl.await("b unmuted") { !h.ctl.isMicrophoneMuted("b") }
                        b.ctl.disableScreenShare()
                        b.ctl.disableCamera()
                        h.ctl.unmuteAll()

                        // Hands: server order; only admins lower someone else's.
                        b.ctl.raiseHand()
                        a.ctl.raiseHand()
                        h.ctl.await("two hands") { it.hands.size == 2 }
                        assertEquals(listOf("b", "a"), h.ctl.getRaisedHands().map { it.userId })
                        refused("cohost_required") { b.ctl.lowerHand("a") }
                        a.ctl.lowerHand("b")
                        a.ctl.lowerHand()
                        b.ctl.await("no hands") { it.hands.isEmpty() }

                        // Transfer: the former host becomes a co-host.
                        h.ctl.transferHost("a")
                        b.ctl.await("a is host") { it.hostUserId == "a" && "h" in it.coHosts }
                        a.ctl.await("a sees itself host") { it.hostUserId == "a" }
                        h.ctl.await("h sees itself a co-host") { "h" in it.coHosts }
                        assertTrue(a.ctl.isHost())
                        assertTrue(h.ctl.isCoHost())
                        assertTrue(b.client.room!!.participants.first { it.userId == "a" }.isHost)
                        refused("host_required") { h.ctl.demoteFromCoHost("h") }

                        // Kick with a reason; the user id is banned, whatever token it brings.
                        val kicked = CompletableDeferred<SvcDisconnectReason>()
                        b.client.onDisconnected = { kicked.complete(it) }
                        h.ctl.kick("b", "spam")
                        assertEquals(SvcDisconnectReason.Server(SvcLeaveReason.KICKED, "spam"), withTimeout(WAIT_MS) { kicked.await() })
                        a.ctl.await("b gone") { a.ctl.getParticipant("b") == null }
                        refused("banned") { b.client.connect(roomOptions(name, "b", "Bob")) }

                        // Succession: the host leaves for good, the longest-present co-host takes over.
                        a.ctl.demoteFromCoHost("h")
                        h.ctl.await("h demoted") { it.coHosts.isEmpty() }
                        a.ctl.promoteToCoHost("h")
                        h.ctl.await("h co-host again") { "h" in it.coHosts }
                        a.client.disconnect()
                        h.ctl.await("h succeeded") { it.hostUserId == "h" && it.coHosts.isEmpty() }
                        assertTrue(h.ctl.isHost())
                        assertTrue(h.client.room!!.localParticipant.isHost)
                    }
                }
            }
        }

    @Test
    fun `chat with history for a late joiner, typing, reactions, shared state and network quality`() = runBlocking<Unit> {
        val name = uniqueRoom("ctl-chat")
        TestClient().use { h ->
            TestClient().use { a ->
                h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                a.client.connect(roomOptions(name, "a", "Ann"))
                val events = mutableListOf<String>()
                a.ctl.onEvent = { synchronized(events) { events += it.type } }

                h.ctl.startTyping()
                a.ctl.await("h typing") { s -> s.typing.any { it.userId == "h" } }
                assertEquals(listOf("h"), a.ctl.getTypingIndicators().map { it.userId })
                val first = h.ctl.sendChatMessage("hello")
                a.ctl.await("typing stopped by sending") { it.typing.isEmpty() }
                val second = a.ctl.sendChatMessage("hi there")
                assertTrue(second > first)
                h.ctl.await("two messages") { it.chat.size == 2 }
                assertEquals(listOf("hello", "hi there"), h.ctl.getChatHistory().map { it.text })
                assertEquals(listOf(first, second), a.ctl.getChatHistory().map { it.seq })
                refused("invalid_request") { h.client.controllerRequest("chat.send", kotlinx.serialization.json.JsonObject(emptyMap())) }

                // A late joiner gets the room's history in its snapshot.
                TestClient().use { late ->
                    late.client.connect(roomOptions(name, "late", "Late"))
                    assertEquals(listOf("hello" to "h", "hi there" to "a"), late.ctl.getChatHistory().map { it.text to it.from.userId })
                    late.ctl.clearChatHistory()
                    assertTrue(late.ctl.getChatHistory().isEmpty())
                    assertEquals(2, h.ctl.getChatHistory().size, "clearing is local")
                }

                // Reactions: validated, batched, mirrored.
                a.ctl.sendEmojiReaction("clap")
                a.ctl.sendEmojiReaction("🎉")
                refused("invalid_reaction") { a.ctl.sendEmojiReaction("not a reaction") }
                h.ctl.await("two reactions") { it.reactions.size == 2 }
                assertEquals(listOf("clap", "🎉"), h.ctl.getRecentEmojiReactions().map { it.emoji })

                // Background and accessibility: each participant's own state, shared.
                a.ctl.applyBackgroundEffect(SvcBackgroundEffect.Blur(0.5))
                a.ctl.updateAccessibilitySettings(SvcAccessibilitySettings(captions = true, captionsLanguage = "en"))
                h.ctl.await("a's state") { h.ctl.getAccessibilitySettings("a").captions == true }
                assertEquals(SvcBackgroundEffect.Blur(0.5), h.ctl.getCurrentBackgroundEffect("a"))
                assertEquals("en", a.ctl.getAccessibilitySettings().captionsLanguage)
                a.ctl.applyBackgroundEffect(SvcBackgroundEffect.Image("https://example.com/b.jpg"))
                h.ctl.await("a's image") { h.ctl.getCurrentBackgroundEffect("a") is SvcBackgroundEffect.Image }
                a.ctl.removeBackgroundEffect()
                h.ctl.await("no effect") { h.ctl.getCurrentBackgroundEffect("a") == SvcBackgroundEffect.None }

                // Network quality: measured by the server from the signaling round trip.
                a.ctl.await("quality of both") { s -> s.quality.map { it.userId }.containsAll(listOf("h", "a")) }
                val q = a.ctl.getNetworkQuality()!!
                assertTrue(q.quality in 1..5 && q.rttMs != null, "$q")
                assertEquals("h", a.ctl.getParticipantQuality("h")?.userId)

                a.ctl.await("events reached the handler") {
                    synchronized(events) { "reaction.batch" in events && "chat.message" in events }
                }
                assertTrue(a.ctl.events.replayCache.isEmpty())
            }
        }
    }

    @Test
    fun `a poll counts each user once under concurrent answers`() = runBlocking<Unit> {
        val name = uniqueRoom("ctl-poll")
        val voters = (1..6).map { TestClient() }
        TestClient().use { h ->
            try {
                h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                voters.forEachIndexed { i, v -> v.client.connect(roomOptions(name, "v$i", "Voter $i")) }
                refused("cohost_required") { voters[0].ctl.createPoll("Mine?", listOf("a", "b")) }
                val id = h.ctl.createPoll("Lunch?", listOf("pizza", "salad"))
                voters.forEach { v -> v.ctl.await("the poll") { s -> s.polls.any { it.id == id } } }
                assertEquals(listOf(id), voters[0].ctl.getActivePolls().map { it.id })

                // Every voter answers twice at once: exactly one answer each counts.
                val outcomes = coroutineScope {
                    voters.flatMapIndexed { i, v ->
                        (0..1).map { async { runCatching { v.ctl.respondToPoll(id, i % 2) } } }
                    }.awaitAll()
                }
                assertEquals(6, outcomes.count { it.isSuccess })
                assertTrue(outcomes.filter { it.isFailure }.all { (it.exceptionOrNull() as SvcException).code == "already_voted" })
                val poll = h.ctl.await("six votes") { s -> s.polls.any { it.id == id && it.totalVotes == 6 } }.polls.first { it.id == id }
                assertEquals(listOf(3, 3), poll.results?.counts)
                // Each update brings one vote; the mirror holds them all, each voter once.
                val votes = poll.results?.votes.orEmpty().map { it.userId to it.option }.sortedBy { it.first }
                assertEquals((0..5).map { "v$it" to it % 2 }, votes)
                assertEquals(0, voters[0].ctl.getPoll(id, refresh = true)?.myVote)
                refused("poll_option_invalid") { h.ctl.respondToPoll(id, 7) }

                refused("cohost_required") { voters[1].ctl.endPoll(id) }
                h.ctl.endPoll(id)
                voters[1].ctl.await("ended") { s -> s.polls.first { it.id == id }.endedAt != null }
                assertTrue(voters[1].ctl.getActivePolls().isEmpty())
                refused("poll_ended") { h.ctl.respondToPoll(id, 0) }
            } finally {
                voters.forEach { it.close() }
            }
        }
    }

    @Test
    fun `waiting room approve and reject, decided by hosts and co-hosts`() = runBlocking<Unit> {
        val name = uniqueRoom("ctl-wait")
        TestClient().use { h ->
            TestClient().use { a ->
                TestClient().use { w1 ->
                    TestClient().use { w2 ->
                        h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                        a.client.connect(roomOptions(name, "a", "Ann"))
                        refused("host_required") { a.ctl.updateRoomSettings(waitingRoom = true) }
                        h.ctl.updateRoomSettings(waitingRoom = true)
                        a.ctl.await("waiting room on") { it.settings.waitingRoom }
                        assertTrue(h.ctl.getRoomSettings().waitingRoom)

                        coroutineScope {
                            val admitted = async { w1.client.connect(roomOptions(name, "w1", "Wendy")) }
                            val rejected = async { runCatching { w2.client.connect(roomOptions(name, "w2", "Walt")) } }
                            h.ctl.await("two waiting") { it.waiting.size == 2 }
                            assertEquals(
                                setOf("w1", "w2"),
                                a.ctl.await("a sees them") {
                                    it.waiting.size == 2
                                }.waiting.map { it.userId }.toSet(),
                            )
                            refused("cohost_required") { a.ctl.approve("w1") }
                            h.ctl.approve("w1")
                            assertEquals(name, admitted.await().name)
                            h.ctl.promoteToCoHost("a")
                            a.ctl.await("a co-host") { "a" in it.coHosts }
                            a.ctl.reject("w2", "not today")
                            val error = rejected.await().exceptionOrNull() as SvcException
                            assertEquals("waiting_rejected", error.code)
                            assertTrue(error.message!!.contains("not today"), error.message)
                        }
                        h.ctl.await("nobody waiting") { it.waiting.isEmpty() }
                        assertTrue(h.ctl.getWaitingRoomParticipants().isEmpty())
                        assertTrue(h.ctl.getParticipant("w1") != null)
                        assertNull(h.ctl.getParticipant("w2"))
                    }
                }
            }
        }
    }

    @Test
    fun `invitations are answered from outside the room, and breakout rooms are joined and left`() = runBlocking<Unit> {
        val name = uniqueRoom("ctl-inv")
        TestClient().use { h ->
            TestClient().use { a ->
                TestClient().use { outside ->
                    h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                    a.client.connect(roomOptions(name, "a", "Ann"))

                    // Declined as busy from outside the room (before any join): answered once; the inviter cancels the rest.
                    val busy = a.ctl.sendCallInvitation(SvcCallInvitationOptions(listOf("x", "z"), metadata = "{\"topic\":\"demo\"}"))
                    h.ctl.await("the invitation") { s -> s.invitations.any { it.id == busy } }
                    assertEquals("{\"topic\":\"demo\"}", h.ctl.getInvitations().single().metadata)
                    outside.ctl.declineInvitation(busy, roomOptions(name, "x", "Xavier"), busy = true)
                    h.ctl.await("x busy") { s ->
                        s.invitations.single().invitees.first { it.userId == "x" }.outcome ==
                            SvcInvitationOutcome.BUSY
                    }
                    refused("invitation_closed") { outside.ctl.acceptInvitation(busy, roomOptions(name, "x", "Xavier")) }
                    assertNull(outside.client.room, "a refused answer joins nothing")
                    refused("not_invited") { outside.ctl.declineInvitation(busy, roomOptions(name, "y", "Yves")) }
                    a.ctl.cancelInvitation(busy)
                    h.ctl.await("cancelled") { it.invitations.isEmpty() }
                    val accepted = h.ctl.sendCallInvitation(SvcCallInvitationOptions(listOf("x"), timeoutMs = 60_000))
                    outside.ctl.acceptInvitation(accepted, roomOptions(name, "x", "Xavier"))
                    assertEquals(name, outside.client.room?.name)
                    h.ctl.await("x joined, invitation closed") { h.ctl.getParticipant("x") != null && it.invitations.isEmpty() }

                    // Breakout rooms: only admins create; assigned users (and admins) join; leaving returns to the main room.
                    refused("cohost_required") { a.ctl.createBreakoutRoom("Team", listOf("a")) }
                    val id = h.ctl.createBreakoutRoom("Team A", listOf("a"))
                    val breakout = a.ctl.await("the breakout room") { s -> s.breakouts.any { it.id == id } }.breakouts.single()
                    assertEquals(listOf("a"), breakout.userIds)
                    refused("breakout_not_assigned") { outside.ctl.joinBreakoutRoom(id) }
                    a.ctl.joinBreakoutRoom(id)
                    assertEquals(breakout.roomName, a.client.room?.name)
                    assertEquals(name, a.ctl.state.value.breakoutOf?.roomName)
                    a.ctl.leaveBreakoutRoom()
                    assertEquals(name, a.client.room?.name)
                    assertNull(a.ctl.state.value.breakoutOf)

                    // A move switches the moved client by itself; closing returns it to the main room.
                    val moved = CompletableDeferred<Pair<String?, String>>()
                    a.ctl.onMovedToBreakoutRoom = { to, room -> moved.complete(to to room) }
                    h.ctl.moveToBreakoutRoom("a", id)
                    assertEquals(id to breakout.roomName, withTimeout(WAIT_MS) { moved.await() })
                    a.ctl.await("a in the breakout room") { it.breakoutOf?.breakoutId == id }
                    h.ctl.closeBreakoutRooms(countdownMs = 0)
                    a.ctl.await("a back in the main room") { it.breakoutOf == null && a.client.room?.name == name }
                    h.ctl.await("no breakout rooms") { it.breakouts.isEmpty() }
                }
            }
        }
    }

    @Test
    fun `a way back from a closed breakout room that fails on the network is retried`() = runBlocking<Unit> {
        val name = uniqueRoom("ctl-back")
        TestClient().use { h ->
            TestClient().use { a ->
                h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                a.client.connect(roomOptions(name, "a", "Ann"))
                val id = h.ctl.createBreakoutRoom("Team A", listOf("a"))
                a.ctl.joinBreakoutRoom(id)
                a.ctl.await("a in the breakout room") { it.breakoutOf?.breakoutId == id }
                // The breakout room's socket stays up; the way back to the main room finds nothing listening.
                a.client.rewriteUrl = { it.replace(Regex(":\\d+/"), ":1/") }
                h.ctl.closeBreakoutRooms(countdownMs = 0)
                // What the client went through since its breakout room was deleted (the seen list is a
                // StateFlow: a wait may skip a value, so each wait looks for a state, not for the last one).
                fun sinceDeleted(seen: List<Seen>) =
                    seen.dropWhile { !(it is Seen.Disconnected && it.reason is SvcDisconnectReason.Server) }
                a.waitUntil(description = "a retrying") { Seen.State(SvcConnectionState.RECONNECTING) in sinceDeleted(it) }
                a.client.rewriteUrl = { it }
                a.ctl.await("a back in the main room") { it.breakoutOf == null && a.client.room?.name == name }
                a.waitUntil(description = "connected") { Seen.State(SvcConnectionState.CONNECTED) in sinceDeleted(it) }
                assertEquals(
                    listOf(
                        SvcConnectionState.DISCONNECTED,
                        SvcConnectionState.CONNECTING,
                        SvcConnectionState.RECONNECTING,
                        SvcConnectionState.CONNECTED,
                    ),
                    a.states().takeLast(4),
                )
                assertEquals(
                    listOf<SvcDisconnectReason>(
                        SvcDisconnectReason.ClientDisconnect,
                        SvcDisconnectReason.Server(SvcLeaveReason.ROOM_DELETED, null),
                    ),
                    a.of<Seen.Disconnected>().map { it.reason },
                )
            }
        }
    }

    @Test
    fun `a way back refused with 503 and Retry-After waits that long before trying again`() = runBlocking<Unit> {
        val name = uniqueRoom("ctl-back503")
        // The main room's token requests once the breakout room is closing: the first is answered 503.
        val tokenAt = CopyOnWriteArrayList<Long>()
        val closing = AtomicBoolean(false)
        val http = SharedHttp.client.newBuilder().addInterceptor { chain ->
            val request = chain.request()
            if (closing.get() && request.url.encodedPath.endsWith("/v1/realtime/token")) {
                tokenAt.add(System.currentTimeMillis())
                if (tokenAt.size == 1) {
                    val problem = """{"type":"about:blank","title":"x","status":503,"code":"service_unavailable"}"""
                    return@addInterceptor Response.Builder()
                        .request(request)
                        .protocol(Protocol.HTTP_1_1)
                        .code(503)
                        .message("Service Unavailable")
                        .header("retry-after", "2")
                        .body(problem.toResponseBody(null))
                        .build()
                }
            }
            chain.proceed(request)
        }.build()
        TestClient().use { h ->
            TestClient(http = http).use { a ->
                h.client.connect(roomOptions(name, "h", "Host", isHost = true))
                a.client.connect(roomOptions(name, "a", "Ann"))
                val id = h.ctl.createBreakoutRoom("Team A", listOf("a"))
                a.ctl.joinBreakoutRoom(id)
                a.ctl.await("a in the breakout room") { it.breakoutOf?.breakoutId == id }
                closing.set(true)
                h.ctl.closeBreakoutRooms(countdownMs = 0)
                a.ctl.await("a back in the main room") { it.breakoutOf == null && a.client.room?.name == name }
                assertEquals(2, tokenAt.size)
                assertTrue(tokenAt[1] - tokenAt[0] >= 2_000, "retried after ${tokenAt[1] - tokenAt[0]} ms")
            }
        }
    }

    private companion object {
        const val WAIT_MS = 15_000L
    }
}

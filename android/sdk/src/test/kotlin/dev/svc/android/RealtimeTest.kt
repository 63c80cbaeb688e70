package dev.svc.android

import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.filterIsInstance
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** Two or more Kotlin clients in one room of the real server. */
class RealtimeTest {
    private val server = TestServer.shared

    @Test
    fun `two clients see each other join and exchange messages in one order`() = runBlocking {
        val name = uniqueRoom()
        TestClient().use { alice ->
            TestClient().use { bob ->
                val aliceRoom = alice.client.connect(roomOptions(name, "alice", "Alice", isHost = true))
                assertEquals(SvcConnectionState.CONNECTED, alice.client.connectionState.value)
                assertEquals(listOf("alice"), aliceRoom.participants.map { it.userId })
                assertTrue(aliceRoom.localParticipant.isHost)

                val bobRoom = bob.client.connect(roomOptions(name, "bob", "Bob"))
                alice.waitUntil(description = "bob joined") { e -> e.any { it is Seen.Joined && it.participant.userId == "bob" } }
                assertEquals(listOf("alice", "bob"), bobRoom.participants.map { it.userId })
                assertEquals(listOf("bob"), aliceRoom.remoteParticipants.map { it.userId })
                assertTrue(bob.of<Seen.Joined>().isEmpty(), "a client is not told about itself or those already there")
                // onConnected is dispatched to the callback dispatcher, so it may follow connect()'s return.
                bob.waitUntil(description = "bob's onConnected") { e -> e.any { it is Seen.Connected } }

                // Both send at once; everyone sees one order, with the sender attributed.
                val count = 20
                coroutineScope {
                    listOf(
                        async { (1..count).map { aliceRoom.sendMessage("a$it") } },
                        async { (1..count).map { bobRoom.sendMessage("b$it") } },
                    ).awaitAll()
                }
                val restSeq = TestClient(apiKey = server.serverKey).use {
                    it.client.sendRealtimeMessage(SvcSendRealtimeMessageOptions(name, "from the backend", SvcUser("system", "System")))
                }
                val atAlice = alice.waitForMessages(2 * count + 1)
                val atBob = bob.waitForMessages(2 * count + 1)
                assertEquals(atAlice.map { it.seq to it.message }, atBob.map { it.seq to it.message })
                assertEquals(atAlice.map { it.seq }.sorted(), atAlice.map { it.seq })
                assertEquals((1..count).map { "a$it" }, atBob.filter { it.sender.userId == "alice" }.map { it.message })
                assertEquals((1..count).map { "b$it" }, atAlice.filter { it.sender.userId == "bob" }.map { it.message })
                val last = alice.of<Seen.Message>().last()
                assertEquals(restSeq, last.message.seq)
                assertTrue(last.message.viaApi)
                assertNull(last.participant)
                val fromBob = alice.of<Seen.Message>().first { it.message.sender.userId == "bob" }
                assertEquals(bobRoom.localParticipant.sid, fromBob.participant?.sid)
                assertEquals(name, fromBob.message.roomName)

                // Metadata: host only.
                val refused = assertThrows<SvcException> { bobRoom.updateMetadata("x") }
                assertEquals("host_required", refused.code)
                aliceRoom.updateMetadata("{\"stage\":2}")
                bob.waitUntil(description = "metadata") { e -> e.any { it is Seen.Metadata } }
                assertEquals("{\"stage\":2}", bobRoom.info.metadata)

                bob.client.disconnect()
                assertEquals(SvcConnectionState.DISCONNECTED, bob.client.connectionState.value)
                assertNull(bob.client.room)
                alice.waitUntil(description = "bob left") { e -> e.any { it is Seen.Left } }
                assertEquals(SvcLeaveReason.LEFT, alice.of<Seen.Left>().single().reason)
                bob.waitUntil(description = "bob's own onDisconnected and the state record") { e ->
                    e.any { it is Seen.Disconnected } && e.count { it == Seen.State(SvcConnectionState.DISCONNECTED) } == 2
                }
                assertEquals(SvcDisconnectReason.ClientDisconnect, bob.of<Seen.Disconnected>().single().reason)
                assertEquals(
                    listOf(
                        SvcConnectionState.DISCONNECTED,
                        SvcConnectionState.CONNECTING,
                        SvcConnectionState.CONNECTED,
                        SvcConnectionState.DISCONNECTED,
                    ),
                    bob.states(),
                )
            }
        }
    }

    @Test
    fun `events flow carries what the handlers get`() = runBlocking {
        val name = uniqueRoom()
        TestClient().use { alice ->
            TestClient().use { bob ->
                alice.client.connect(roomOptions(name, "alice"))
                val joined = async { withTimeout(20_000) { alice.client.events.filterIsInstance<SvcEvent.UserJoined>().first() } }
                kotlinx.coroutines.yield()
                bob.client.connect(roomOptions(name, "bob"))
                assertEquals("bob", joined.await().participant.userId)
            }
        }
    }

    @Test
    fun `a room at maxParticipants refuses with room_full`() = runBlocking {
        val name = uniqueRoom()
        TestClient(apiKey = server.serverKey).use {
            it.client.createRoom(SvcCreateRoomOptions(name, SvcLiveType.VIDEO_CALL, maxParticipants = 1))
        }
        TestClient().use { alice ->
            TestClient().use { bob ->
                alice.client.connect(roomOptions(name, "alice"))
                val e = assertThrows<SvcException> { bob.client.connect(roomOptions(name, "bob")) }
                assertEquals("room_full", e.code)
                assertEquals(SvcConnectionState.FAILED, bob.client.connectionState.value)
                assertEquals("room_full", bob.client.lastError?.code)
                assertTrue(bob.of<Seen.Connected>().isEmpty())
            }
        }
    }

    @Test
    fun `a bad access token is refused with token_invalid and close 4001`() = runBlocking {
        TestClient().use { t ->
            t.client.rewriteUrl = { it.replace(Regex("access_token=[^&]+"), "access_token=not.a.jwt") }
            val e = assertThrows<SvcException> { t.client.connect(roomOptions(uniqueRoom(), "u1")) }
            assertEquals("token_invalid", e.code)
            assertEquals(4001, e.closeCode)
            assertEquals(SvcConnectionState.FAILED, t.client.connectionState.value)
        }
    }

    @Test
    fun `the same userId elsewhere replaces the first connection`() = runBlocking {
        val name = uniqueRoom()
        TestClient().use { watcher ->
            TestClient().use { first ->
                TestClient().use { second ->
                    watcher.client.connect(roomOptions(name, "watcher"))
                    val firstSid = first.client.connect(roomOptions(name, "dup")).localParticipant.sid
                    watcher.waitUntil(description = "first dup joined") { e -> e.any { it is Seen.Joined } }
                    val secondSid = second.client.connect(roomOptions(name, "dup")).localParticipant.sid
                    assertNotEquals(firstSid, secondSid)

                    first.waitUntil(description = "replaced") { e -> e.any { it is Seen.Disconnected } }
                    assertEquals(
                        SvcDisconnectReason.Server(SvcLeaveReason.DUPLICATE_IDENTITY),
                        first.of<Seen.Disconnected>().single().reason,
                    )
                    assertEquals(SvcConnectionState.DISCONNECTED, first.client.connectionState.value)
                    assertTrue(first.of<Seen.Reconnecting>().isEmpty(), "a replaced client does not reconnect")

                    watcher.waitUntil(description = "left + joined") { e ->
                        e.count { it is Seen.Joined } == 2 && e.any { it is Seen.Left }
                    }
                    val left = watcher.of<Seen.Left>().single()
                    assertEquals(firstSid, left.participant.sid)
                    assertEquals(SvcLeaveReason.DUPLICATE_IDENTITY, left.reason)
                    assertEquals(secondSid, watcher.of<Seen.Joined>().last().participant.sid)
                }
            }
        }
    }

    @Test
    fun `deleting the room ends every session with ROOM_DELETED`() = runBlocking {
        val name = uniqueRoom()
        TestClient().use { t ->
            t.client.connect(roomOptions(name, "u1"))
            TestClient(apiKey = server.serverKey).use { it.client.deleteRoom(name) }
            t.waitUntil(description = "disconnected") { e -> e.any { it is Seen.Disconnected } }
            assertEquals(SvcDisconnectReason.Server(SvcLeaveReason.ROOM_DELETED), t.of<Seen.Disconnected>().single().reason)
            assertEquals(SvcConnectionState.DISCONNECTED, t.client.connectionState.value)
            assertNull(t.client.room)
        }
    }

    @Test
    fun `a participant waits for a host when the token says so`() = runBlocking {
        val name = uniqueRoom()
        TestClient().use { guest ->
            TestClient().use { host ->
                val waiting = async {
                    guest.client.connect(
                        SvcRoomOptions(
                            name,
                            SvcParticipantOptions("guest", "Guest"),
                            SvcLiveType.VIDEO_CONFERENCE,
                            canJoinWithNoHost = false,
                        ),
                    )
                }
                guest.waitUntil(description = "waiting") { e -> e.any { it is Seen.Waiting } }
                assertEquals(SvcConnectionState.CONNECTING, guest.client.connectionState.value)
                host.client.connect(roomOptions(name, "host", isHost = true))
                val room = waiting.await()
                assertEquals(setOf("guest", "host"), room.participants.map { it.userId }.toSet())
            }
        }
    }
}

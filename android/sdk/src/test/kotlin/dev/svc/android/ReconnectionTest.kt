package dev.svc.android

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** Drops of the signaling connection, made by resetting its TCP connection between client and server. */
class ReconnectionTest {
    private val server = TestServer.shared
    private val serverPort = server.baseUrl.substringAfterLast(':').toInt()

    @Test
    fun `a killed socket resumes within the grace period and nobody else notices`() = runBlocking {
        val name = uniqueRoom()
        TcpProxy(serverPort).use { proxy ->
            TestClient().use { alice ->
                TestClient(proxy = proxy).use { bob ->
                    alice.client.connect(roomOptions(name, "alice"))
                    val bobRoom = bob.client.connect(roomOptions(name, "bob"))
                    val sid = bobRoom.localParticipant.sid
                    alice.waitUntil(description = "bob joined") { e -> e.any { it is Seen.Joined } }
                    alice.client.room!!.sendMessage("before")
                    bob.waitForMessages(1)

                    proxy.kill()
                    // (states are recorded by a StateFlow collector of their own: wait for both records)
                    bob.waitUntil(description = "reconnected") { e ->
                        e.any { it is Seen.Reconnected } && e.count { it == Seen.State(SvcConnectionState.CONNECTED) } == 2
                    }
                    assertEquals(
                        listOf(
                            SvcConnectionState.DISCONNECTED,
                            SvcConnectionState.CONNECTING,
                            SvcConnectionState.CONNECTED,
                            SvcConnectionState.RECONNECTING,
                            SvcConnectionState.CONNECTED,
                        ),
                        bob.states(),
                    )
                    assertEquals(sid, bob.client.room!!.localParticipant.sid, "resumed: same session")
                    assertTrue(bob.of<Seen.Reconnecting>().size == 1)

                    // The session works and alice saw nothing: no left, no second joined.
                    alice.client.room!!.sendMessage("after")
                    bob.client.room!!.sendMessage("bob is back")
                    alice.waitForMessages(3)
                    bob.waitForMessages(3)
                    assertEquals(listOf("before", "after", "bob is back"), bob.messages().map { it.message })
                    assertTrue(alice.of<Seen.Left>().isEmpty(), "alice saw ${alice.events}")
                    assertEquals(1, alice.of<Seen.Joined>().size)
                    assertEquals(sid, alice.client.room!!.getParticipant(sid)?.sid)
                }
            }
        }
    }

    @Test
    fun `a drop longer than the grace period rejoins as a new session`() = runBlocking {
        val name = uniqueRoom()
        TcpProxy(serverPort).use { proxy ->
            TestClient().use { alice ->
                TestClient(proxy = proxy).use { bob ->
                    alice.client.connect(roomOptions(name, "alice"))
                    val oldSid = bob.client.connect(roomOptions(name, "bob")).localParticipant.sid
                    alice.waitUntil(description = "bob joined") { e -> e.any { it is Seen.Joined } }

                    proxy.offline = true
                    proxy.kill()
                    bob.waitUntil(description = "reconnecting") { e -> e.any { it is Seen.Reconnecting } }
                    alice.waitUntil(description = "bob left after the grace period") { e -> e.any { it is Seen.Left } }
                    assertEquals(SvcLeaveReason.DISCONNECTED, alice.of<Seen.Left>().single().reason)
                    alice.client.room!!.sendMessage("while bob was away")
                    proxy.offline = false

                    bob.waitUntil(timeoutMs = 40_000, description = "reconnected") { e -> e.any { it is Seen.Reconnected } }
                    val newSid = bob.client.room!!.localParticipant.sid
                    assertNotEquals(oldSid, newSid)
                    alice.waitUntil(description = "bob joined again") { e -> e.count { it is Seen.Joined } == 2 }
                    assertEquals(newSid, alice.of<Seen.Joined>().last().participant.sid)
                    assertEquals(SvcConnectionState.CONNECTED, bob.client.connectionState.value)
                    bob.client.room!!.sendMessage("hello again")
                    alice.waitUntil(description = "message from the new session") { e ->
                        e.any { it is Seen.Message && it.message.message == "hello again" && it.participant?.sid == newSid }
                    }
                }
            }
        }
    }

    @Test
    fun `reconnection gives up after the policy's attempts`() = runBlocking {
        val name = uniqueRoom()
        TcpProxy(serverPort).use { proxy ->
            TestClient(proxy = proxy, reconnect = SvcReconnectPolicy(maxAttempts = 3, initialDelayMs = 20, maxDelayMs = 40)).use { bob ->
                bob.client.connect(roomOptions(name, "bob"))
                proxy.offline = true
                proxy.kill()
                bob.waitUntil(description = "gave up") { e -> e.any { it is Seen.Disconnected } }
                assertEquals(SvcDisconnectReason.ReconnectFailed, bob.of<Seen.Disconnected>().single().reason)
                assertEquals(SvcConnectionState.FAILED, bob.client.connectionState.value)
                assertEquals("reconnect_failed", bob.client.lastError?.code)
                assertEquals(null, bob.client.room)
            }
        }
    }
}

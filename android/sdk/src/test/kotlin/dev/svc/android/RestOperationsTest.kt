package dev.svc.android

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** Every REST operation of the public API against the real server, and the server's refusals. */
class RestOperationsTest {
    private val server = TestServer.shared

    @Test
    fun `rooms, tokens and REST messages with a server key`() = runBlocking {
        TestClient(apiKey = server.serverKey).use { t ->
            val c = t.client
            val name = uniqueRoom()
            val created = c.createRoom(
                SvcCreateRoomOptions(name, SvcLiveType.AUDIO_CONFERENCE, maxParticipants = 5, metadata = "{\"topic\":\"x\"}"),
            )
            assertEquals(name, created.roomName)
            assertEquals(SvcLiveType.AUDIO_CONFERENCE, created.liveType)
            assertEquals(SvcRoomStatus.IDLE, created.status)
            assertEquals(5, created.maxParticipants)
            assertEquals("{\"topic\":\"x\"}", created.metadata)

            assertEquals(created, c.getRoom(name))
            val page = c.listRooms(limit = 100)
            assertTrue(page.items.any { it.roomName == name }, "listRooms shows the new room")
            assertEquals(100, page.meta.limit)

            val token = c.getToken(roomOptions(name, "u-token"))
            assertEquals(name, token.roomName)
            assertEquals("u-token", token.userId)
            assertTrue(token.wsUrl.contains("access_token="), token.wsUrl)
            assertTrue(c.getParticipants(name).isEmpty())

            val seq = c.sendRealtimeMessage(SvcSendRealtimeMessageOptions(name, "from the backend", SvcUser("system", "System")))
            assertTrue(seq >= 1)

            val duplicate = assertThrows<SvcException> { c.createRoom(SvcCreateRoomOptions(name, SvcLiveType.VIDEO_CALL)) }
            assertEquals("room_exists", duplicate.code)
            assertEquals(409, duplicate.status)
            assertTrue(duplicate.requestId!!.isNotEmpty())

            c.deleteRoom(name)
            assertEquals(SvcRoomStatus.ENDED, c.getRoom(name).status)

            val missing = assertThrows<SvcException> { c.getRoom(uniqueRoom("missing")) }
            assertEquals("room_not_found", missing.code)
            assertEquals(404, missing.status)
        }
    }

    @Test
    fun `a client key on a server-only operation gets server_key_required`() = runBlocking {
        TestClient().use { t ->
            val e = assertThrows<SvcException> { t.client.listRooms() }
            assertEquals("server_key_required", e.code)
            assertEquals(403, e.status)
            assertEquals("This operation requires a server key.", e.message)
            // what a client key may do
            val token = t.client.getToken(roomOptions(uniqueRoom(), "u1"))
            assertEquals("u1", token.userId)
        }
    }

    @Test
    fun `a bad API key is refused before any socket opens`() = runBlocking {
        TestClient(apiKey = "svc_pk_not_a_real_key").use { t ->
            val e = assertThrows<SvcException> { t.client.connect(roomOptions(uniqueRoom(), "u1")) }
            assertEquals("invalid_api_key", e.code)
            assertEquals(401, e.status)
            assertEquals(SvcConnectionState.FAILED, t.client.connectionState.value)
            assertEquals(e, t.client.lastError)
            assertNull(t.client.room)
            t.client.disconnect()
            assertEquals(SvcConnectionState.DISCONNECTED, t.client.connectionState.value)
        }
    }

    @Test
    fun `the server's validation errors keep their code`() = runBlocking {
        TestClient(apiKey = server.serverKey).use { t ->
            val e = assertThrows<SvcException> {
                t.client.sendRealtimeMessage(SvcSendRealtimeMessageOptions(uniqueRoom("nobody"), "hi", SvcUser("u", "U")))
            }
            assertEquals("room_not_found", e.code)
        }
    }
}

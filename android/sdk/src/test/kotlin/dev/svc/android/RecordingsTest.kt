package dev.svc.android

import com.sun.net.httpserver.HttpServer
import java.net.InetAddress
import java.net.InetSocketAddress
import java.util.concurrent.CopyOnWriteArrayList
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/**
 * The recording operations against the recordings API (`/v1/realtime/recordings…`). On the real server
 * (no Janus in these tests, so nothing is recorded): listing and getting, the refusals of a missing
 * recording or room, and who may call (a server key; a client key only with the room token of a host or
 * co-host present in the room). The successful start and stop need Janus (MediaTest's environment): a
 * loopback HTTP server stands in for their answers, recording each request, so the requests (method,
 * path, query, body, headers, defaults) and the decoding of the documented answers are checked too.
 */
class RecordingsTest {
    private data class Seen(val method: String, val path: String, val query: String?, val body: String, val roomToken: String?)

    private val seen = CopyOnWriteArrayList<Seen>()
    private val info =
        """{"egressId":"EG_1","roomName":"r1","status":"STARTED","fileType":"MP4","filepath":"r1/EG_1.mp4",""" +
            """"startedAt":"2026-11-27T07:00:00.000Z"}"""
    private val http = HttpServer.create(InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0).apply {
        createContext("/") { exchange ->
            val path = exchange.requestURI.path
            seen += Seen(
                exchange.requestMethod,
                path,
                exchange.requestURI.query,
                exchange.requestBody.readBytes().decodeToString(),
                exchange.requestHeaders.getFirst("X-Room-Token"),
            )
            val (status, body) = when {
                path.endsWith("/EG_404") ->
                    404 to
                        """{"type":"about:blank","title":"x","status":404,"code":"recording_not_found","detail":"No recording EG_404.","requestId":"req_9"}"""

                path.endsWith("/stop") ->
                    200 to
                        """{"egressId":"EG_1","status":"COMPLETED","durationMs":5012,"sizeBytes":123456,"ok":true,"endedAt":null}"""

                path.endsWith("/active") -> 200 to """{"items":[$info]}"""

                path.endsWith("/download-url") -> 200 to """{"downloadUrl":"http://127.0.0.1/dl/EG_1?sig=abc","expiresIn":600}"""

                path.endsWith("/recordings") && exchange.requestMethod == "GET" ->
                    200 to
                        """{"items":[$info],"meta":{"total":1,"page":1,"limit":10}}"""

                else -> 200 to info
            }
            val bytes = body.toByteArray()
            exchange.responseHeaders.add("Content-Type", "application/json")
            exchange.sendResponseHeaders(status, bytes.size.toLong())
            exchange.responseBody.use { it.write(bytes) }
        }
        start()
    }

    private val client = SvcClient(
        SvcConfig("prj_1", "svc_sk_test", baseUrl = "http://127.0.0.1:${http.address.port}"),
        GrantedPlatform(),
        mediaEngineFactory = { throw AssertionError("no media") },
    )

    @AfterEach
    fun tearDown() = http.stop(0)

    @Test
    fun `on the real server, recordings are listed and refused by the server's rules`() = runBlocking<Unit> {
        val server = TestServer.shared
        val name = uniqueRoom("rec")
        TestClient(apiKey = server.serverKey).use { backend ->
            val page = backend.client.listRecordings(SvcListRecordingsOptions(status = "COMPLETED", page = 1, limit = 5))
            assertEquals(5, page.meta.limit)
            assertTrue(page.items.all { it.status == "COMPLETED" })
            assertTrue(backend.client.listActiveRecordings(name).isEmpty())
            for (call in listOf<suspend () -> Unit>(
                { backend.client.getRecording("EG_missing") },
                { backend.client.getRecordingDownloadUrl("EG_missing") },
                { backend.client.stopRecord("EG_missing") },
            )) {
                val e = assertThrows<SvcException> { call() }
                assertEquals("recording_not_found", e.code)
                assertEquals(404, e.status)
                assertTrue(e.requestId != null)
            }
            assertEquals(
                "room_not_found",
                assertThrows<SvcException> {
                    backend.client.startRecord(SvcStartRecordingOptions("$name-none"))
                }.code,
            )
        }
        TestClient().use { host ->
            TestClient().use { ann ->
                // A bare client key is refused; a participant's room token too, until a host makes it a co-host.
                assertEquals("server_key_required", assertThrows<SvcException> { ann.client.listRecordings() }.code)
                host.client.connect(roomOptions(name, "h", "Host", isHost = true))
                ann.client.connect(roomOptions(name, "ann", "Ann"))
                assertEquals("host_required", assertThrows<SvcException> { ann.client.listRecordings() }.code)
                host.client.controller.promoteToCoHost("ann")
                withTimeout(10_000) { ann.client.controller.state.first { "ann" in it.coHosts } }
                assertEquals(0, ann.client.listRecordings().meta.total)
                assertTrue(ann.client.listActiveRecordings(name).isEmpty())
                val other = assertThrows<SvcException> { ann.client.startRecord(SvcStartRecordingOptions("$name-other")) }
                assertEquals("token_room_mismatch", other.code)
                assertEquals("recording_not_found", assertThrows<SvcException> { ann.client.getRecording("EG_missing") }.code)
                assertEquals("recording_not_found", assertThrows<SvcException> { ann.client.pauseRecord("EG_missing") }.code)
                assertEquals("recording_not_found", assertThrows<SvcException> { ann.client.resumeRecord("EG_missing") }.code)
            }
        }
    }

    @Test
    fun `every recording operation calls its route with the documented defaults`() = runBlocking {
        val started = client.startRecord(SvcStartRecordingOptions("r1"))
        assertEquals(
            SvcRecordingInfo("EG_1", "r1", "STARTED", SvcRecordingFileType.MP4, "r1/EG_1.mp4", "2026-11-27T07:00:00.000Z"),
            started,
        )
        assertEquals(Seen("POST", "/v1/realtime/recordings", null, """{"roomName":"r1","fileType":"MP4"}""", null), seen.last())
        client.startRecord(SvcStartRecordingOptions("r1", filepath = "a/b.ogg", fileType = SvcRecordingFileType.OGG))
        assertEquals("""{"roomName":"r1","filepath":"a/b.ogg","fileType":"OGG"}""", seen.last().body)

        val stopped = client.stopRecord("EG_1")
        assertEquals(
            mapOf(
                "egressId" to "EG_1",
                "status" to "COMPLETED",
                "durationMs" to 5012L,
                "sizeBytes" to 123456L,
                "ok" to true,
                "endedAt" to null,
            ),
            stopped,
        )
        assertEquals("POST" to "/v1/realtime/recordings/EG_1/stop", seen.last().method to seen.last().path)

        assertEquals(listOf("EG_1"), client.listActiveRecordings("r1").map { it.egressId })
        assertEquals("/v1/realtime/recordings/active" to "roomName=r1", seen.last().path to seen.last().query)
        client.listActiveRecordings()
        assertNull(seen.last().query)

        assertEquals(1, client.listRecordings().meta.total)
        assertEquals("page=1&limit=10", seen.last().query)
        client.listRecordings(SvcListRecordingsOptions(status = "COMPLETED", page = 3, limit = 50))
        assertEquals("status=COMPLETED&page=3&limit=50", seen.last().query)

        assertEquals("EG_1", client.getRecording("EG_1").egressId)
        assertEquals("/v1/realtime/recordings/EG_1", seen.last().path)

        assertEquals(600, client.getRecordingDownloadUrl("EG_1", expiresIn = 600).expiresIn)
        assertEquals("expiresIn=600", seen.last().query)
        client.getRecordingDownloadUrl("EG_1")
        assertEquals("/v1/realtime/recordings/EG_1/download-url" to "expiresIn=3600", seen.last().path to seen.last().query)

        val missing = assertThrows<SvcException> { client.getRecording("EG_404") }
        assertEquals("recording_not_found", missing.code)
        assertEquals("No recording EG_404.", missing.message)
        assertEquals(404, missing.status)
        assertEquals("req_9", missing.requestId)
    }
}

package dev.svc.android

import dev.onvoid.webrtc.media.audio.AudioTrack
import dev.onvoid.webrtc.media.audio.AudioTrackSink
import dev.onvoid.webrtc.media.video.VideoTrack
import dev.onvoid.webrtc.media.video.VideoTrackSink
import java.io.File
import java.util.concurrent.atomic.AtomicInteger
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assumptions.assumeTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows

/**
 * Real media: two Kotlin clients publish their microphones (libwebrtc's headless audio device) and a
 * generated camera through
 * the Svc server and its embedded Janus, subscribe to each other, and receive and decode each other's audio. Janus gathers ICE on every
 * interface and the JVM's libwebrtc on the non-loopback ones, so media stays on this machine.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MediaTest {
    private lateinit var server: TestServer
    private val adminPort = TestServer.freePort()

    @BeforeAll
    fun start() {
        assumeTrue(File("/usr/bin/janus").exists(), "Janus is not installed (apt-get install janus)")
        server = TestServer.start(
            mapOf(
                "SVC_MEDIA" to "auto",
                "SVC_JANUS_WS_PORT" to TestServer.freePort().toString(),
                "SVC_JANUS_ADMIN_PORT" to adminPort.toString(),
                "SVC_JANUS_ADMIN_SECRET" to ADMIN_SECRET,
                "SVC_MEDIA_RTP_PORTS" to "42000-42400",
            ),
        )
        // Janus starts as the server's child: wait until /readyz says media is up.
        runBlocking {
            val http = OkHttpClient()
            withTimeout(30_000) {
                while (true) {
                    val body = http.newCall(Request.Builder().url("${server.baseUrl}/readyz").build()).execute().use { it.body.string() }
                    if (Regex("\"media\":\\{\"state\":\"up\"").containsMatchIn(body)) break
                    delay(100)
                }
            }
        }
    }

    @AfterAll
    fun stop() {
        if (::server.isInitialized) server.stop()
    }

    private suspend fun inbound(engine: JvmMediaEngine, key: String): Long = sum(engine, "INBOUND_RTP", key)

    private suspend fun outbound(engine: JvmMediaEngine, key: String): Long = sum(engine, "OUTBOUND_RTP", key)

    private suspend fun sum(engine: JvmMediaEngine, type: String, key: String): Long =
        engine.stats().filter { it.type.name == type }.sumOf { (it.attributes[key] as? Number)?.toLong() ?: 0L }

    /** Alice and Bob in one new room, each with her or his JVM media engine, both connected. */
    private class Duo(val alice: TestClient, val bob: TestClient, val aliceEngine: JvmMediaEngine, val bobEngine: JvmMediaEngine)

    /** Runs [body] with a new [Duo]. */
    private fun inPair(prefix: String, body: suspend Duo.() -> Unit) = runBlocking {
        val name = uniqueRoom(prefix)
        val aliceEngine = JvmMediaEngine()
        val bobEngine = JvmMediaEngine()
        TestClient(server, media = { aliceEngine }).use { alice ->
            TestClient(server, media = { bobEngine }).use { bob ->
                alice.client.connect(roomOptions(name, "alice"))
                bob.client.connect(roomOptions(name, "bob"))
                Duo(alice, bob, aliceEngine, bobEngine).body()
            }
        }
    }

    @Test
    fun `two clients hear each other through the server and Janus`() = inPair("media") {
        alice.client.enableMicrophone()
        bob.client.enableMicrophone()

        for ((me, other) in listOf(alice to "bob", bob to "alice")) {
            me.waitUntil(description = "$other's microphone started") { e ->
                e.any { it is Seen.MediaStarted && it.track.userId == other }
            }
            val track = me.of<Seen.MediaStarted>().first { it.track.userId == other }.track
            assertEquals(SvcTrackKind.AUDIO, track.kind)
            assertEquals(SvcTrackSource.MICROPHONE, track.source)
            // auto-subscribe delivers the remote track
            withTimeout(20_000) { while (me.client.remoteMediaTrack(track.trackId) == null) delay(50) }
            assertTrue(me.client.remoteMediaTrack(track.trackId) is AudioTrack)
        }
        // RTP flows through Janus both ways and is decoded: 50 packets = 1 s of 20 ms Opus frames.
        for ((who, engine) in listOf("alice" to aliceEngine, "bob" to bobEngine)) {
            withTimeout(30_000) {
                while (inbound(engine, "packetsReceived") < 50) delay(200)
            }
            assertTrue(inbound(engine, "bytesReceived") > 0, "$who received audio bytes")
            assertTrue(outbound(engine, "packetsSent") >= 50, "$who sent audio")
            println(
                "media: $who received ${inbound(
                    engine,
                    "packetsReceived",
                )} packets, ${inbound(engine, "totalSamplesReceived")} samples decoded",
            )
        }

        assertEquals(2, alice.client.room!!.tracks.size)
        alice.client.disableMicrophone()
        bob.waitUntil(description = "alice's microphone stopped") { e ->
            e.any {
                it is Seen.MediaStopped &&
                    it.track.userId == "alice"
            }
        }
        assertEquals(listOf("bob"), bob.client.room!!.tracks.map { it.userId })
    }

    @Test
    fun `a recording started from Kotlin by the host gives a real OGG file`() = runBlocking {
        assumeTrue(File("/usr/bin/janus-pp-rec").exists(), "janus-pp-rec is not installed (apt-get install janus-tools)")
        val name = uniqueRoom("rec")
        val engine = JvmMediaEngine()
        TestClient(server, media = { engine }).use { host ->
            host.client.connect(roomOptions(name, "host", isHost = true))
            host.client.enableMicrophone()
            withTimeout(30_000) { while (outbound(engine, "packetsSent") < 10) delay(50) }
            // With the publishable key: the client sends its host token (X-Room-Token).
            val started = host.client.startRecord(SvcStartRecordingOptions(name, fileType = SvcRecordingFileType.OGG))
            assertEquals("STARTED", started.status)
            assertEquals(listOf(started.egressId), host.client.listActiveRecordings(name).map { it.egressId })
            // About 2 s of audio into the recording (20 ms Opus frames).
            val sent = outbound(engine, "packetsSent")
            withTimeout(30_000) { while (outbound(engine, "packetsSent") < sent + 100) delay(100) }
            val stopped = host.client.stopRecord(started.egressId)
            assertEquals("COMPLETED", stopped["status"], stopped.toString())
            val info = host.client.getRecording(started.egressId)
            assertEquals(1, info.files?.size, info.toString())
            val duration = info.duration ?: 0.0
            assertTrue(duration > 1.0 && duration < 30.0, "duration $duration")
            val url = host.client.getRecordingDownloadUrl(started.egressId, expiresIn = 60)
            // The signed URL opens without an API key.
            val bytes = OkHttpClient().newCall(Request.Builder().url(url.downloadUrl).build()).execute().use {
                assertEquals(200, it.code)
                it.body.bytes()
            }
            assertEquals("OggS", String(bytes, 0, 4, Charsets.US_ASCII))
            assertEquals(info.size, bytes.size.toLong())
        }
    }

    @Test
    fun `a camera published through Janus is received and decoded by the other client`() = inPair("video") {
        alice.client.enableCamera()
        bob.waitUntil(description = "alice's camera started") { e ->
            e.any { it is Seen.MediaStarted && it.track.userId == "alice" }
        }
        val track = bob.of<Seen.MediaStarted>().first { it.track.userId == "alice" }.track
        assertEquals(SvcTrackKind.VIDEO, track.kind)
        assertEquals(SvcTrackSource.CAMERA, track.source)
        withTimeout(20_000) { while (bob.client.remoteMediaTrack(track.trackId) == null) delay(50) }
        val video = bob.client.remoteMediaTrack(track.trackId) as VideoTrack
        // Frames reach bob's sink decoded, at the size alice's source generates.
        val sizes = java.util.concurrent.ConcurrentLinkedQueue<Pair<Int, Int>>()
        val sink = VideoTrackSink { frame -> sizes += frame.buffer.width to frame.buffer.height }
        video.addSink(sink)
        try {
            withTimeout(30_000) { while (sizes.size < 30) delay(100) }
        } finally {
            video.removeSink(sink)
        }
        assertTrue(sizes.any { it == JvmMediaEngine.VIDEO_WIDTH to JvmMediaEngine.VIDEO_HEIGHT }, "frame sizes ${sizes.toSet()}")
        assertTrue(inbound(bobEngine, "framesDecoded") >= 30, "bob decoded alice's video")
        assertTrue(outbound(aliceEngine, "framesEncoded") >= 30, "alice encoded her camera")
        println("media: bob decoded ${inbound(bobEngine, "framesDecoded")} video frames, sizes ${sizes.toSet()}")

        alice.client.disableCamera()
        bob.waitUntil(description = "alice's camera stopped") { e ->
            e.any { it is Seen.MediaStopped && it.track.userId == "alice" }
        }
    }

    /** One request to Janus's admin API, on a WebSocket of its own; returns the answer. */
    private suspend fun janusAdmin(vararg fields: Pair<String, Any>): JsonObject {
        val transaction = "t${System.nanoTime()}"
        val body = fields.associate { (k, v) -> k to (if (v is Number) JsonPrimitive(v) else JsonPrimitive(v.toString())) } +
            mapOf("transaction" to JsonPrimitive(transaction), "admin_secret" to JsonPrimitive(ADMIN_SECRET))
        val answer = CompletableDeferred<JsonObject>()
        val request = Request.Builder().url("ws://127.0.0.1:$adminPort").header("Sec-WebSocket-Protocol", "janus-admin-protocol").build()
        val socket = OkHttpClient().newWebSocket(
            request,
            object : WebSocketListener() {
                override fun onOpen(webSocket: WebSocket, response: Response) {
                    webSocket.send(JsonObject(body).toString())
                }

                override fun onMessage(webSocket: WebSocket, text: String) {
                    val m = Json.parseToJsonElement(text).jsonObject
                    if (m["transaction"]?.jsonPrimitive?.content == transaction) answer.complete(m)
                }

                override fun onFailure(webSocket: WebSocket, t: Throwable, response: Response?) {
                    answer.completeExceptionally(t)
                }
            },
        )
        try {
            return withTimeout(10_000) { answer.await() }
        } finally {
            socket.close(1000, null)
        }
    }

    /** Janus's subscriber handles, as (session, handle). */
    private suspend fun subscriberHandles(): List<Pair<Long, Long>> {
        val out = ArrayList<Pair<Long, Long>>()
        for (session in janusAdmin("janus" to "list_sessions").getValue("sessions").jsonArray) {
            val sessionId = session.jsonPrimitive.long
            for (handle in janusAdmin("janus" to "list_handles", "session_id" to sessionId).getValue("handles").jsonArray) {
                val handleId = handle.jsonPrimitive.long
                val info = janusAdmin("janus" to "handle_info", "session_id" to sessionId, "handle_id" to handleId)
                val type = (info["info"] as? JsonObject)?.get("plugin_specific")?.let { (it as? JsonObject)?.get("type") }
                if ((type as? JsonElement)?.jsonPrimitive?.content == "subscriber") out += sessionId to handleId
            }
        }
        return out
    }

    @Test
    fun `a subscription whose PeerConnection Janus hangs up is subscribed to again`() = inPair("hangup") {
        val track = aliceMicrophoneAtBob()
        val first = bob.client.remoteMediaTrack(track.trackId)
        val hungUp = subscriberHandles()
        assertEquals(1, hungUp.size, "bob's one subscription")
        janusAdmin("janus" to "hangup_webrtc", "session_id" to hungUp[0].first, "handle_id" to hungUp[0].second)

        // media.ended: bob subscribes again at once (ICE failure would take 15 s or more), on a new
        // PeerConnection and Janus handle, and hears alice.
        withTimeout(8_000) {
            while (bob.client.remoteMediaTrack(track.trackId).let { it == null || it === first }) delay(50)
        }
        hears(bob, track.trackId)
        val now = subscriberHandles()
        assertEquals(1, now.size, "one subscription again")
        assertTrue(now[0].second != hungUp[0].second, "a new Janus handle")
    }

    /** Alice publishes her microphone; returns its track once Bob receives it. */
    private suspend fun Duo.aliceMicrophoneAtBob(): SvcTrackInfo {
        alice.client.enableMicrophone()
        bob.waitUntil(description = "alice's microphone started") { e ->
            e.any { it is Seen.MediaStarted && it.track.userId == "alice" }
        }
        val track = bob.of<Seen.MediaStarted>().first { it.track.userId == "alice" }.track
        withTimeout(20_000) { while (bob.client.remoteMediaTrack(track.trackId) == null) delay(50) }
        return track
    }

    /** Waits until [who] receives 0.5 s of decoded audio of [trackId]. */
    private suspend fun hears(who: TestClient, trackId: String) {
        val audio = who.client.remoteMediaTrack(trackId) as AudioTrack
        val chunks = AtomicInteger()
        val sink = AudioTrackSink { _, _, _, _, _ -> chunks.incrementAndGet() }
        audio.addSink(sink)
        try {
            withTimeout(20_000) { while (chunks.get() < 50) delay(50) }
        } finally {
            audio.removeSink(sink)
        }
    }

    @Test
    fun `PeerConnections that fail are subscribed and published again`() = inPair("failed") {
        val track = aliceMicrophoneAtBob()
        val first = bob.client.remoteMediaTrack(track.trackId)
        val handles = subscriberHandles()

        // Bob's subscription fails: released on the server, subscribed to again on a new PeerConnection.
        bobEngine.reportFailed()
        withTimeout(10_000) {
            while (bob.client.remoteMediaTrack(track.trackId).let { it == null || it === first }) delay(50)
        }
        hears(bob, track.trackId)
        val now = subscriberHandles()
        assertEquals(1, now.size, "the failed subscription was released: $now")
        assertTrue(now != handles, "a new Janus handle")

        // Alice's publication fails: unpublished, and her microphone published again as a new track.
        aliceEngine.reportFailed()
        bob.waitUntil(description = "alice's microphone published again") { e ->
            e.any { it is Seen.MediaStopped && it.track.trackId == track.trackId } &&
                e.any { it is Seen.MediaStarted && it.track.userId == "alice" && it.track.trackId != track.trackId }
        }
        val again = bob.of<Seen.MediaStarted>().last { it.track.userId == "alice" }.track
        withTimeout(20_000) { while (bob.client.remoteMediaTrack(again.trackId) == null) delay(50) }
        hears(bob, again.trackId)
        assertEquals(listOf(again.trackId), alice.client.room!!.tracks.map { it.trackId })
    }

    @Test
    fun `a subscription that keeps failing is given up with onMediaError`() = inPair("giveup") {
        val track = aliceMicrophoneAtBob()
        bobEngine.hideConnected = true
        // Four failures in a row are re-established, each on a new PeerConnection; the fifth gives up.
        repeat(4) {
            val current = bob.client.remoteMediaTrack(track.trackId)
            bobEngine.reportFailed()
            withTimeout(10_000) {
                while (bob.client.remoteMediaTrack(track.trackId).let { it == null || it === current }) delay(20)
            }
        }
        assertTrue(bob.of<Seen.MediaError>().isEmpty())
        bobEngine.reportFailed()
        bob.waitUntil(description = "the subscription given up") { e -> e.any { it is Seen.MediaError } }
        assertEquals("media_failed", bob.of<Seen.MediaError>().single().error.code)
        assertEquals(null, bob.client.remoteMediaTrack(track.trackId))
        withTimeout(10_000) { while (subscriberHandles().isNotEmpty()) delay(50) }
    }

    @Test
    fun `an audio conference refuses the camera with media_not_allowed`() = runBlocking {
        TestClient(server, media = { JvmMediaEngine() }).use { t ->
            t.client.connect(roomOptions(uniqueRoom("audio"), "carol", liveType = SvcLiveType.AUDIO_CONFERENCE))
            val e = assertThrows<SvcException> { t.client.enableCamera() }
            assertEquals("media_not_allowed", e.code)
        }
    }
}

private const val ADMIN_SECRET = "kotlin-media-admin"

package dev.svc.android

import dev.onvoid.webrtc.media.audio.AudioTrack
import dev.onvoid.webrtc.media.video.VideoTrack
import dev.onvoid.webrtc.media.video.VideoTrackSink
import java.io.File
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.OkHttpClient
import okhttp3.Request
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

    @BeforeAll
    fun start() {
        assumeTrue(File("/usr/bin/janus").exists(), "Janus is not installed (apt-get install janus)")
        server = TestServer.start(
            mapOf(
                "SVC_MEDIA" to "auto",
                "SVC_JANUS_WS_PORT" to TestServer.freePort().toString(),
                "SVC_JANUS_ADMIN_PORT" to TestServer.freePort().toString(),
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

    @Test
    fun `an audio conference refuses the camera with media_not_allowed`() = runBlocking {
        TestClient(server, media = { JvmMediaEngine() }).use { t ->
            t.client.connect(roomOptions(uniqueRoom("audio"), "carol", liveType = SvcLiveType.AUDIO_CONFERENCE))
            val e = assertThrows<SvcException> { t.client.enableCamera() }
            assertEquals("media_not_allowed", e.code)
        }
    }
}

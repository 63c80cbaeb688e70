package dev.svc.android

import dev.onvoid.webrtc.media.audio.AudioTrack
import dev.onvoid.webrtc.media.audio.AudioTrackSink
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
import java.io.File
import java.util.concurrent.atomic.AtomicLong
import kotlin.math.sqrt

/**
 * Real media: two Kotlin clients publish their (synthetic) microphones through the Svc server and its
 * embedded Janus, subscribe to each other, and decode each other's tone. Janus gathers ICE on every
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

    /** Counts the received samples and their energy. */
    private class Meter : AudioTrackSink {
        val samples = AtomicLong()
        private val squares = AtomicLong()

        override fun onData(data: ByteArray, bitsPerSample: Int, sampleRate: Int, channels: Int, frames: Int) {
            var sum = 0L
            for (i in 0 until frames * channels) {
                val v = (data[2 * i].toInt() and 0xff) or (data[2 * i + 1].toInt() shl 8)
                sum += v.toLong() * v
            }
            squares.addAndGet(sum / (frames * channels).coerceAtLeast(1))
            samples.addAndGet(frames.toLong())
        }

        fun rms(): Double = sqrt(squares.get().toDouble() / (samples.get() / 480).coerceAtLeast(1))
    }

    @Test
    fun `two clients hear each other through the server and Janus`() = runBlocking {
        val name = uniqueRoom("media")
        TestClient(server, media = { JvmMediaEngine() }).use { alice ->
            TestClient(server, media = { JvmMediaEngine() }).use { bob ->
                alice.client.connect(roomOptions(name, "alice"))
                bob.client.connect(roomOptions(name, "bob"))
                alice.client.enableMicrophone()
                bob.client.enableMicrophone()

                val meters = mutableMapOf<String, Meter>()
                for ((me, other) in listOf(alice to "bob", bob to "alice")) {
                    me.waitUntil(description = "$other's microphone started") { e ->
                        e.any { it is Seen.MediaStarted && it.track.userId == other }
                    }
                    val track = me.of<Seen.MediaStarted>().first { it.track.userId == other }.track
                    assertEquals(SvcTrackKind.AUDIO, track.kind)
                    assertEquals(SvcTrackSource.MICROPHONE, track.source)
                    // auto-subscribe delivers the remote track
                    val remote = withTimeout(20_000) {
                        var t: Any? = null
                        while (t == null) {
                            t = me.client.remoteMediaTrack(track.trackId)
                            if (t == null) delay(50)
                        }
                        t
                    }
                    val meter = Meter()
                    (remote as AudioTrack).addSink(meter)
                    meters[other] = meter
                }
                // Decoded audio flows both ways, and it is the tone, not silence.
                withTimeout(30_000) {
                    while (meters.values.any { it.samples.get() < 48_000 }) delay(100)
                }
                for ((who, meter) in meters) assertTrue(meter.rms() > 1_000, "audio from $who is the tone (rms ${meter.rms()})")

                assertEquals(2, alice.client.room!!.tracks.size)
                alice.client.disableMicrophone()
                bob.waitUntil(description = "alice's microphone stopped") { e -> e.any { it is Seen.MediaStopped && it.track.userId == "alice" } }
                assertEquals(listOf("bob"), bob.client.room!!.tracks.map { it.userId })
            }
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

package dev.svc.android

import dev.svc.android.internal.Platform
import java.util.concurrent.ScheduledThreadPoolExecutor
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout

/**
 * A device that granted every permission; handlers run on one thread of their own (with its own timers), as on a
 * main thread. A cancelled timer (a request's timeout, once answered) leaves the queue at once, as a Handler's
 * removed callback does, instead of waking the thread at its deadline.
 */
class GrantedPlatform(override val packageName: String? = "dev.svc.android.test") : Platform {
    override fun missingPermissions(permissions: List<String>): List<String> = emptyList()

    override val callbackDispatcher: CoroutineDispatcher = ScheduledThreadPoolExecutor(1) { r ->
        Thread(r, "svc-test-callbacks").apply { isDaemon = true }
    }.apply { removeOnCancelPolicy = true }.asCoroutineDispatcher()
}

/** What a client's handlers reported, in order. */
sealed class Seen {
    data class State(val state: SvcConnectionState) : Seen()

    data class Joined(val participant: SvcParticipant) : Seen()

    data class Left(val participant: SvcParticipant, val reason: SvcLeaveReason?) : Seen()

    data class Message(val message: SvcRealtimeMessage, val participant: SvcParticipant?) : Seen()

    object Connected : Seen()

    data class Disconnected(val reason: SvcDisconnectReason) : Seen()

    object Reconnecting : Seen()

    object Reconnected : Seen()

    object Waiting : Seen()

    data class Metadata(val metadata: String?) : Seen()

    data class MediaStarted(val participant: SvcParticipant?, val track: SvcTrackInfo) : Seen()

    data class MediaStopped(val participant: SvcParticipant?, val track: SvcTrackInfo) : Seen()

    data class MediaError(val error: SvcException) : Seen()
}

/** A real [SvcClient] against the test server, with every handler recorded and an optional proxy. */
internal class TestClient(
    server: TestServer = TestServer.shared,
    apiKey: String = server.clientKey,
    reconnect: SvcReconnectPolicy = SvcReconnectPolicy(),
    val proxy: TcpProxy? = null,
    media: () -> dev.svc.android.internal.MediaEngine = { throw AssertionError("this test uses no media") },
    http: okhttp3.OkHttpClient = dev.svc.android.internal.SharedHttp.client,
) : AutoCloseable {
    val client = SvcClient(
        SvcConfig(
            projectId = server.projectId,
            apiKey = apiKey,
            baseUrl = server.baseUrl,
            reconnectPolicy = reconnect,
            heartbeatIntervalMs = 0,
        ),
        GrantedPlatform(),
        http,
        mediaEngineFactory = media,
    )
    private val seen = MutableStateFlow<List<Seen>>(emptyList())

    val events: List<Seen> get() = seen.value

    init {
        proxy?.let { p -> client.rewriteUrl = p::route }
        client.onUserJoined = { push(Seen.Joined(it)) }
        client.onUserLeft = { p, reason -> push(Seen.Left(p, reason)) }
        client.onMessageReceived = { m, p -> push(Seen.Message(m, p)) }
        client.onConnected = { push(Seen.Connected) }
        client.onDisconnected = { push(Seen.Disconnected(it)) }
        client.onReconnecting = { push(Seen.Reconnecting) }
        client.onReconnected = { push(Seen.Reconnected) }
        client.onWaitingForHost = { push(Seen.Waiting) }
        client.onRoomMetadataChanged = { push(Seen.Metadata(it)) }
        client.onMediaStarted = { p, track -> push(Seen.MediaStarted(p, track)) }
        client.onMediaStopped = { p, track -> push(Seen.MediaStopped(p, track)) }
        client.onMediaError = { push(Seen.MediaError(it)) }
        // States are recorded from the StateFlow itself (every distinct value, in order).
        Thread({
            runBlocking { client.connectionState.collect { push(Seen.State(it)) } }
        }, "svc-test-state").apply { isDaemon = true }.start()
    }

    private fun push(event: Seen) {
        synchronized(seen) { seen.value = seen.value + event }
    }

    /** Waits (on events, never on time) until [predicate] holds for the events so far. */
    suspend fun waitUntil(timeoutMs: Long = 20_000, description: String = "condition", predicate: (List<Seen>) -> Boolean) {
        try {
            withTimeout(timeoutMs) { seen.first(predicate) }
        } catch (e: kotlinx.coroutines.TimeoutCancellationException) {
            throw AssertionError("timed out waiting for $description; saw ${events.joinToString()}", e)
        }
    }

    inline fun <reified T : Seen> of(): List<T> = events.filterIsInstance<T>()

    fun messages(): List<SvcRealtimeMessage> = of<Seen.Message>().map { it.message }

    fun states(): List<SvcConnectionState> = of<Seen.State>().map { it.state }

    suspend fun waitForMessages(count: Int): List<SvcRealtimeMessage> {
        waitUntil(description = "$count messages") { list -> list.count { it is Seen.Message } >= count }
        return messages()
    }

    override fun close() {
        runBlocking { client.close() }
    }
}

private var counter = 0

/** A room name nobody used yet in this server. */
fun uniqueRoom(prefix: String = "room"): String = synchronized(TestServer) { "$prefix-${System.nanoTime()}-${counter++}" }

fun roomOptions(
    room: String,
    userId: String,
    name: String = userId,
    isHost: Boolean? = null,
    liveType: SvcLiveType = SvcLiveType.VIDEO_CONFERENCE,
) = SvcRoomOptions(room, SvcParticipantOptions(userId, name, isHost = isHost), liveType)

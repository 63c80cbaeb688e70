package dev.svc.android

import android.Manifest
import android.content.Context
import android.content.Intent
import dev.svc.android.internal.AndroidMediaEngine
import dev.svc.android.internal.AndroidPlatform
import dev.svc.android.internal.AppEventData
import dev.svc.android.internal.ChannelClose
import dev.svc.android.internal.CloseCodes
import dev.svc.android.internal.ControllerMirror
import dev.svc.android.internal.EventFrame
import dev.svc.android.internal.LockedDispatcher
import dev.svc.android.internal.MediaEndedData
import dev.svc.android.internal.MediaEngine
import dev.svc.android.internal.MediaMutedData
import dev.svc.android.internal.MediaSession
import dev.svc.android.internal.MediaStoppedData
import dev.svc.android.internal.MediaTrackData
import dev.svc.android.internal.MediaTrickleData
import dev.svc.android.internal.MessageReceivedData
import dev.svc.android.internal.MessageSendData
import dev.svc.android.internal.MetadataChangedData
import dev.svc.android.internal.ParticipantJoinedData
import dev.svc.android.internal.ParticipantLeftData
import dev.svc.android.internal.ParticipantList
import dev.svc.android.internal.Platform
import dev.svc.android.internal.RestClient
import dev.svc.android.internal.RoomSnapshot
import dev.svc.android.internal.SendMessageBody
import dev.svc.android.internal.SendMessageResult
import dev.svc.android.internal.ServerFrame
import dev.svc.android.internal.SessionResumeData
import dev.svc.android.internal.SessionResumedData
import dev.svc.android.internal.SharedHttp
import dev.svc.android.internal.SignalChannel
import dev.svc.android.internal.Times
import dev.svc.android.internal.UpdateMetadataData
import dev.svc.android.internal.WireJson
import kotlin.coroutines.EmptyCoroutineContext
import kotlin.random.Random
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.Job
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.SharedFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asSharedFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.serialization.KSerializer
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.doubleOrNull
import kotlinx.serialization.json.longOrNull
import kotlinx.serialization.json.put
import okhttp3.OkHttpClient

/**
 * The Svc client: REST calls for rooms, tokens and recordings, and one connection to a room at a time
 * over the signaling channel, with automatic reconnection ([SvcReconnectPolicy]).
 *
 * ```kotlin
 * val client = SvcClient(context, SvcConfig(projectId, apiKey, baseUrl = "https://svc.example.com"))
 * client.onMessageReceived = { message, participant -> show(participant?.name, message.message) }
 * val room = client.connect(SvcRoomOptions("standup", SvcParticipantOptions("u1", "Ada"), SvcLiveType.VIDEO_CONFERENCE))
 * room.sendMessage("hello")
 * ```
 *
 * Handlers are properties; set them before [connect]. They run on the main thread, one at a time, in the
 * order of [events]; a handler that throws does not disturb the client. Every client of the process shares
 * one OkHttp client (its connection pool and threads); call [close] when the app no longer needs a client.
 *
 * Threading (internal): the client's state (the current run, room, controller mirror, media session) is
 * guarded by one lock. Incoming frames are parsed and applied on OkHttp's reader thread of the socket,
 * holding the lock, in the socket's order; only the app's handlers go to the main thread (one task per
 * event on a FIFO dispatcher, so in the same order). Longer work (connect, reconnection, media
 * negotiation) runs on a serial dispatcher whose every task holds the same lock, so each stretch between
 * two suspension points is atomic with respect to frames. Requests (messages, controller calls) do not
 * take the lock: they send under the channel's own lock and wait without any, resuming on their
 * caller's dispatcher (see SignalChannel). Nothing waits while holding a lock, and the app's handlers
 * never run under one.
 */
public class SvcClient internal constructor(
    /** How the client reaches the server. */
    public val config: SvcConfig,
    private val platform: Platform,
    http: OkHttpClient = SharedHttp.client,
    private val mediaEngineFactory: () -> MediaEngine,
    private val random: Random = Random.Default,
) {
    /**
     * A client for [config]; [context] gives the package name (`X-Bundle-Id` unless [SvcConfig.bundleId]
     * is set) and the runtime permissions; any Context will do (the application context is kept).
     */
    public constructor(context: Context, config: SvcConfig) : this(
        config,
        AndroidPlatform(context),
        SharedHttp.client,
        { AndroidMediaEngine(context) },
    )

    /** A participant joined the room (not sent for this client itself). */
    public var onUserJoined: ((participant: SvcParticipant) -> Unit)? = null

    /** A participant left; `reason` is null when only a snapshot comparison after a full rejoin showed it. */
    public var onUserLeft: ((participant: SvcParticipant, reason: SvcLeaveReason?) -> Unit)? = null

    /** A message arrived, in the room's order; `participant` is null for REST messages or senders who left. */
    public var onMessageReceived: ((message: SvcRealtimeMessage, participant: SvcParticipant?) -> Unit)? = null

    /** [connect] succeeded. */
    public var onConnected: ((room: Room) -> Unit)? = null

    /** The client left the room for good. */
    public var onDisconnected: ((reason: SvcDisconnectReason) -> Unit)? = null

    /** The connection dropped; the client is reconnecting. */
    public var onReconnecting: (() -> Unit)? = null

    /** The client is back in the room after a drop. */
    public var onReconnected: (() -> Unit)? = null

    /** The server holds this client until a host joins. */
    public var onWaitingForHost: (() -> Unit)? = null

    /** A participant published a track (`participant` null if not known); remote ones are subscribed to by default. */
    public var onMediaStarted: ((participant: SvcParticipant?, track: SvcTrackInfo) -> Unit)? = null

    /** A track stopped (unpublished, its publisher left, …). */
    public var onMediaStopped: ((participant: SvcParticipant?, track: SvcTrackInfo) -> Unit)? = null

    /** A host changed the room's metadata. */
    public var onRoomMetadataChanged: ((metadata: String?) -> Unit)? = null

    /** Lost media could not be re-established ([SvcEvent.MediaFailed]). */
    public var onMediaError: ((error: SvcException) -> Unit)? = null

    /** Guards the client's state; held by frame handling (reader threads) and by every [serial] task. */
    private val lock = Any()

    @OptIn(ExperimentalCoroutinesApi::class)
    private val serial = LockedDispatcher(lock, Dispatchers.Default.limitedParallelism(1))
    private val scope = CoroutineScope(SupervisorJob() + serial)

    /** The mirror of the current room's controller state ([controller]). */
    internal val mirror = ControllerMirror(
        deliver = { block -> onCallbackThread(block) },
        switchRoom = { target, fallback ->
            scope.launch {
                try {
                    join(target, retry = true)
                } catch (e: SvcException) {
                    // Unless the app connected or disconnected meanwhile.
                    if (fallback != null && e.code != "client_disconnected") runCatching { join(fallback, retry = true) }
                }
            }
        },
    )

    /**
     * The room controller of this client's room (roles, moderation, chat, hands, polls…); the same state
     * as [SvcRoomController.instance] once initialized with this client.
     */
    public val controller: SvcRoomController by lazy { SvcRoomController().also { it.bind(this) } }
    private val http: OkHttpClient = http
    private val rest = RestClient(http, config.baseUrl, config.projectId, config.apiKey, config.bundleId ?: platform.packageName)

    private val mutableState = MutableStateFlow(SvcConnectionState.DISCONNECTED)
    private val mutableEvents = MutableSharedFlow<SvcEvent>(extraBufferCapacity = Int.MAX_VALUE)

    @Volatile private var currentRoom: Room? = null

    /** Rewrites the signaling URL before a socket opens (tests route it through a proxy). */
    @Volatile internal var rewriteUrl: (String) -> String = { it }

    @Volatile private var failure: SvcException? = null
    private var engine: MediaEngine? = null

    @Volatile private var run: Run? = null

    /** The connection state. */
    public val connectionState: StateFlow<SvcConnectionState> = mutableState.asStateFlow()

    /** Every event, also delivered to the handlers. Collect it before [connect] to see everything. */
    public val events: SharedFlow<SvcEvent> = mutableEvents.asSharedFlow()

    /** The room the client is in (also while reconnecting), or null. */
    public val room: Room? get() = currentRoom

    /** Why the last [connect] or reconnection failed (state [SvcConnectionState.FAILED]); null otherwise. */
    public val lastError: SvcException? get() = failure

    // ---- REST --------------------------------------------------------------------------------------

    /** Creates a room. Throws `room_exists` (409) when the name is taken. */
    public suspend fun createRoom(options: SvcCreateRoomOptions): SvcRoomInfo =
        rest.request("POST", listOf("realtime", "rooms"), SvcRoomInfo.serializer(), encode(SvcCreateRoomOptions.serializer(), options))!!

    /** Deletes a room: everyone connected is disconnected with reason `ROOM_DELETED`. */
    public suspend fun deleteRoom(roomName: String) {
        rest.request<Unit>("DELETE", listOf("realtime", "rooms", roomName), null)
    }

    /**
     * Lists the project's rooms, one page at a time (page from 1, limit 1–100, default 10). **Server keys
     * only**: with a client key the server refuses with `server_key_required` (403).
     */
    public suspend fun listRooms(status: SvcRoomStatus? = null, page: Int? = null, limit: Int? = null): SvcRoomPage = rest.request(
        "GET",
        listOf("realtime", "rooms"),
        SvcRoomPage.serializer(),
        query = mapOf("status" to status?.name, "page" to page?.toString(), "limit" to limit?.toString()),
    )!!

    /** One room. Throws `room_not_found` (404). */
    public suspend fun getRoom(roomName: String): SvcRoomInfo =
        rest.request("GET", listOf("realtime", "rooms", roomName), SvcRoomInfo.serializer())!!

    /** The participants of a room, as the server sees them now. */
    public suspend fun getParticipants(roomName: String): List<SvcParticipant> =
        rest.request("GET", listOf("realtime", "rooms", roomName, "participants"), ParticipantList.serializer())!!.items

    /** An access token for a room (the room is created if it does not exist). */
    public suspend fun getToken(options: SvcRoomOptions): SvcTokenResponse =
        rest.request("POST", listOf("realtime", "token"), SvcTokenResponse.serializer(), encode(SvcRoomOptions.serializer(), options))!!

    /**
     * Sends a message to everyone connected to a room through the REST API (no connection needed).
     * Returns the message's place in the room's order once accepted.
     */
    public suspend fun sendRealtimeMessage(options: SvcSendRealtimeMessageOptions): Long = rest.request(
        "POST",
        listOf("realtime", "rooms", options.roomName, "messages"),
        SendMessageResult.serializer(),
        encode(SendMessageBody.serializer(), SendMessageBody(options.message, options.sender)),
    )!!.seq

    // ---- Recordings (routes of the recordings API, /v1/realtime/recordings) -------------------------

    /**
     * Starts recording a room (MP4 by default). With a client key the server requires the access token of
     * a host in that room: the client sends its current token as `X-Room-Token` while connected.
     */
    public suspend fun startRecord(options: SvcStartRecordingOptions): SvcRecordingInfo = rest.request(
        "POST",
        listOf("realtime", "recordings"),
        SvcRecordingInfo.serializer(),
        WireJson.encodeToString(SvcStartRecordingOptions.serializer(), options).let(::withFileType),
        headers = roomTokenHeader(),
    )!!

    /** Stops a recording; returns the server's final information about it (status `COMPLETED` or `FAILED`…). */
    public suspend fun stopRecord(egressId: String): Map<String, Any?> = rest.request(
        "POST",
        listOf("realtime", "recordings", egressId, "stop"),
        JsonObject.serializer(),
        "{}",
        headers = roomTokenHeader(),
    )!!
        .mapValues { plain(it.value) }

    /** Pauses a recording: nothing is written until [resumeRecord], and the file has no gap. */
    public suspend fun pauseRecord(egressId: String): SvcRecordingInfo = rest.request(
        "POST",
        listOf("realtime", "recordings", egressId, "pause"),
        SvcRecordingInfo.serializer(),
        "{}",
        headers = roomTokenHeader(),
    )!!

    /** Resumes a paused recording into the same file. */
    public suspend fun resumeRecord(egressId: String): SvcRecordingInfo = rest.request(
        "POST",
        listOf("realtime", "recordings", egressId, "resume"),
        SvcRecordingInfo.serializer(),
        "{}",
        headers = roomTokenHeader(),
    )!!

    /** The recordings in progress, of one room or (server keys) all. */
    public suspend fun listActiveRecordings(roomName: String? = null): List<SvcRecordingInfo> = rest.request(
        "GET",
        listOf("realtime", "recordings", "active"),
        RecordingList.serializer(),
        query = mapOf("roomName" to roomName),
        headers = roomTokenHeader(),
    )!!.items

    /** Recordings, one page at a time (page 1, limit 10 by default). */
    public suspend fun listRecordings(options: SvcListRecordingsOptions? = null): SvcRecordingPage {
        val o = options ?: SvcListRecordingsOptions()
        return rest.request(
            "GET",
            listOf("realtime", "recordings"),
            SvcRecordingPage.serializer(),
            query = mapOf("status" to o.status, "page" to o.page.toString(), "limit" to o.limit.toString()),
            headers = roomTokenHeader(),
        )!!
    }

    /** One recording. */
    public suspend fun getRecording(egressId: String): SvcRecordingInfo =
        rest.request("GET", listOf("realtime", "recordings", egressId), SvcRecordingInfo.serializer(), headers = roomTokenHeader())!!

    /** A signed address of the recording's file, valid for [expiresIn] seconds (3600 by default). */
    public suspend fun getRecordingDownloadUrl(egressId: String, expiresIn: Int = 3600): SvcRecordingDownloadUrl = rest.request(
        "GET",
        listOf("realtime", "recordings", egressId, "download-url"),
        SvcRecordingDownloadUrl.serializer(),
        query = mapOf("expiresIn" to expiresIn.toString()),
        headers = roomTokenHeader(),
    )!!

    // ---- Connection -------------------------------------------------------------------------------

    /**
     * Gets a token and joins the room; returns the room once joined (after waiting for a host if the
     * options say so). First checks the runtime permissions `CAMERA` and `RECORD_AUDIO` and throws
     * [SvcPermissionException] naming the missing ones, before any network call. Otherwise throws
     * [SvcException] with the server's code (`room_full`, `token_invalid`, `room_not_found`,
     * `duplicate_identity`, an API-key code such as `invalid_api_key`…) or a client code (`network_error`,
     * `timeout`, `client_disconnected` when [disconnect] is called meanwhile); the state is then
     * [SvcConnectionState.FAILED]. A client already in a room leaves it first.
     */
    public suspend fun connect(options: SvcRoomOptions): Room = join(options, retry = false)

    /**
     * [connect], or with [retry] a room switch the controller makes by itself (a move to or from a breakout
     * room, the return from a closed one): nobody awaits that one, so a failure that a later attempt may not
     * meet (network, timeout, 503…) is retried as a reconnection is: RECONNECTING with the same backoff,
     * [SvcEvent.Connected] once in the room, FAILED and [SvcDisconnectReason.ReconnectFailed] after the
     * policy's attempts. Throws as [connect] does once it gives up.
     */
    private suspend fun join(options: SvcRoomOptions, retry: Boolean): Room {
        val missing = platform.missingPermissions(REQUIRED_PERMISSIONS)
        if (missing.isNotEmpty()) throw SvcPermissionException(missing)
        return withContext(serial) {
            if (run != null) leave()
            val r = Run(options)
            run = r
            failure = null
            mutableState.value = SvcConnectionState.CONNECTING
            val retried = try {
                establish(r, resume = false)
                false
            } catch (e: CancellationException) {
                withContext(NonCancellable) { if (!r.ended) end(r, null) }
                throw e
            } catch (e: Throwable) {
                if (r.ended) throw SvcException("client_disconnected", "disconnect() was called")
                val error = asSvc(e)
                if (!retry || error.code !in RETRYABLE) {
                    fail(r, error, notifyApp = false)
                    throw error
                }
                if (error.code == "token_expired") r.token = null
                scope.launch { reconnectLoop(r, error.retryAfterMs ?: 0) }.also { r.reconnect = it }.join()
                true
            }
            if (retried) {
                val room = currentRoom
                if (run === r && room != null) return@withContext room
                throw r.failure ?: SvcException("client_disconnected", "disconnect() was called")
            }
            val room = currentRoom!!
            r.connected = true
            mutableState.value = SvcConnectionState.CONNECTED
            dispatch(SvcEvent.Connected(room))
            subscribeAll(r, room)
            room
        }
    }

    /**
     * Leaves the room (others see `participant.left` with reason `LEFT`) and stops reconnecting. Returns
     * when done; never throws. A pending [connect] throws `client_disconnected`. After a failure it moves
     * the state from FAILED to DISCONNECTED.
     */
    public suspend fun disconnect() {
        withContext(serial + NonCancellable) { leave() }
    }

    /**
     * Disconnects and releases the client's media engine and background work; the client is unusable
     * afterwards. The process's shared OkHttp pool keeps idle connections for other clients (evicted after
     * 5 minutes) and its idle threads end by themselves.
     */
    public suspend fun close() {
        disconnect()
        withContext(serial) {
            engine?.close()
            engine = null
        }
        scope.coroutineContext[Job]?.cancel()
    }

    // ---- Internals --------------------------------------------------------------------------------

    /** One [connect] and everything until the client leaves that room. Touched holding [lock] only. */
    private class Run(val options: SvcRoomOptions) {
        var token: SvcTokenResponse? = null

        /** Also read without [lock] by requests (volatile, as [ended] and the client's `run`). */
        @Volatile var channel: SignalChannel? = null
        var sessionId: String? = null
        var resumeToken: String? = null
        var lastSeq: Long = 0
        var departureGraceMs: Long = 0
        var droppedAt: Long = 0

        @Volatile var ended = false

        var endReason: SvcLeaveReason? = null
        var heartbeat: Job? = null
        var reconnect: Job? = null
        var media: MediaSession? = null

        /** The run was in its room once ([SvcEvent.Connected] was sent): a later join is a reconnection. */
        var connected = false

        /** Why the run failed (state FAILED). */
        var failure: SvcException? = null
    }

    private enum class Outcome { JOINED, RESUMED }

    private suspend fun leave() {
        val r = run
        if (r == null) {
            if (mutableState.value == SvcConnectionState.FAILED) mutableState.value = SvcConnectionState.DISCONNECTED
            return
        }
        val wasInRoom = currentRoom != null
        stop(r)
        val channel = r.channel
        r.channel = null
        if (channel != null && channel.isOpen && r.sessionId != null) {
            withTimeoutOrNull(LEAVE_TIMEOUT_MS) { runCatching { channel.request("session.leave") } }
            channel.close(CloseCodes.NORMAL)
        } else {
            channel?.abandon()
        }
        currentRoom = null
        mirror.reset()
        mutableState.value = SvcConnectionState.DISCONNECTED
        if (wasInRoom) dispatch(SvcEvent.Disconnected(SvcDisconnectReason.ClientDisconnect))
    }

    /** Marks the run over and releases its jobs; the caller sets the state. */
    private fun stop(r: Run) {
        r.ended = true
        r.media?.close()
        r.heartbeat?.cancel()
        r.reconnect?.cancel()
        if (run === r) run = null
    }

    private fun fail(r: Run, error: SvcException, notifyApp: Boolean) {
        r.failure = error
        stop(r)
        r.channel?.abandon()
        r.channel = null
        currentRoom = null
        mirror.reset()
        failure = error
        mutableState.value = SvcConnectionState.FAILED
        if (notifyApp) dispatch(SvcEvent.Disconnected(SvcDisconnectReason.ReconnectFailed))
    }

    private fun end(r: Run, reason: SvcLeaveReason?, message: String? = null) {
        val wasInRoom = currentRoom != null
        stop(r)
        r.channel?.abandon()
        r.channel = null
        currentRoom = null
        if (reason == SvcLeaveReason.ROOM_DELETED && wasInRoom) mirror.roomDeleted()
        mirror.reset()
        mutableState.value = SvcConnectionState.DISCONNECTED
        if (reason != null && wasInRoom) dispatch(SvcEvent.Disconnected(SvcDisconnectReason.Server(reason, message)))
    }

    /** Opens a channel and joins (or resumes, falling back to a fresh join); the channel is then `r.channel`. */
    private suspend fun establish(r: Run, resume: Boolean): Outcome {
        fun ensureActive() {
            if (r.ended) throw SvcException("client_disconnected", "disconnect() was called")
        }
        val token = r.token
        // An expiry that does not parse counts as near: the token is renewed.
        val expiresAtMs = token?.let { Times.isoMillis(it.expiresAt) } ?: 0L
        if (token == null || expiresAtMs - System.currentTimeMillis() < TOKEN_RENEW_MARGIN_MS) {
            r.token = getToken(r.options)
        }
        ensureActive()
        val outcome = CompletableDeferred<Outcome>()
        lateinit var channel: SignalChannel
        // The whole handshake is bounded, except the wait for a host (cancelled on session.waiting).
        val handshakeTimer = scope.launch {
            delay(config.requestTimeoutMs)
            outcome.completeExceptionally(SvcException("timeout", "No session within ${config.requestTimeoutMs} ms"))
            channel.abandon()
        }
        channel = SignalChannel(
            http,
            config.requestTimeoutMs,
            lock,
            onFrame = { frame ->
                if (r.channel === channel && !r.ended) {
                    onFrame(r, frame, outcome) { handshakeTimer.cancel() }
                }
            },
            onClose = { close ->
                if (!outcome.isCompleted) {
                    outcome.completeExceptionally(dev.svc.android.internal.errorOfClose(close))
                } else {
                    onChannelClosed(r, channel, close)
                }
            },
        )
        r.channel = channel
        try {
            // The first request goes out with the socket's opening (as a browser sends on `open`),
            // not after a hop back here once it is open.
            channel.start(rewriteUrl(r.token!!.wsUrl))
            var joinNeeded = true
            val sessionId = r.sessionId
            val resumeToken = r.resumeToken
            if (resume && sessionId != null && resumeToken != null) {
                try {
                    channel.request(
                        "session.resume",
                        WireJson.encodeToJsonElement(SessionResumeData.serializer(), SessionResumeData(sessionId, resumeToken, r.lastSeq)),
                        whileOpening = true,
                    )
                    joinNeeded = false
                } catch (e: SvcException) {
                    // resume_failed leaves the socket open for a fresh join (docs/realtime-protocol.md §5).
                    if (e.code != "resume_failed") throw e
                }
            }
            if (joinNeeded) channel.request("session.join", whileOpening = true)
            val how = outcome.await()
            ensureActive()
            if (config.heartbeatIntervalMs > 0) startHeartbeat(r, channel)
            return how
        } catch (e: Throwable) {
            outcome.completeExceptionally(if (e is CancellationException) e else asSvc(e))
            if (r.channel === channel) r.channel = null
            channel.abandon()
            throw e
        } finally {
            handshakeTimer.cancel()
        }
    }

    private fun startHeartbeat(r: Run, channel: SignalChannel) {
        r.heartbeat?.cancel()
        r.heartbeat = scope.launch {
            while (true) {
                delay(config.heartbeatIntervalMs)
                if (r.channel !== channel || !channel.isOpen) return@launch
                launch {
                    try {
                        channel.request("ping")
                    } catch (e: SvcException) {
                        // A ping lost in a half-open connection: treat it as the drop it is.
                        if (e.code == "timeout" && r.channel === channel) channel.abandon()
                    }
                }
            }
        }
    }

    private fun onFrame(r: Run, frame: ServerFrame, outcome: CompletableDeferred<Outcome>, waiting: () -> Unit) {
        if (frame !is EventFrame<*>) return
        when (frame.type) {
            "session.joined" -> {
                val snapshot = frame.data as RoomSnapshot
                r.sessionId = snapshot.sessionId
                r.resumeToken = snapshot.resumeToken
                r.departureGraceMs = snapshot.departureGraceMs
                r.lastSeq = frame.seq
                mediaOf(r).snapshot = snapshot.media
                val room = currentRoom
                if (room != null) {
                    // A full rejoin after a failed resume: tell the app what changed while it was away.
                    val (joined, left) = room.applySnapshot(snapshot)
                    left.forEach { dispatch(SvcEvent.UserLeft(it, null)) }
                    joined.forEach { dispatch(SvcEvent.UserJoined(it)) }
                } else {
                    currentRoom = Room(snapshot, transportOf(r))
                }
                mirror.snapshot(snapshot.controller, frame.seq, r.options)
                outcome.complete(Outcome.JOINED)
                return
            }

            "session.resumed" -> {
                val held = (frame.data as SessionResumedData).subscriptions
                r.media?.let { media -> scope.launch { runCatching { media.onResumed(held) } } }
                outcome.complete(Outcome.RESUMED)
                return
            }

            "session.waiting" -> {
                waiting()
                dispatch(SvcEvent.WaitingForHost)
                return
            }

            "session.admitted", "session.closed" -> return

            "media.trickle" -> {
                r.media?.onServerCandidate(frame.data as MediaTrickleData)
                return
            }

            "media.ended" -> {
                val media = r.media ?: return
                scope.launch { runCatching { media.onEnded(frame.data as MediaEndedData) } }
                return
            }
        }
        val room = currentRoom ?: return
        if (frame.seq <= r.lastSeq) return
        r.lastSeq = frame.seq
        applyEvent(r, room, frame)
        mirror.event(room, frame)
    }

    private fun applyEvent(r: Run, room: Room, frame: EventFrame<*>) {
        val self = room.localParticipant
        when (val data = frame.data) {
            is ParticipantJoinedData -> if (room.upsert(data.participant) && data.participant.sid != self.sid) {
                dispatch(SvcEvent.UserJoined(data.participant))
            }

            is ParticipantLeftData -> if (data.participant.sid != self.sid && room.remove(data.participant.sid) != null) {
                dispatch(SvcEvent.UserLeft(data.participant, data.reason))
            }

            is MessageReceivedData -> {
                val message = SvcRealtimeMessage(room.name, data.message, data.sender, frame.seq, frame.ts, data.viaApi)
                dispatch(SvcEvent.MessageReceived(message, data.sender.sid?.let(room::getParticipant)))
            }

            is MetadataChangedData -> {
                room.setMetadata(data.metadata)
                dispatch(SvcEvent.RoomMetadataChanged(data.metadata))
            }

            is MediaTrackData -> {
                room.putTrack(data.track)
                dispatch(SvcEvent.MediaStarted(room.getParticipant(data.track.sid), data.track))
                if (data.track.sid != self.sid) autoSubscribe(r, data.track)
            }

            is MediaStoppedData -> {
                room.removeTrack(data.track.trackId)
                dispatch(SvcEvent.MediaStopped(room.getParticipant(data.track.sid), data.track, data.reason))
                val media = r.media
                if (media != null) {
                    scope.launch {
                        val republish = data.reason == SvcTrackStopReason.ENGINE_RESTARTED ||
                            data.reason == SvcTrackStopReason.MOVED ||
                            data.reason == SvcTrackStopReason.HANGUP
                        runCatching { media.onTrackStopped(data.track, self.sid, republish) }
                    }
                }
            }

            is MediaMutedData -> {
                room.putTrack(data.track)
                dispatch(SvcEvent.MediaMuted(room.getParticipant(data.track.sid), data.track))
            }

            is AppEventData -> Unit

            else -> if (frame.type == "room.deleted") r.endReason = SvcLeaveReason.ROOM_DELETED
        }
    }

    private fun onChannelClosed(r: Run, channel: SignalChannel, close: ChannelClose) {
        if (r.ended || r.channel !== channel) return
        r.channel = null
        r.heartbeat?.cancel()
        val reason = endReasonOf(r, close)
        if (reason != null) {
            end(r, reason, close.sessionClosed?.message)
            return
        }
        r.reconnect = scope.launch { reconnectLoop(r) }
    }

    /** Reconnects [r]; [firstRetryAfterMs]: the server asked to wait that long before the first attempt. */
    private suspend fun reconnectLoop(r: Run, firstRetryAfterMs: Long = 0) {
        r.droppedAt = System.currentTimeMillis()
        mutableState.value = SvcConnectionState.RECONNECTING
        dispatch(SvcEvent.Reconnecting)
        val policy = config.reconnectPolicy
        var lastError = SvcException("reconnect_failed", "Reconnection is disabled")
        var retryAfterMs = firstRetryAfterMs
        for (attempt in 1..policy.maxAttempts) {
            val base = minOf(policy.maxDelayMs.toDouble(), policy.initialDelayMs * Math.pow(2.0, attempt - 1.0))
            // At least as long as the server asked (Retry-After of a 429 or 503), up to a minute.
            delay(maxOf((base * (0.5 + random.nextDouble() / 2)).toLong(), minOf(retryAfterMs, MAX_RETRY_AFTER_MS)))
            if (r.ended) return
            val canResume = System.currentTimeMillis() - r.droppedAt < r.departureGraceMs
            val outcome = try {
                establish(r, canResume)
            } catch (e: CancellationException) {
                throw e
            } catch (e: Throwable) {
                if (r.ended) return
                lastError = asSvc(e)
                retryAfterMs = lastError.retryAfterMs ?: 0
                if (lastError.code !in RETRYABLE) break
                if (lastError.code == "token_expired") r.token = null
                continue
            }
            if (r.ended) return
            mutableState.value = SvcConnectionState.CONNECTED
            if (!r.connected) {
                // A switch's first join (see join): the app hears of a new room, not of a reconnection.
                r.connected = true
                currentRoom?.let { room ->
                    dispatch(SvcEvent.Connected(room))
                    subscribeAll(r, room)
                }
                return
            }
            dispatch(SvcEvent.Reconnected)
            if (outcome == Outcome.JOINED) {
                // A new session: the old one's tracks and subscriptions are gone on the server.
                val media = r.media
                val room = currentRoom
                if (media != null && room != null) {
                    scope.launch {
                        media.onRejoined()
                        subscribeAll(r, room)
                    }
                }
            }
            return
        }
        val error = if (lastError.code in RETRYABLE) {
            SvcException(
                "reconnect_failed",
                "Gave up reconnecting: ${lastError.message}",
                closeCode = lastError.closeCode,
                cause = lastError,
            )
        } else {
            lastError
        }
        fail(r, error, notifyApp = true)
    }

    private fun mediaOf(r: Run): MediaSession = r.media ?: MediaSession(
        { engine ?: mediaEngineFactory().also { engine = it } },
        scope,
        { type, data -> request(r, type, data) },
        { _, _ -> },
        { error -> dispatch(SvcEvent.MediaFailed(error)) },
    ).also { r.media = it }

    private fun autoSubscribe(r: Run, track: SvcTrackInfo) {
        val media = r.media ?: return
        val snapshot = media.snapshot ?: return
        if (!config.autoSubscribe || !snapshot.available || !snapshot.permissions.canSubscribe) return
        scope.launch {
            try {
                media.subscribe(track)
            } catch (_: SvcException) {
                // The track stopped meanwhile, or the connection dropped: a resume keeps what the server
                // holds, and a rejoin or a new media.started subscribes again.
            }
        }
    }

    private fun subscribeAll(r: Run, room: Room) {
        val self = room.localParticipant.sid
        room.tracks.filter { it.sid != self }.forEach { autoSubscribe(r, it) }
    }

    // ---- Media --------------------------------------------------------------------------------------

    /** Publishes the microphone. Needs RECORD_AUDIO ([SvcPermissionException]) and a connected room. */
    public suspend fun enableMicrophone(): Unit = enable(SvcTrackSource.MICROPHONE, Manifest.permission.RECORD_AUDIO, null)

    /** Stops publishing the microphone. */
    public suspend fun disableMicrophone(): Unit = disable(SvcTrackSource.MICROPHONE)

    /** Publishes the camera (the front one when there is one). Needs CAMERA and a connected room. */
    public suspend fun enableCamera(): Unit = enable(SvcTrackSource.CAMERA, Manifest.permission.CAMERA, null)

    /** Stops publishing the camera. */
    public suspend fun disableCamera(): Unit = disable(SvcTrackSource.CAMERA)

    /**
     * Publishes the screen. [mediaProjectionResultData] is the `Intent` your Activity received for
     * `MediaProjectionManager.createScreenCaptureIntent()` (RESULT_OK); on API 29+ a foreground service
     * of type `mediaProjection` must be running before this call (see README).
     */
    public suspend fun enableScreenShare(mediaProjectionResultData: Intent): Unit =
        enable(SvcTrackSource.SCREEN, null, mediaProjectionResultData)

    /** Stops publishing the screen. */
    public suspend fun disableScreenShare(): Unit = disable(SvcTrackSource.SCREEN)

    /**
     * The received media of a remote track, once its subscription delivered it: on Android an
     * `org.webrtc.VideoTrack` (add a `SurfaceViewRenderer` sink to show it) or `org.webrtc.AudioTrack`
     * (it plays by itself). Null if not (yet) received.
     */
    public suspend fun remoteMediaTrack(trackId: String): Any? = withContext(serial) { run?.media?.remoteTrack(trackId)?.native }

    /** This client's captured track of [source] while it is published (an `org.webrtc.MediaStreamTrack` on Android), for a preview. */
    public suspend fun localMediaTrack(source: SvcTrackSource): Any? = withContext(serial) { run?.media?.localTrack(source)?.native }

    private suspend fun enable(source: SvcTrackSource, permission: String?, capture: Any?) {
        if (permission != null) {
            val missing = platform.missingPermissions(listOf(permission))
            if (missing.isNotEmpty()) throw SvcPermissionException(missing)
        }
        withContext(serial) {
            val r = run
            if (r == null || currentRoom == null) throw SvcException("not_connected", "Connect to a room first")
            mediaOf(r).enable(source, capture)
        }
    }

    private suspend fun disable(source: SvcTrackSource) {
        withContext(serial) { run?.media?.disable(source) }
    }

    private fun transportOf(r: Run) = object : Room.RoomTransport {
        override suspend fun sendMessage(message: String): Long =
            seqOf(request(r, "message.send", MessageSendData.serializer(), MessageSendData(message)))

        override suspend fun updateMetadata(metadata: String): Long = seqOf(
            request(
                r,
                "room.update_metadata",
                WireJson.encodeToJsonElement(UpdateMetadataData.serializer(), UpdateMetadataData(metadata)),
            ),
        )
    }

    /**
     * A request on [r]'s channel, from any dispatcher, without taking [lock] (a main-thread caller must not
     * wait for media work that holds it): the channel checks that it is open and sends under its own lock.
     */
    private suspend fun request(r: Run, type: String, data: JsonElement): JsonObject = request(r, type, JsonElement.serializer(), data)

    private suspend fun <T> request(r: Run, type: String, serializer: KSerializer<T>, data: T): JsonObject {
        val channel = r.channel
        if (channel == null || r.ended) throw notConnected()
        return channel.request(type, serializer, data, ::notConnected)
    }

    /** A controller request on the current room's connection. */
    internal suspend fun controllerRequest(type: String, data: JsonElement): JsonObject {
        val r = run
        if (r == null || currentRoom == null) throw SvcException("not_connected", "Connect to a room first")
        return request(r, type, data)
    }

    /**
     * Answers an invitation on the invitation room's channel before (or without) joining it: the two
     * requests a connection may send before `session.join`.
     */
    internal suspend fun <T> answerInvitation(options: SvcRoomOptions, type: String, serializer: KSerializer<T>, data: T) {
        val token = getToken(options)
        withContext(serial) {
            val channel = SignalChannel(http, config.requestTimeoutMs, lock, onFrame = {}, onClose = {})
            try {
                channel.open(rewriteUrl(token.wsUrl))
                channel.request(type, WireJson.encodeToJsonElement(serializer, data))
            } finally {
                channel.close(CloseCodes.NORMAL)
            }
        }
    }

    private fun roomTokenHeader(): Map<String, String> {
        val token = run?.token?.token ?: return emptyMap()
        return mapOf("X-Room-Token" to token)
    }

    private fun dispatch(event: SvcEvent) {
        mutableEvents.tryEmit(event)
        onCallbackThread { deliver(event) }
    }

    /**
     * Runs [block] on the callback dispatcher, after everything queued before it: a plain task on the FIFO
     * dispatcher (a coroutine per event would add a Job, its registration and its completion to each).
     */
    private fun onCallbackThread(block: () -> Unit) {
        platform.callbackDispatcher.dispatch(EmptyCoroutineContext, Runnable { runHandler(block) })
    }

    /** Runs an app handler; one that throws goes to the thread's uncaught-exception handler, not to the client. */
    private fun runHandler(block: () -> Unit) {
        try {
            block()
        } catch (_: CancellationException) {
            // A handler that cancels (a coroutine idiom) ends only itself.
        } catch (
            @Suppress("TooGenericExceptionCaught") e: Exception,
        ) {
            Thread.currentThread().uncaughtExceptionHandler?.uncaughtException(Thread.currentThread(), e)
        }
    }

    private fun deliver(event: SvcEvent) {
        when (event) {
            is SvcEvent.UserJoined -> onUserJoined?.invoke(event.participant)
            is SvcEvent.UserLeft -> onUserLeft?.invoke(event.participant, event.reason)
            is SvcEvent.MessageReceived -> onMessageReceived?.invoke(event.message, event.participant)
            is SvcEvent.Connected -> onConnected?.invoke(event.room)
            is SvcEvent.Disconnected -> onDisconnected?.invoke(event.reason)
            SvcEvent.Reconnecting -> onReconnecting?.invoke()
            SvcEvent.Reconnected -> onReconnected?.invoke()
            SvcEvent.WaitingForHost -> onWaitingForHost?.invoke()
            is SvcEvent.MediaStarted -> onMediaStarted?.invoke(event.participant, event.track)
            is SvcEvent.MediaStopped -> onMediaStopped?.invoke(event.participant, event.track)
            is SvcEvent.MediaMuted -> Unit
            is SvcEvent.MediaFailed -> onMediaError?.invoke(event.error)
            is SvcEvent.RoomMetadataChanged -> onRoomMetadataChanged?.invoke(event.metadata)
        }
    }

    @Serializable
    private class RecordingList(val items: List<SvcRecordingInfo>)

    private companion object {
        /** Runtime permissions checked by [connect] (dangerous permissions since API 23). */
        val REQUIRED_PERMISSIONS = listOf(Manifest.permission.CAMERA, Manifest.permission.RECORD_AUDIO)

        /** A token closer than this to its expiry is renewed before a reconnection attempt. */
        const val TOKEN_RENEW_MARGIN_MS = 30_000L

        /** The longest `Retry-After` a retry honours: a larger one waits this long. */
        const val MAX_RETRY_AFTER_MS = 60_000L

        /** How long [disconnect] waits for the server to confirm `session.leave`. */
        const val LEAVE_TIMEOUT_MS = 2_000L

        /** Errors that a later attempt may not meet: anything else ends reconnection at once. */
        val RETRYABLE = setOf(
            "network_error", "connection_closed", "timeout", "token_expired", "rate_limited",
            "internal_error", "service_unavailable", "invalid_response", "frame_too_large",
        )

        /** Close codes after which the client reconnects (resume); every other close ends the session. */
        val RECONNECT_CLOSE_CODES = setOf(
            CloseCodes.GOING_AWAY, 1005, SignalChannel.ABNORMAL, CloseCodes.INVALID_PAYLOAD, CloseCodes.MESSAGE_TOO_BIG,
            CloseCodes.INTERNAL_ERROR, 1012, 1013, CloseCodes.TIMEOUT, CloseCodes.FLOOD,
        )

        /** Close code → leave reason, when the server closed without a `session.closed` frame. */
        val CLOSE_REASONS = mapOf(
            CloseCodes.NORMAL to SvcLeaveReason.LEFT,
            CloseCodes.TOKEN_EXPIRED to SvcLeaveReason.TOKEN_EXPIRED,
            CloseCodes.DUPLICATE_IDENTITY to SvcLeaveReason.DUPLICATE_IDENTITY,
            CloseCodes.ROOM_DELETED to SvcLeaveReason.ROOM_DELETED,
            CloseCodes.KICKED to SvcLeaveReason.KICKED,
            CloseCodes.ROOM_ENDED to SvcLeaveReason.ROOM_ENDED,
            CloseCodes.ROOM_NOT_FOUND to SvcLeaveReason.ROOM_ENDED,
            CloseCodes.PROTOCOL_VIOLATION to SvcLeaveReason.PROTOCOL_VIOLATION,
        )

        /** The leave reason when a close ends the session, or null when the client reconnects. */
        fun endReasonOf(r: Run, close: ChannelClose): SvcLeaveReason? {
            r.endReason?.let { return it }
            if (close.closeCode in RECONNECT_CLOSE_CODES) return null
            close.sessionClosed?.reason?.let { stated ->
                SvcLeaveReason.entries.firstOrNull { it.name == stated }?.let { return it }
            }
            return CLOSE_REASONS[close.closeCode] ?: if (close.closeCode >= 4000) SvcLeaveReason.DISCONNECTED else null
        }

        fun notConnected() = SvcException("not_connected", "Not connected to the room (reconnecting or disconnected)")

        fun asSvc(e: Throwable): SvcException = e as? SvcException ?: SvcException("network_error", e.message ?: e.toString(), cause = e)

        fun seqOf(ack: JsonObject): Long = (ack["seq"] as? JsonPrimitive)?.longOrNull
            ?: throw SvcException("invalid_response", "The ack has no seq")

        fun <T> encode(serializer: kotlinx.serialization.KSerializer<T>, value: T): String = WireJson.encodeToString(serializer, value)

        /** The start body always names its file type (the default MP4 included). */
        fun withFileType(body: String): String {
            val obj = WireJson.parseToJsonElement(body) as JsonObject
            if ("fileType" in obj) return body
            return buildJsonObject {
                obj.forEach { (k, v) -> put(k, v) }
                put("fileType", SvcRecordingFileType.MP4.name)
            }.toString()
        }

        fun plain(value: JsonElement): Any? = when (value) {
            is JsonNull -> null
            is JsonPrimitive -> if (value.isString) value.content else value.booleanOrNull ?: value.longOrNull ?: value.doubleOrNull
            is JsonObject -> value.mapValues { plain(it.value) }
            is kotlinx.serialization.json.JsonArray -> value.map { plain(it) }
        }
    }
}

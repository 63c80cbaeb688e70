package dev.svc.android.internal

import dev.svc.android.SvcException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import okhttp3.OkHttpClient
import okhttp3.Request

/** How a channel ended. */
internal data class ChannelClose(
    /** The WebSocket close code (1006 when the socket died or was abandoned locally). */
    val closeCode: Int,
    /** The `session.closed` frame's data, when the server sent one. */
    val sessionClosed: SessionClosedData? = null,
    /** The last `error` frame without a request id (a refused handshake), if any. */
    val lastError: ErrorFrame? = null,
)

/** Close code → registry code, for a close that came without an error frame. */
private val CLOSE_CODE_ERRORS = mapOf(
    CloseCodes.TOKEN_INVALID to "token_invalid",
    CloseCodes.TOKEN_EXPIRED to "token_expired",
    CloseCodes.TOKEN_ROOM_MISMATCH to "token_room_mismatch",
    CloseCodes.ROOM_NOT_FOUND to "room_not_found",
    CloseCodes.ROOM_FULL to "room_full",
    CloseCodes.DUPLICATE_IDENTITY to "duplicate_identity",
    CloseCodes.ROOM_DELETED to "room_deleted",
    CloseCodes.ROOM_ENDED to "room_ended",
    CloseCodes.PROTOCOL_VIOLATION to "invalid_message",
    CloseCodes.FLOOD to "rate_limited",
    CloseCodes.MESSAGE_TOO_BIG to "frame_too_large",
    CloseCodes.INTERNAL_ERROR to "internal_error",
    CloseCodes.GOING_AWAY to "service_unavailable",
    CloseCodes.TIMEOUT to "timeout",
)

/** The error that best explains a close: the error frame, then session.closed, then the close code. */
internal fun errorOfClose(close: ChannelClose): SvcException {
    close.lastError?.let { return SvcException(it.code, it.message, closeCode = close.closeCode) }
    close.sessionClosed?.let {
        val detail = it.message?.let { text -> ": $text" } ?: ""
        return SvcException(it.code, "The server closed the session (${it.reason})$detail", closeCode = close.closeCode)
    }
    CLOSE_CODE_ERRORS[close.closeCode]?.let {
        return SvcException(it, "The signaling connection closed (WebSocket close ${close.closeCode})", closeCode = close.closeCode)
    }
    return SvcException(
        "connection_closed",
        "The signaling connection closed (WebSocket close ${close.closeCode})",
        closeCode = close.closeCode,
    )
}

/**
 * One signaling WebSocket: sends `{id, type, data}` requests and matches their `ack`/`error`/`pong`,
 * hands every other frame to [onFrame] in arrival order, and reports the end once through [onClose].
 *
 * Threading. The socket's reader thread ([FrameSocket]) parses each frame (outside any lock) and handles
 * it right there: an answer completes its request (under this channel's own small lock), any other frame
 * goes to [onFrame] holding the owner's [lock]. The end (closed, failed, cancelled), which the reader
 * thread reports too, is handled holding [lock]. So [onFrame] and [onClose] run holding [lock], one at a
 * time, in the socket's order. [request] may be called from any thread or coroutine and never takes
 * [lock]: it registers and queues its frame under the channel's lock and waits without any, so a caller on
 * the main thread neither blocks behind work that holds [lock] nor hops threads to resume; the socket's
 * writer thread sends it. Lock order: [lock], then the channel's lock, then the socket's, never the
 * reverse; the socket calls its listener holding none of its locks and no lock is held while waiting, so
 * none of them can deadlock.
 */
internal class SignalChannel(
    private val http: OkHttpClient,
    private val requestTimeoutMs: Long,
    /** The owner's state lock; frames and the close are handled holding it. */
    private val lock: Any,
    private val onFrame: (ServerFrame) -> Unit,
    private val onClose: (ChannelClose) -> Unit,
) {
    /** Guards [socket], [nextId], [pending], [closeError] and the writes of [closed]. */
    private val requests = Any()
    private var socket: FrameSocket? = null
    private val opened = CompletableDeferred<Unit>()
    private var nextId = 1
    private val pending = HashMap<String, CompletableDeferred<JsonObject>>()
    private var closeError: SvcException? = null

    /** Read and written holding [lock] only. */
    private var lastError: ErrorFrame? = null
    private var sessionClosed: SessionClosedData? = null

    /** True once the channel has ended (closed, failed or abandoned). */
    @Volatile
    var closed: Boolean = false
        private set

    val isOpen: Boolean get() = !closed && opened.isCompleted

    /** Opens the socket; returns once it is open, throws the close's error if it closes first. */
    suspend fun open(url: String) {
        start(url)
        opened.await()
    }

    /**
     * Starts opening the socket and returns at once; [request] with `whileOpening` may follow right
     * away (the socket sends what was queued as soon as it opens, and a socket that fails to open fails
     * the request with the close's error).
     */
    fun start(url: String) {
        val request = try {
            Request.Builder().url(url).build()
        } catch (e: IllegalArgumentException) {
            throw SvcException("invalid_response", "Bad wsUrl: $url", cause = e)
        }
        val listener = object : FrameListener {
            override fun onOpen() {
                opened.complete(Unit)
            }

            override fun onText(text: String) {
                val frame = parse(text) ?: return
                if (answer(frame)) return
                synchronized(lock) { if (!closed) receive(frame) }
            }

            override fun onClosed(code: Int) {
                synchronized(lock) { finish(code) }
            }

            override fun onFailure(error: Throwable) {
                synchronized(lock) { finish(ABNORMAL) }
            }
        }
        synchronized(requests) {
            closeError?.let { throw it }
            socket = FrameSocket(http, request, listener).also { it.start() }
        }
    }

    /**
     * Sends a request; returns the ack's data, throws the error frame's code as [SvcException]. When the
     * channel is not open it throws [notOpen] if given, else the close's error (or `connection_closed`).
     */
    suspend fun request(
        type: String,
        data: JsonElement = JsonObject(emptyMap()),
        notOpen: (() -> SvcException)? = null,
        whileOpening: Boolean = false,
    ): JsonObject = request(type, JsonElement.serializer(), data, notOpen, whileOpening)

    /** [request] with typed data, written straight into the frame's text (no intermediate JSON tree). */
    suspend fun <T> request(
        type: String,
        serializer: KSerializer<T>,
        data: T,
        notOpen: (() -> SvcException)? = null,
        whileOpening: Boolean = false,
    ): JsonObject {
        val id: String
        val answer = CompletableDeferred<JsonObject>()
        synchronized(requests) {
            val ws = socket
            if (closed || ws == null || !(whileOpening || opened.isCompleted)) {
                throw notOpen?.invoke() ?: closeError ?: SvcException("connection_closed", "The signaling channel is closed")
            }
            id = (nextId++).toString()
            pending[id] = answer
            ws.send(WireJson.encodeToString(TypedClientFrame.serializer(serializer), TypedClientFrame(id, type, data)))
        }
        try {
            return withTimeoutOrNull(requestTimeoutMs) { answer.await() }
                ?: throw SvcException("timeout", "No answer to $type within $requestTimeoutMs ms")
        } finally {
            synchronized(requests) { pending.remove(id) }
        }
    }

    /** Closes normally; [onClose] runs when the server confirms (or at once if the socket is gone). */
    fun close(code: Int = CloseCodes.NORMAL): Unit = synchronized(lock) {
        if (closed) return
        val ws = synchronized(requests) { socket }
        if (ws == null || !ws.close(code)) abandon()
    }

    /** Drops the socket at once without a closing handshake (a dead peer would never answer): a 1006 close. */
    fun abandon(): Unit = synchronized(lock) {
        synchronized(requests) { socket }?.cancel()
        finish(ABNORMAL)
    }

    /** Ends the channel once; called holding [lock]. */
    private fun finish(closeCode: Int) {
        val close = ChannelClose(closeCode, sessionClosed, lastError)
        val error = errorOfClose(close)
        val answers = synchronized(requests) {
            if (closed) return
            closed = true
            closeError = error
            pending.values.toList().also { pending.clear() }
        }
        opened.completeExceptionally(error)
        for (answer in answers) answer.completeExceptionally(error)
        onClose(close)
    }

    /** Decodes a frame; null for one that is not valid (ignored, as the protocol asks). */
    private fun parse(text: String): ServerFrame? = try {
        decodeServerFrame(text)
    } catch (_: SerializationException) {
        null
    } catch (_: IllegalArgumentException) {
        null
    }

    /** Completes the request [frame] answers, if it answers a pending one; true then. */
    private fun answer(frame: ServerFrame): Boolean {
        val id = when (frame) {
            is AckFrame -> frame.id
            is PongFrame -> frame.id
            is ErrorFrame -> frame.id ?: return false
            else -> return false
        }
        val waiting = synchronized(requests) { pending.remove(id) } ?: return false
        when (frame) {
            is AckFrame -> waiting.complete(frame.data ?: JsonObject(emptyMap()))
            is ErrorFrame -> waiting.completeExceptionally(SvcException(frame.code, frame.message))
            else -> waiting.complete(JsonObject(emptyMap()))
        }
        return true
    }

    /** A frame that answers no pending request; called holding [lock]. */
    private fun receive(frame: ServerFrame) {
        when (frame) {
            is ErrorFrame -> if (frame.id == null) lastError = frame
            is EventFrame<*> -> if (frame.type == "session.closed") sessionClosed = frame.data as SessionClosedData
            else -> Unit
        }
        onFrame(frame)
    }

    companion object {
        /** The close code reported when the socket died or was abandoned. */
        const val ABNORMAL: Int = 1006
    }
}

/** WebSocket close codes of the protocol (packages/protocol CLOSE_CODES). */
internal object CloseCodes {
    const val NORMAL = 1000
    const val GOING_AWAY = 1001

    /** A text frame that is not UTF-8 (closed by the WebSocket layer, like [MESSAGE_TOO_BIG]). */
    const val INVALID_PAYLOAD = 1007
    const val MESSAGE_TOO_BIG = 1009
    const val INTERNAL_ERROR = 1011
    const val TOKEN_INVALID = 4001
    const val TOKEN_EXPIRED = 4002
    const val TOKEN_ROOM_MISMATCH = 4003
    const val ROOM_NOT_FOUND = 4004
    const val ROOM_FULL = 4005
    const val DUPLICATE_IDENTITY = 4006
    const val ROOM_DELETED = 4007
    const val KICKED = 4008
    const val ROOM_ENDED = 4009
    const val TIMEOUT = 4010
    const val PROTOCOL_VIOLATION = 4400
    const val FLOOD = 4429
}

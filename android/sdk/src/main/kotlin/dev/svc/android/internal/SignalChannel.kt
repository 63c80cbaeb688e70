package dev.svc.android.internal

import dev.svc.android.SvcException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener

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
 * OkHttp's callbacks are queued and handled by one coroutine in [scope], whose dispatcher must run one
 * task at a time; every method is called from that dispatcher.
 */
internal class SignalChannel(
    private val http: OkHttpClient,
    private val requestTimeoutMs: Long,
    private val scope: CoroutineScope,
    private val onFrame: (ServerFrame) -> Unit,
    private val onClose: (ChannelClose) -> Unit,
) {
    private sealed interface Incoming {
        object Open : Incoming

        class Text(val text: String) : Incoming

        class Closed(val code: Int) : Incoming
    }

    private val inbox = Channel<Incoming>(Channel.UNLIMITED)
    private var socket: WebSocket? = null
    private val opened = CompletableDeferred<Unit>()
    private var nextId = 1
    private val pending = HashMap<String, CompletableDeferred<JsonObject>>()
    private var lastError: ErrorFrame? = null
    private var sessionClosed: SessionClosedData? = null
    private var closeError: SvcException? = null

    /** True once the channel has ended (closed, failed or abandoned). */
    var closed: Boolean = false
        private set

    val isOpen: Boolean get() = !closed && opened.isCompleted

    /** Opens the socket; returns once it is open, throws the close's error if it closes first. */
    suspend fun open(url: String) {
        val request = try {
            Request.Builder().url(url).build()
        } catch (e: IllegalArgumentException) {
            throw SvcException("invalid_response", "Bad wsUrl: $url", cause = e)
        }
        socket = http.newWebSocket(
            request,
            object : WebSocketListener() {
                override fun onOpen(webSocket: WebSocket, response: Response) {
                    inbox.trySend(Incoming.Open)
                }

                override fun onMessage(webSocket: WebSocket, text: String) {
                    inbox.trySend(Incoming.Text(text))
                }

                override fun onClosing(webSocket: WebSocket, code: Int, reason: String) {
                    webSocket.close(code, null)
                    inbox.trySend(Incoming.Closed(code))
                }

                override fun onClosed(webSocket: WebSocket, code: Int, reason: String) {
                    inbox.trySend(Incoming.Closed(code))
                }

                override fun onFailure(webSocket: WebSocket, t: Throwable, response: Response?) {
                    inbox.trySend(Incoming.Closed(ABNORMAL))
                }
            },
        )
        scope.launch {
            for (item in inbox) {
                when (item) {
                    Incoming.Open -> opened.complete(Unit)
                    is Incoming.Text -> receive(item.text)
                    is Incoming.Closed -> finish(item.code)
                }
                if (closed) break
            }
        }
        opened.await()
    }

    /** Sends a request; returns the ack's data, throws the error frame's code as [SvcException]. */
    suspend fun request(type: String, data: JsonElement = JsonObject(emptyMap())): JsonObject {
        closeError?.let { throw it }
        val ws = socket
        if (closed || ws == null || !opened.isCompleted) throw SvcException("connection_closed", "The signaling channel is closed")
        val id = (nextId++).toString()
        val answer = CompletableDeferred<JsonObject>()
        pending[id] = answer
        ws.send(WireJson.encodeToString(ClientFrame.serializer(), ClientFrame(id, type, data)))
        try {
            return withTimeoutOrNull(requestTimeoutMs) { answer.await() }
                ?: throw SvcException("timeout", "No answer to $type within $requestTimeoutMs ms")
        } finally {
            pending.remove(id)
        }
    }

    /** Closes normally; [onClose] runs when the server confirms (or at once if the socket is gone). */
    fun close(code: Int = CloseCodes.NORMAL) {
        if (closed) return
        val ws = socket
        if (ws == null || !ws.close(code, null)) abandon()
    }

    /** Drops the socket at once without a closing handshake (a dead peer would never answer): a 1006 close. */
    fun abandon() {
        socket?.cancel()
        finish(ABNORMAL)
    }

    private fun finish(closeCode: Int) {
        if (closed) return
        closed = true
        inbox.close()
        val close = ChannelClose(closeCode, sessionClosed, lastError)
        val error = errorOfClose(close)
        closeError = error
        opened.completeExceptionally(error)
        for (answer in pending.values) answer.completeExceptionally(error)
        pending.clear()
        onClose(close)
    }

    private fun receive(text: String) {
        val frame = try {
            decodeServerFrame(text)
        } catch (_: SerializationException) {
            return
        } catch (_: IllegalArgumentException) {
            return
        }
        when (frame) {
            is AckFrame -> pending.remove(frame.id)?.let {
                it.complete(frame.data ?: JsonObject(emptyMap()))
                return
            }

            is PongFrame -> pending.remove(frame.id)?.let {
                it.complete(JsonObject(emptyMap()))
                return
            }

            is ErrorFrame -> {
                val id = frame.id
                if (id == null) {
                    lastError = frame
                } else {
                    pending.remove(id)?.let {
                        it.completeExceptionally(SvcException(frame.code, frame.message))
                        return
                    }
                }
            }

            is EventFrame<*> -> if (frame.type == "session.closed") sessionClosed = frame.data as SessionClosedData

            is UnknownFrame -> Unit
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

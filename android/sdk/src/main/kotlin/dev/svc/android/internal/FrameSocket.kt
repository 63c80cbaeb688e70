package dev.svc.android.internal

import java.io.IOException
import java.net.ProtocolException
import java.security.SecureRandom
import java.util.Random
import java.util.concurrent.CountDownLatch
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.SynchronousQueue
import java.util.concurrent.ThreadPoolExecutor
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import okhttp3.Call
import okhttp3.OkHttpClient
import okhttp3.Request
import okio.Buffer
import okio.BufferedSink
import okio.BufferedSource
import okio.ByteString.Companion.encodeUtf8
import okio.ByteString.Companion.toByteString
import okio.Socket
import okio.buffer

/** What a [FrameSocket] reports, each call on its reader thread, in order; exactly one of the last two ends it. */
internal interface FrameListener {
    /** The opening handshake completed; frames sent so far go out now. */
    fun onOpen()

    /** A whole text message arrived. */
    fun onText(text: String)

    /** The closing handshake completed (either side began it) with the server's close [code]. */
    fun onClosed(code: Int)

    /** The socket failed or was cancelled: the handshake was refused, the connection dropped, or a frame broke the protocol. */
    fun onFailure(error: Throwable)
}

/**
 * A client WebSocket (RFC 6455, no extensions) over a connection that OkHttp opens and upgrades: OkHttp
 * does the HTTP part (TLS, proxies, the shared connection pool's dialling), this class the frames.
 *
 * Why not OkHttp's own WebSocket: it writes each frame from its shared task runner, which wakes a thread
 * to run the write and, whenever the runner has other work scheduled (a connection pool's cleanup does,
 * while any connection is idle in the pool), a second one to coordinate before the write. Here a socket's
 * one writer thread takes frames from a queue, so a send costs one wake-up: from `send` to the socket's
 * write, about 0.07 ms at the median against OkHttp's 0.17 ms on a 2-core machine (android/README.md).
 *
 * Threads: the reader (started by [start]) performs the handshake, then reads frames and calls the
 * listener; the writer, started once the socket is open, writes what [send] and [close] queued, masked,
 * in order, and ends after the close frame or a failure. A close the server does not answer within
 * [closeTimeoutMs] cancels the socket.
 */
internal class FrameSocket(
    private val http: OkHttpClient,
    private val request: Request,
    private val listener: FrameListener,
    private val closeTimeoutMs: Long = 10_000,
) {
    private val key = ByteArray(KEY_BYTES).also { SecureRandom().nextBytes(it) }.toByteString().base64()
    private val masks = Random(SecureRandom().nextLong())
    private val outbox = LinkedBlockingQueue<ByteArray>()

    /** Guards the fields below. */
    private val lock = Any()
    private var call: Call? = null
    private var socket: Socket? = null
    private var queuedBytes = 0L
    private var closeQueued = false
    private var ended = false

    /** Counted down once the reader is done (the writer waits for it after a close frame). */
    private val finished = CountDownLatch(1)

    /** Counted down once the writer has sent the close frame, or has ended. */
    private val writerDone = CountDownLatch(1)

    /** Set once the socket is open (frames queued before wait for it). */
    @Volatile
    private var writable = false

    /** True while a drain runs or is about to: at most one writes at a time. */
    private val draining = AtomicBoolean(false)

    /** The socket's sink, written by one drain at a time. */
    private var sink: BufferedSink? = null

    /** Starts the reader thread, which opens the socket. */
    fun start() {
        SOCKET_THREADS.execute(::read)
    }

    /** Queues a text message; false once closing or ended, or when more than 16 MiB wait (the socket then fails). */
    fun send(text: String): Boolean = enqueue(OP_TEXT, text.toByteArray(Charsets.UTF_8))

    /** Begins the closing handshake with [code]; false if it had begun or the socket has ended. */
    fun close(code: Int): Boolean = enqueue(OP_CLOSE, closePayload(code))

    /** Drops the connection at once; the listener hears [FrameListener.onFailure] unless the socket had ended. */
    fun cancel() {
        val (c, s) = synchronized(lock) {
            if (ended) return
            ended = true
            call to socket
        }
        c?.cancel()
        s?.cancel()
        outbox.offer(STOP)
    }

    private fun enqueue(opcode: Int, payload: ByteArray): Boolean {
        val frame = frame(opcode, payload)
        // Queued under the lock, so frames go out in the order their senders passed the checks.
        val queued = synchronized(lock) {
            if (ended || closeQueued) return false
            queuedBytes += frame.size
            (queuedBytes <= MAX_QUEUED_BYTES).also {
                if (it) {
                    if (opcode == OP_CLOSE) closeQueued = true
                    outbox.put(frame)
                }
            }
        }
        if (!queued) {
            cancel()
        } else if (writable) {
            drain()
        }
        return queued
    }

    /** Starts a drain of [outbox] on a pooled thread unless one is running. */
    private fun drain() {
        if (draining.compareAndSet(false, true)) SOCKET_THREADS.execute(::write)
    }

    /** A masked frame, as a client must send it. */
    private fun frame(opcode: Int, payload: ByteArray): ByteArray {
        val n = payload.size
        val header = when {
            n <= SMALL -> 2
            n <= MEDIUM -> 4
            else -> 10
        }
        val out = ByteArray(header + MASK_BYTES + n)
        out[0] = (FIN or opcode).toByte()
        when (header) {
            2 -> out[1] = (MASKED or n).toByte()

            4 -> {
                out[1] = (MASKED or LENGTH_16).toByte()
                out[2] = (n ushr 8).toByte()
                out[3] = n.toByte()
            }

            else -> {
                out[1] = (MASKED or LENGTH_64).toByte()
                for (i in 0 until 8) out[2 + i] = (n.toLong() ushr (56 - 8 * i)).toByte()
            }
        }
        val mask = masks.nextInt()
        for (i in 0 until MASK_BYTES) out[header + i] = (mask ushr (24 - 8 * i)).toByte()
        for (i in 0 until n) out[header + MASK_BYTES + i] = (payload[i].toInt() xor out[header + (i and 3)].toInt()).toByte()
        return out
    }

    /** The reader thread: handshake, then frames until the close or a failure. */
    private fun read() {
        var closedWith = -1
        var error: IOException? = null
        try {
            val source = open()
            if (source != null) {
                listener.onOpen()
                closedWith = readFrames(source)
            }
        } catch (e: IOException) {
            error = e
        }
        val opened = synchronized(lock) {
            ended = true
            socket
        }
        finished.countDown()
        outbox.offer(STOP)
        if (writable) drain()
        if (opened != null) {
            // Cancelling stops a write in progress; closing both ends completes OkHttp's exchange, which
            // returns the call's hold on the connection (OkHttp would otherwise report it leaked).
            opened.cancel()
            closeQuietly(opened.sink)
            closeQuietly(opened.source)
        }
        if (closedWith >= 0) listener.onClosed(closedWith) else listener.onFailure(error ?: IOException("Canceled"))
    }

    /** The opening handshake; returns the socket's source, or null if the socket was cancelled first. */
    private fun open(): BufferedSource? {
        val upgrade = request.newBuilder()
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Key", key)
            .header("Sec-WebSocket-Version", "13")
            .build()
        val newCall = SharedHttp.forUpgrade(http).newCall(upgrade)
        synchronized(lock) {
            if (ended) return null
            call = newCall
        }
        val response = newCall.execute()
        val upgraded = response.socket
        if (response.code != HTTP_SWITCHING || upgraded == null) {
            response.close()
            throw ProtocolException("Expected HTTP 101 response but was '${response.code} ${response.message}'")
        }
        // From here the reader's end closes the socket, whatever happens.
        synchronized(lock) {
            socket = upgraded
            if (ended) return null
        }
        val accept = (key + ACCEPT_GUID).encodeUtf8().sha1().base64()
        if (!response.header("Upgrade").equals("websocket", ignoreCase = true) ||
            response.header("Sec-WebSocket-Accept") != accept
        ) {
            throw ProtocolException("The server's handshake does not accept this WebSocket")
        }
        sink = upgraded.sink.buffer()
        writable = true
        drain()
        return upgraded.source.buffer()
    }

    /** Reads frames until the server's close frame (then returns its code) or a failure (then throws). */
    private fun readFrames(source: BufferedSource): Int {
        val message = Buffer()
        var messageOpcode = -1
        // The client's read timeout bounds a frame's reading, not the wait for the next one (as in OkHttp).
        val timeout = source.timeout()
        val readTimeoutNanos = timeout.timeoutNanos()
        while (true) {
            timeout.clearTimeout()
            val b0 = try {
                source.readByte().toInt() and BYTE
            } finally {
                timeout.timeout(readTimeoutNanos, TimeUnit.NANOSECONDS)
            }
            val b1 = source.readByte().toInt() and BYTE
            val opcode = b0 and OPCODE_BITS
            if (b0 and RSV_BITS != 0 || b1 and MASKED != 0) throw ProtocolException("Bad frame header")
            val length = when (val l = b1 and LENGTH_BITS) {
                LENGTH_16 -> source.readShort().toLong() and 0xffff
                LENGTH_64 -> source.readLong()
                else -> l.toLong()
            }
            val fin = b0 and FIN != 0
            if (opcode and CONTROL != 0) {
                if (!fin || length > SMALL) throw ProtocolException("Bad control frame")
                val payload = source.readByteString(length)
                when (opcode) {
                    OP_PING -> enqueue(OP_PONG, payload.toByteArray())

                    OP_PONG -> Unit

                    OP_CLOSE -> {
                        val code = codeOf(payload.toByteArray())
                        enqueue(OP_CLOSE, closePayload(if (code == NO_STATUS) NORMAL else code))
                        // Let the writer send the reply (or our own close) before the socket goes.
                        synchronized(lock) { ended = true }
                        outbox.offer(STOP)
                        if (synchronized(lock) { closeQueued }) writerDone.await(closeTimeoutMs, TimeUnit.MILLISECONDS)
                        return code
                    }

                    else -> throw ProtocolException("Unknown opcode $opcode")
                }
                continue
            }
            when {
                opcode == OP_CONTINUATION && messageOpcode >= 0 -> Unit
                (opcode == OP_TEXT || opcode == OP_BINARY) && messageOpcode < 0 -> messageOpcode = opcode
                else -> throw ProtocolException("Unexpected opcode $opcode")
            }
            if (length < 0 || message.size + length > MAX_MESSAGE_BYTES) throw ProtocolException("Message too large")
            source.readFully(message, length)
            if (fin) {
                // Binary messages are no part of the protocol: dropped.
                if (messageOpcode == OP_TEXT) listener.onText(message.readUtf8()) else message.clear()
                messageOpcode = -1
            }
        }
    }

    /**
     * A drain, on a pooled thread: writes queued frames in order until the queue is empty, the close
     * frame is out (then waits up to [closeTimeoutMs] for the server's close before cutting the socket
     * off), or the socket has ended.
     */
    private fun write() {
        val out = sink ?: return
        while (true) {
            val frame = outbox.poll()
            if (frame == null) {
                draining.set(false)
                // A frame queued after the poll and before the flag cleared found a drain running.
                if (outbox.isEmpty() || !draining.compareAndSet(false, true)) return
                continue
            }
            if (frame === STOP) break
            try {
                out.write(frame)
                out.flush()
            } catch (_: IOException) {
                synchronized(lock) { socket }?.cancel()
                break
            }
            synchronized(lock) { queuedBytes -= frame.size }
            if (frame[0].toInt() and OPCODE_BITS == OP_CLOSE) {
                writerDone.countDown()
                // The server answers a close with its own; one that does not is cut off.
                if (!finished.await(closeTimeoutMs, TimeUnit.MILLISECONDS)) synchronized(lock) { socket }?.cancel()
                break
            }
        }
        // Nothing is written after the close, a failure or the end: draining stays set.
        writerDone.countDown()
    }

    private fun closeQuietly(closeable: java.io.Closeable) {
        try {
            closeable.close()
        } catch (_: IOException) {
            // The socket is gone either way.
        }
    }

    private fun closePayload(code: Int) = byteArrayOf((code ushr 8).toByte(), code.toByte())

    /** A close frame's code; 1005 (no status) for one without. */
    private fun codeOf(payload: ByteArray) = if (payload.size < 2) {
        NO_STATUS
    } else {
        (payload[0].toInt() and BYTE shl 8) or (payload[1].toInt() and BYTE)
    }

    private companion object {
        const val ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        const val HTTP_SWITCHING = 101
        const val KEY_BYTES = 16
        const val MASK_BYTES = 4
        const val BYTE = 0xff
        const val FIN = 0x80
        const val RSV_BITS = 0x70
        const val OPCODE_BITS = 0x0f
        const val CONTROL = 0x08
        const val MASKED = 0x80
        const val LENGTH_BITS = 0x7f
        const val LENGTH_16 = 126
        const val LENGTH_64 = 127
        const val SMALL = 125
        const val MEDIUM = 0xffff
        const val OP_CONTINUATION = 0x0
        const val OP_TEXT = 0x1
        const val OP_BINARY = 0x2
        const val OP_CLOSE = 0x8
        const val OP_PING = 0x9
        const val OP_PONG = 0xa
        const val NORMAL = 1000
        const val NO_STATUS = 1005

        /** As OkHttp: a socket with more than this waiting to be written fails rather than grow without bound. */
        const val MAX_QUEUED_BYTES = 16L * 1024 * 1024

        /** The largest message read; a server sends far less (the server caps a room's snapshot well below). */
        const val MAX_MESSAGE_BYTES = 64L * 1024 * 1024

        /** Ends the writer. */
        val STOP = ByteArray(0)
    }
}

/**
 * The process's socket threads: each open socket's reader holds one for the socket's life, and a drain
 * borrows one while frames wait (one wake-up a send). Idle threads end after 60 s.
 */
internal val SOCKET_THREADS = ThreadPoolExecutor(0, Int.MAX_VALUE, 60, TimeUnit.SECONDS, SynchronousQueue()) { r ->
    Thread(r, "svc-socket").apply { isDaemon = true }
}

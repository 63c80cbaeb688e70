package dev.svc.android

import dev.svc.android.internal.SOCKET_THREADS
import java.lang.management.ManagementFactory
import java.lang.management.MemoryType
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.SynchronousQueue
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener

/**
 * The Kotlin half of `npm run bench -- android` (bench/android.ts runs the TypeScript half against the
 * same server, alternating rounds with this one). Arguments: baseUrl projectId clientKey. Reads one
 * command a line from stdin and answers each with one JSON line on stdout:
 * - `connect <count>`: connect() → joined of `count` new clients, each in a new room: `{"samples":[ms…]}`
 * - `warm`: warms the message path up (several clients at once): `{}`
 * - `open rtt`: connects a sender that makes round trips through the library, in a new room: `{}`
 * - `open raw`: the same over a bare OkHttp WebSocket, with no library: `{}`
 * - `trips <warmup> <measured>`: round trips of the open sender: `{"samples":[ms…]}`
 * - `shut`: closes the open sender: `{}`
 * - `handoff <warmup> <measured>`: a token handed to another thread and back, no socket: `{"samples":[ms…]}`
 * - `heap <clients>`: live heap per connected client, all in one room: `{"bytes":n}`
 * - `quit`
 */
object AndroidBench {
    /** Clients that warm the message path up together, each with [WARM_MESSAGES] messages. */
    private const val WARM_CLIENTS = 20
    private const val WARM_MESSAGES = 300

    /** One message per 25 ms at most: the server allows 50 frames per second per connection. */
    private const val PACE_MS = 25L

    /**
     * Handlers of every client run on this one thread, and so does the measuring coroutine: as in an app,
     * where a coroutine of the main thread sends and the handlers run there too (and as in Node, where
     * the TypeScript half runs on one event loop).
     */
    private val platform = GrantedPlatform()

    private lateinit var args: Array<String>
    private val tag = System.nanoTime()
    private var rooms = 0

    /** A room name no other command used. */
    private fun roomName(kind: String) = "bench-kt-$kind-$tag-${++rooms}"

    /** A client as the public constructor makes it: the process's shared OkHttp client. */
    private fun client() = SvcClient(
        SvcConfig(args[1], args[2], baseUrl = args[0], heartbeatIntervalMs = 0),
        platform,
        mediaEngineFactory = { throw AssertionError("no media in the benchmark") },
    )

    /**
     * The live heap: what the heap's pools held right after a full collection (Node's `heapUsed` after
     * `gc()` likewise counts objects). `totalMemory - freeMemory` would also count the allocation buffers
     * that threads take between the collection and the reading.
     */
    private fun heapUsed(): Long {
        repeat(2) { System.gc() }
        return ManagementFactory.getMemoryPoolMXBeans()
            .filter { it.type == MemoryType.HEAP }
            .sumOf { it.collectionUsage?.used ?: 0L }
    }

    /** A connected client or socket that times message round trips; see [librarySender], [rawSender]. */
    private interface Sender {
        /** Sends a message and returns once it came back from the room. */
        suspend fun trip()

        suspend fun close()
    }

    /** The sender `open` made, which `trips` uses until `shut`. */
    private var sender: Sender? = null

    /**
     * Times [trip] for [warmup] + [measured] messages and returns the last [measured], in ms, each after
     * a pause of [PACE_MS]: under the server's per-connection rate, and from a process that slept, as an
     * app's message is.
     */
    private suspend fun roundTrips(warmup: Int, measured: Int, trip: suspend () -> Unit): List<Double> = (1..warmup + measured).map {
        delay(PACE_MS)
        val t0 = System.nanoTime()
        trip()
        (System.nanoTime() - t0) / 1e6
    }.drop(warmup)

    private suspend fun connects(count: Int): List<Double> = (1..count).map { i ->
        val c = client()
        val t0 = System.nanoTime()
        c.connect(roomOptions(roomName("connect"), "u$i"))
        val ms = (System.nanoTime() - t0) / 1e6
        c.close()
        ms
    }

    /**
     * A client in a room of its own whose round trip is `sendMessage` awaited, then the message's own
     * `message.received` handler.
     */
    private suspend fun librarySender(kind: String = "rtt"): Sender {
        val c = client()
        val waiting = ConcurrentHashMap<String, CompletableDeferred<Unit>>()
        c.onMessageReceived = { m, _ -> waiting.remove(m.message)?.complete(Unit) }
        val room = c.connect(roomOptions(roomName(kind), "sender"))
        var sent = 0
        return object : Sender {
            override suspend fun trip() {
                val message = "m${++sent}"
                val done = CompletableDeferred<Unit>()
                waiting[message] = done
                room.sendMessage(message)
                withTimeout(10_000) { done.await() }
            }

            override suspend fun close() = c.close()
        }
    }

    /**
     * Warms the message path up with several clients at once: one alone, paced by the server's rate
     * limit, would still be meeting the JIT's thresholds, and compiling, while it is measured.
     */
    private suspend fun warm() = coroutineScope {
        (1..WARM_CLIENTS).map {
            async {
                val s = librarySender("warm")
                roundTrips(WARM_MESSAGES, 0, s::trip)
                s.close()
            }
        }.awaitAll()
    }

    /**
     * The same round trips over a bare OkHttp WebSocket, with no client library: sent from this thread
     * (OkHttp writes on its writer thread) and answered on it (the reader thread completes the wait, which
     * resumes here). The floor of any OkHttp client that keeps Android's threading contract.
     */
    private suspend fun rawSender(): Sender {
        val tokenClient = client()
        val token = tokenClient.getToken(roomOptions(roomName("raw"), "raw"))
        tokenClient.close()
        val joined = CompletableDeferred<Unit>()
        val received = AtomicReference<CompletableDeferred<Unit>?>()
        val socket = dev.svc.android.internal.SharedHttp.client.newWebSocket(
            Request.Builder().url(token.wsUrl).build(),
            object : WebSocketListener() {
                override fun onOpen(webSocket: WebSocket, response: Response) {
                    webSocket.send("""{"id":"join","type":"session.join","data":{}}""")
                }

                override fun onMessage(webSocket: WebSocket, text: String) {
                    if (text.contains("\"session.joined\"")) joined.complete(Unit)
                    if (text.contains("\"message.received\"")) received.get()?.complete(Unit)
                }
            },
        )
        withTimeout(10_000) { joined.await() }
        var sent = 0
        return object : Sender {
            override suspend fun trip() {
                val i = ++sent
                val done = CompletableDeferred<Unit>().also { received.set(it) }
                socket.send("""{"id":"$i","type":"message.send","data":{"message":"m$i"}}""")
                withTimeout(10_000) { done.await() }
            }

            override suspend fun close() {
                socket.close(1000, null)
            }
        }
    }

    /**
     * A token handed to another thread and back, paced like the round trips so that both threads sleep
     * in between: two wake-ups, what this machine charges for each of the hand-offs a round trip makes
     * (the writer, the reader, the callback thread). Runs on the calling thread, blocking it.
     */
    private fun handoffs(warmup: Int, measured: Int): List<Double> {
        val there = SynchronousQueue<Long>()
        val back = SynchronousQueue<Long>()
        val echo = Thread({
            try {
                while (true) back.put(there.take())
            } catch (_: InterruptedException) {
                // The measurement is over.
            }
        }, "svc-bench-echo").apply {
            isDaemon = true
            start()
        }
        val samples = (1..warmup + measured).map {
            Thread.sleep(PACE_MS)
            val t0 = System.nanoTime()
            there.put(t0)
            back.take()
            (System.nanoTime() - t0) / 1e6
        }.drop(warmup)
        echo.interrupt()
        return samples
    }

    /**
     * Heap per connected client, [count] clients in one room (so each holds everyone's record). Each client's
     * socket reader thread is new, as an app's first client's is: a pooled thread that an earlier client left
     * would bring its per-thread caches (about 5 KiB) from before the measurement.
     */
    private suspend fun heapPerClient(count: Int): Long {
        endIdleSocketThreads()
        val before = heapUsed()
        val room = roomName("idle")
        val idle = (1..count).map { i -> client().also { it.connect(roomOptions(room, "idle$i")) } }
        val perClient = (heapUsed() - before) / count
        idle.forEach { it.close() }
        return perClient
    }

    /** Ends the socket pool's idle threads now rather than after their 60 s keep-alive. */
    private fun endIdleSocketThreads() {
        val pool = SOCKET_THREADS
        val keepAlive = pool.getKeepAliveTime(TimeUnit.MILLISECONDS)
        pool.setKeepAliveTime(1, TimeUnit.MILLISECONDS)
        val deadline = System.nanoTime() + 10_000_000_000
        while (pool.poolSize > pool.activeCount && System.nanoTime() < deadline) Thread.sleep(1)
        pool.setKeepAliveTime(keepAlive, TimeUnit.MILLISECONDS)
    }

    private fun samples(values: List<Double>) = values.joinToString(",", """{"samples":[""", "]}")

    @JvmStatic
    fun main(args: Array<String>) {
        this.args = args
        runBlocking(platform.callbackDispatcher) {
            while (true) {
                val command = withContext(Dispatchers.IO) { readlnOrNull() }?.trim()?.split(" ") ?: break
                val n = command.drop(1).mapNotNull { it.toIntOrNull() }
                val answer = when (command[0]) {
                    "connect" -> samples(connects(n[0]))

                    "warm" -> "{}".also { warm() }

                    "open" -> "{}".also {
                        check(sender == null) { "a sender is open" }
                        sender = if (command[1] == "raw") rawSender() else librarySender()
                    }

                    "trips" -> samples(roundTrips(n[0], n[1], checkNotNull(sender)::trip))

                    "shut" -> "{}".also {
                        sender?.close()
                        sender = null
                    }

                    "handoff" -> samples(handoffs(n[0], n[1]))

                    "heap" -> """{"bytes":${heapPerClient(n[0])}}"""

                    "quit" -> break

                    else -> error("unknown command ${command[0]}")
                }
                println(answer)
                System.out.flush()
            }
        }
        kotlin.system.exitProcess(0)
    }
}

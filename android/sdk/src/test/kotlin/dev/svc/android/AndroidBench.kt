package dev.svc.android

import java.lang.management.ManagementFactory
import java.lang.management.MemoryType
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicReference
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener

/**
 * The Kotlin half of `npm run bench -- android` (bench/android.ts runs the TypeScript half against the
 * same server and compares): connect() → joined, message round trip, heap per connected client.
 * Arguments: baseUrl projectId clientKey. Prints one JSON line.
 */
object AndroidBench {
    /** Connects measured in the fresh JVM (reported, no target), then, after [CONNECT_WARMUP] more, measured warm (the gate). */
    private const val CONNECTS = 30
    private const val CONNECT_WARMUP = 120
    private const val WARMUP = 300

    /** Clients that warm the message path up together before it is measured, each with [WARMUP] messages. */
    private const val WARM_CLIENTS = 20
    private const val MESSAGES = 300
    private const val IDLE_CLIENTS = 100
    private const val PACE_MS = 25.0

    /**
     * Handlers of every client run on this one thread, and so does the measuring coroutine: as in an app,
     * where a coroutine of the main thread sends and the handlers run there too (and as in Node, where
     * the TypeScript half runs on one event loop).
     */
    private val platform = GrantedPlatform()

    /** A client as the public constructor makes it: the process's shared OkHttp client. */
    private fun client(args: Array<String>) = SvcClient(
        SvcConfig(args[1], args[2], baseUrl = args[0], heartbeatIntervalMs = 0),
        platform,
        mediaEngineFactory = { throw AssertionError("no media in the benchmark") },
    )

    private fun percentile(values: List<Double>, p: Double): Double = values.sorted().let { it[((it.size - 1) * p).toInt()] }

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

    /**
     * Times [trip] for [WARMUP] + [measured] messages and returns the last [measured], in ms, pausing
     * between them to stay under the server's per-connection rate (50 frames/s).
     */
    private suspend fun roundTrips(measured: Int = MESSAGES, trip: suspend (Int) -> Unit): List<Double> = (1..WARMUP + measured).map { i ->
        val t0 = System.nanoTime()
        trip(i)
        val ms = (System.nanoTime() - t0) / 1e6
        delay((PACE_MS - ms).toLong().coerceAtLeast(0))
        ms
    }.drop(WARMUP)

    /**
     * The same round trips over a bare OkHttp WebSocket, with no client library: sent from this thread
     * (OkHttp writes on its writer thread) and answered on it (the reader thread completes the wait, which
     * resumes here). The floor of any OkHttp client that keeps Android's threading contract.
     */
    private suspend fun rawRoundTrips(args: Array<String>): List<Double> {
        val tokenClient = client(args)
        val token = tokenClient.getToken(roomOptions("bench-kt-raw-${System.nanoTime()}", "raw"))
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
        val rtts = roundTrips { i ->
            val done = CompletableDeferred<Unit>().also { received.set(it) }
            socket.send("""{"id":"$i","type":"message.send","data":{"message":"m$i"}}""")
            withTimeout(10_000) { done.await() }
        }
        socket.close(1000, null)
        return rtts
    }

    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking(platform.callbackDispatcher) { measure(args) }
        kotlin.system.exitProcess(0)
    }

    private suspend fun measure(args: Array<String>) {
        val tag = System.nanoTime()

        // connect() → joined, each a new client and a new room
        suspend fun connectTimes(pass: String, count: Int = CONNECTS) = (1..count).map { i ->
            val c = client(args)
            val t0 = System.nanoTime()
            c.connect(roomOptions("bench-kt-connect-$tag-$pass-$i", "u$i"))
            val ms = (System.nanoTime() - t0) / 1e6
            c.close()
            ms
        }
        val cold = connectTimes("cold")
        connectTimes("warm-up", CONNECT_WARMUP)
        val connects = connectTimes("warm")

        // message round trip: send over the socket, wait for the room to deliver it back; first the
        // message path is warmed up by several clients at once (one alone, paced by the server's rate
        // limit, would still be meeting the JIT's thresholds, and compiling, while it is measured)
        coroutineScope {
            (1..WARM_CLIENTS).map { n ->
                async {
                    val w = client(args)
                    val waits = ConcurrentHashMap<String, CompletableDeferred<Unit>>()
                    w.onMessageReceived = { m, _ -> waits.remove(m.message)?.complete(Unit) }
                    val r = w.connect(roomOptions("bench-kt-warm-$tag-$n", "warm$n"))
                    roundTrips(0) { i ->
                        val done = CompletableDeferred<Unit>()
                        waits["m$i"] = done
                        r.sendMessage("m$i")
                        withTimeout(10_000) { done.await() }
                    }
                    w.close()
                }
            }.awaitAll()
        }
        val c = client(args)
        val waiting = ConcurrentHashMap<String, CompletableDeferred<Unit>>()
        c.onMessageReceived = { m, _ -> waiting.remove(m.message)?.complete(Unit) }
        val room = c.connect(roomOptions("bench-kt-rtt-$tag", "sender"))
        val rtts = roundTrips { i ->
            val done = CompletableDeferred<Unit>()
            waiting["m$i"] = done
            room.sendMessage("m$i")
            withTimeout(10_000) { done.await() }
        }
        c.close()
        val raw = rawRoundTrips(args)

        // heap per connected client (all in one room, so each also holds everyone's participant record)
        val before = heapUsed()
        val idle = (1..IDLE_CLIENTS).map { i -> client(args).also { it.connect(roomOptions("bench-kt-idle-$tag", "idle$i")) } }
        val perClient = (heapUsed() - before) / IDLE_CLIENTS
        idle.forEach { it.close() }

        val result = mapOf(
            "coldConnectP50" to percentile(cold, 0.5),
            "connectP50" to percentile(connects, 0.5),
            "connectP99" to percentile(connects, 0.99),
            "rttP50" to percentile(rtts, 0.5),
            "rttP99" to percentile(rtts, 0.99),
            "rawRttP50" to percentile(raw, 0.5),
            "rawRttP99" to percentile(raw, 0.99),
            "bytesPerClient" to perClient,
        )
        println(result.entries.joinToString(",", "{", "}") { (k, v) -> "\"$k\":$v" })
    }
}

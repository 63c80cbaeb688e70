package dev.svc.android

import java.lang.management.ManagementFactory
import java.lang.management.MemoryType
import java.util.concurrent.ConcurrentHashMap
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout

/**
 * The Kotlin half of `npm run bench -- android` (bench/android.ts runs the TypeScript half against the
 * same server and compares): connect() → joined, message round trip, heap per connected client.
 * Arguments: baseUrl projectId clientKey. Prints one JSON line.
 */
object AndroidBench {
    private const val CONNECTS = 30
    private const val WARMUP = 30
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

    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking(platform.callbackDispatcher) { measure(args) }
        kotlin.system.exitProcess(0)
    }

    private suspend fun measure(args: Array<String>) {
        val tag = System.nanoTime()
        // connect() → joined, each a new client and a new room
        val connects = (1..CONNECTS).map { i ->
            val c = client(args)
            val t0 = System.nanoTime()
            c.connect(roomOptions("bench-kt-connect-$tag-$i", "u$i"))
            val ms = (System.nanoTime() - t0) / 1e6
            c.close()
            ms
        }

        // message round trip: send over the socket, wait for the room to deliver it back
        val c = client(args)
        val waiting = ConcurrentHashMap<String, CompletableDeferred<Unit>>()
        c.onMessageReceived = { m, _ -> waiting.remove(m.message)?.complete(Unit) }
        val room = c.connect(roomOptions("bench-kt-rtt-$tag", "sender"))
        val rtts = (1..WARMUP + MESSAGES).map { i ->
            val done = CompletableDeferred<Unit>()
            waiting["m$i"] = done
            val t0 = System.nanoTime()
            room.sendMessage("m$i")
            withTimeout(10_000) { done.await() }
            val ms = (System.nanoTime() - t0) / 1e6
            // stay under the server's per-connection rate (50 frames/s)
            delay((PACE_MS - ms).toLong().coerceAtLeast(0))
            ms
        }.drop(WARMUP)
        c.close()

        // heap per connected client (all in one room, so each also holds everyone's participant record)
        val before = heapUsed()
        val idle = (1..IDLE_CLIENTS).map { i -> client(args).also { it.connect(roomOptions("bench-kt-idle-$tag", "idle$i")) } }
        val perClient = (heapUsed() - before) / IDLE_CLIENTS
        idle.forEach { it.close() }

        println(
            """{"connectP50":${percentile(connects, 0.5)},"connectP99":${percentile(connects, 0.99)},""" +
                """"rttP50":${percentile(rtts, 0.5)},"rttP99":${percentile(rtts, 0.99)},"bytesPerClient":$perClient}""",
        )
    }
}

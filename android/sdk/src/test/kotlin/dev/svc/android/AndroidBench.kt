package dev.svc.android

import java.util.concurrent.ConcurrentHashMap
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.OkHttpClient

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

    private fun client(args: Array<String>) = SvcClient(
        SvcConfig(args[1], args[2], baseUrl = args[0], heartbeatIntervalMs = 0),
        GrantedPlatform(),
        OkHttpClient(),
        { throw AssertionError("no media in the benchmark") },
    )

    private fun percentile(values: List<Double>, p: Double): Double = values.sorted().let { it[((it.size - 1) * p).toInt()] }

    private fun heapUsed(): Long {
        repeat(3) {
            System.gc()
            Thread.sleep(50)
        }
        val rt = Runtime.getRuntime()
        return rt.totalMemory() - rt.freeMemory()
    }

    @JvmStatic
    fun main(args: Array<String>) {
        runBlocking { measure(args) }
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

        // heap per connected client (each with its own OkHttpClient, as separate apps would have)
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

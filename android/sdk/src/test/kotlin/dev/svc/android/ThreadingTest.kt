package dev.svc.android

import dev.svc.android.internal.SharedHttp
import java.util.Collections
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.Call
import okhttp3.Connection
import okhttp3.ConnectionPool
import okhttp3.EventListener
import okhttp3.Request
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The client's threading: frames are handled on the socket's reader thread holding the client's lock,
 * handlers run on the callback dispatcher, and every client of the process shares one OkHttp client.
 */
class ThreadingTest {
    @Test
    fun `a slow handler neither reorders events nor stalls the socket`() = runBlocking {
        val name = uniqueRoom("slow")
        TestClient().use { alice ->
            TestClient().use { bob ->
                TestClient().use { carol ->
                    val release = CountDownLatch(1)
                    val seen = Collections.synchronizedList(ArrayList<String>())
                    val handlerThreads = ConcurrentHashMap.newKeySet<String>()
                    bob.client.onMessageReceived = { message, _ ->
                        handlerThreads += Thread.currentThread().name.substringBefore(" @") // coroutine debug mode appends " @coroutine#n"
                        // The first message blocks the callback thread until released; each one is slow.
                        if (seen.isEmpty()) release.await(30, TimeUnit.SECONDS)
                        Thread.sleep(5)
                        seen += message.message
                    }
                    val aliceRoom = alice.client.connect(roomOptions(name, "alice"))
                    val bobRoom = bob.client.connect(roomOptions(name, "bob"))
                    val count = 10
                    val sent = (1..count).map { aliceRoom.sendMessage("a$it") }
                    // Bob's handler is blocked, yet his socket works: his requests are answered and his room
                    // follows the server (carol's arrival).
                    val own = (1..3).map { bobRoom.sendMessage("b$it") }
                    assertTrue(own.zipWithNext().all { (x, y) -> x < y } && own.first() > sent.last(), "seqs $sent then $own")
                    carol.client.connect(roomOptions(name, "carol"))
                    withTimeout(10_000) {
                        while (bobRoom.participants.none { it.userId == "carol" }) delay(10)
                    }
                    assertTrue(seen.isEmpty(), "the handler is still blocked on the first message")
                    release.countDown()
                    withTimeout(20_000) {
                        while (seen.size < count + 3) delay(10)
                    }
                    assertEquals((1..count).map { "a$it" } + (1..3).map { "b$it" }, seen.toList())
                    assertEquals(setOf("svc-test-callbacks"), handlerThreads.toSet())
                }
            }
        }
    }

    @Test
    fun `more clients than OkHttp's default 64 running calls connect in one process`() = runBlocking {
        // Each open WebSocket holds one of the shared dispatcher's running calls for its whole life.
        val server = TestServer.start(mapOf("SVC_MEDIA" to "off", "SVC_CLIENT_KEY_RATE_LIMIT" to "100000"))
        val clients = (1..70).map { TestClient(server) }
        try {
            val rooms = (1..7).map { uniqueRoom("many") }
            clients.chunked(10).map { batch ->
                async(Dispatchers.Default) {
                    batch.forEachIndexed { i, c -> c.client.connect(roomOptions(rooms[clients.indexOf(c) / 10], "u$i")) }
                }
            }.awaitAll()
            assertTrue(clients.all { it.client.connectionState.value == SvcConnectionState.CONNECTED })
            // and the last one still exchanges messages over its socket
            val last = clients.last().client
            val seq = last.room!!.sendMessage("still here")
            withTimeout(10_000) { while (clients.last().messages().none { it.seq == seq }) delay(10) }
        } finally {
            clients.forEach { it.close() }
            server.stop()
        }
    }

    @Test
    fun `the library's sockets send small writes at once (TCP_NODELAY)`() {
        // Nagle's algorithm would hold a frame written behind an unacknowledged pong for up to 40 ms.
        // A WebSocket's connection comes from the same client (OkHttp derives the socket's client from
        // it, socket factory included, and reports no events for it): a REST call's connection shows it.
        val noDelay = Collections.synchronizedList(ArrayList<Boolean>())
        val http = SharedHttp.client.newBuilder()
            .connectionPool(ConnectionPool()) // a fresh connection, not one another test left open
            .eventListener(
                object : EventListener() {
                    override fun connectionAcquired(call: Call, connection: Connection) {
                        noDelay += connection.socket().tcpNoDelay
                    }
                },
            )
            .build()
        val url = "${TestServer.shared.baseUrl}/healthz"
        http.newCall(Request.Builder().url(url).build()).execute().use { assertEquals(200, it.code) }
        assertEquals(listOf(true), noDelay.toList())
    }
}

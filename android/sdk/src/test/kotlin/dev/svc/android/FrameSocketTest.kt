package dev.svc.android

import dev.svc.android.internal.FrameListener
import dev.svc.android.internal.FrameSocket
import dev.svc.android.internal.SharedHttp
import java.io.DataInputStream
import java.io.OutputStream
import java.net.ServerSocket
import java.net.Socket
import java.security.MessageDigest
import java.util.Base64
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import okhttp3.Request
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout

/**
 * The library's WebSocket frames against a hand-written server on a loopback socket: the cases the Svc
 * server never produces on its own (fragments, pings, a refused or forged handshake, a masked frame) and
 * both closing handshakes. The real server's side is covered by every test that connects a client.
 */
@Timeout(30)
class FrameSocketTest {
    private val server = ServerSocket(0)

    @AfterEach
    fun close() = server.close()

    /** What the socket reported, in order. */
    private val events = LinkedBlockingQueue<String>()

    private val listener = object : FrameListener {
        override fun onOpen() {
            events.put("open")
        }

        override fun onText(text: String) {
            events.put("text $text")
        }

        override fun onClosed(code: Int) {
            events.put("closed $code")
        }

        override fun onFailure(error: Throwable) {
            events.put("failure")
        }
    }

    private fun next(): String = events.poll(10, TimeUnit.SECONDS) ?: error("no event within 10 s")

    private fun socket() = FrameSocket(
        SharedHttp.client,
        Request.Builder().url("ws://127.0.0.1:${server.localPort}/socket").build(),
        listener,
        closeTimeoutMs = 2_000,
    ).also { it.start() }

    /** The server's end of one connection: the handshake read, frames read (unmasked) and written. */
    private class Peer(val socket: Socket) {
        val input = DataInputStream(socket.getInputStream())
        val output: OutputStream = socket.getOutputStream()

        /** The request's headers, lower-cased names. */
        fun readHandshake(): Map<String, String> {
            val headers = HashMap<String, String>()
            val line = StringBuilder()
            while (true) {
                val c = input.read()
                check(c >= 0) { "the client hung up during the handshake" }
                if (c == '\n'.code) {
                    val text = line.toString().trimEnd('\r')
                    if (text.isEmpty()) return headers
                    text.indexOf(':').takeIf { it > 0 }?.let { headers[text.substring(0, it).lowercase()] = text.substring(it + 1).trim() }
                    line.clear()
                } else {
                    line.append(c.toChar())
                }
            }
        }

        fun accept(key: String, accept: String = acceptOf(key)) {
            output.write(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: $accept\r\n\r\n"
                    .toByteArray(),
            )
            output.flush()
        }

        /** One client frame: its first byte (FIN and opcode) and its unmasked payload; the client must mask. */
        fun readFrame(): Pair<Int, ByteArray> {
            val b0 = input.readUnsignedByte()
            val b1 = input.readUnsignedByte()
            assertTrue(b1 and 0x80 != 0, "a client frame is masked")
            val length = when (val l = b1 and 0x7f) {
                126 -> input.readUnsignedShort()
                127 -> input.readLong().toInt()
                else -> l
            }
            val mask = ByteArray(4).also { input.readFully(it) }
            val payload = ByteArray(length).also { input.readFully(it) }
            for (i in payload.indices) payload[i] = (payload[i].toInt() xor mask[i and 3].toInt()).toByte()
            return b0 to payload
        }

        /** One server frame, in one write (a client that fails on its header may close before the rest). */
        fun writeFrame(b0: Int, payload: ByteArray, masked: Boolean = false) {
            val header = byteArrayOf(b0.toByte(), ((if (masked) 0x80 else 0) or payload.size).toByte())
            output.write(header + (if (masked) ByteArray(4) else ByteArray(0)) + payload)
            output.flush()
        }
    }

    private fun peer(): Pair<Peer, Map<String, String>> {
        val peer = Peer(server.accept())
        return peer to peer.readHandshake()
    }

    @Test
    fun `sends masked text, reads fragments as one message, answers pings and echoes the server's close`() {
        val ws = socket()
        assertTrue(ws.send("queued before the handshake"))
        val (peer, headers) = peer()
        assertEquals("websocket", headers["upgrade"])
        assertEquals("13", headers["sec-websocket-version"])
        peer.accept(headers.getValue("sec-websocket-key"))
        assertEquals("open", next())
        val (b0, payload) = peer.readFrame()
        assertEquals(0x81, b0)
        assertEquals("queued before the handshake", String(payload))
        val long = "x".repeat(70_000)
        assertTrue(ws.send(long))
        assertEquals(long, String(peer.readFrame().second))

        peer.writeFrame(0x01, "hel".toByteArray())
        peer.writeFrame(0x89, "are you there".toByteArray())
        peer.writeFrame(0x80, "lo".toByteArray())
        assertEquals("text hello", next())
        val (pong, pongPayload) = peer.readFrame()
        assertEquals(0x8a, pong)
        assertEquals("are you there", String(pongPayload))

        peer.writeFrame(0x88, byteArrayOf(0x0f, 0xa1.toByte()))
        val (close, closePayload) = peer.readFrame()
        assertEquals(0x88, close)
        assertArrayEquals(byteArrayOf(0x0f, 0xa1.toByte()), closePayload)
        assertEquals("closed 4001", next())
        assertTrue(!ws.send("after the close"))
    }

    @Test
    fun `a close the client begins ends when the server answers it`() {
        val ws = socket()
        val (peer, headers) = peer()
        peer.accept(headers.getValue("sec-websocket-key"))
        assertEquals("open", next())
        assertTrue(ws.close(1000))
        assertTrue(!ws.close(1000))
        val (close, payload) = peer.readFrame()
        assertEquals(0x88, close)
        assertArrayEquals(byteArrayOf(0x03, 0xe8.toByte()), payload)
        peer.writeFrame(0x88, payload)
        assertEquals("closed 1000", next())
    }

    @Test
    fun `a forged accept, a refused upgrade and a masked server frame fail the socket`() {
        socket()
        val (forged, headers) = peer()
        forged.accept(headers.getValue("sec-websocket-key"), accept = acceptOf("another key"))
        assertEquals("failure", next())

        socket()
        val (refusing, _) = peer()
        refusing.output.write("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".toByteArray())
        refusing.output.flush()
        assertEquals("failure", next())

        socket()
        val (masking, masked) = peer()
        masking.accept(masked.getValue("sec-websocket-key"))
        assertEquals("open", next())
        masking.writeFrame(0x81, "masked".toByteArray(), masked = true)
        assertEquals("failure", next())
    }

    @Test
    fun `cancel fails the socket once, whether or not it has opened`() {
        val opening = socket()
        val (_, _) = peer()
        opening.cancel()
        assertEquals("failure", next())

        val open = socket()
        val (peer, headers) = peer()
        peer.accept(headers.getValue("sec-websocket-key"))
        assertEquals("open", next())
        open.cancel()
        open.cancel()
        assertEquals("failure", next())
        assertTrue(!open.send("after cancel"))
    }

    private companion object {
        fun acceptOf(key: String): String = Base64.getEncoder().encodeToString(
            MessageDigest.getInstance("SHA-1").digest("${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11".toByteArray()),
        )
    }
}

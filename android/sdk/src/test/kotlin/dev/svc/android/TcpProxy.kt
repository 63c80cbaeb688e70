package dev.svc.android

import java.io.IOException
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.util.concurrent.CopyOnWriteArrayList

/**
 * A loopback TCP forwarder in front of the server, so a test can cut a client's connection the way a
 * network does: [kill] resets both sockets (the server's side of the connection dies without a close
 * frame), and while [offline] new connections are reset at once.
 */
class TcpProxy(private val targetPort: Int) : AutoCloseable {
    private val listener = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
    private val open = CopyOnWriteArrayList<Pair<Socket, Socket>>()

    @Volatile var offline = false

    val port: Int get() = listener.localPort

    init {
        Thread({ acceptLoop() }, "tcp-proxy-$port").apply { isDaemon = true }.start()
    }

    /** Rewrites a URL of the server to go through this proxy. */
    fun route(url: String): String = url.replace(":$targetPort/", ":$port/")

    /** Resets every open connection. */
    fun kill() {
        for ((a, b) in open) {
            reset(a)
            reset(b)
        }
        open.clear()
    }

    override fun close() {
        listener.close()
        kill()
    }

    private fun acceptLoop() {
        while (!listener.isClosed) {
            val client = try {
                listener.accept()
            } catch (_: IOException) {
                return
            }
            if (offline) {
                reset(client)
                continue
            }
            val upstream = try {
                Socket(InetAddress.getLoopbackAddress(), targetPort)
            } catch (_: IOException) {
                reset(client)
                continue
            }
            open += client to upstream
            pump(client, upstream)
            pump(upstream, client)
        }
    }

    private fun pump(from: Socket, to: Socket) {
        Thread({
            val buffer = ByteArray(16 * 1024)
            try {
                val input = from.getInputStream()
                val output = to.getOutputStream()
                while (true) {
                    val n = input.read(buffer)
                    if (n < 0) break
                    output.write(buffer, 0, n)
                    output.flush()
                }
                to.shutdownOutput()
            } catch (_: IOException) {
                reset(from)
                reset(to)
            }
        }, "tcp-proxy-pump").apply { isDaemon = true }.start()
    }

    private fun reset(socket: Socket) {
        try {
            socket.setSoLinger(true, 0)
            socket.close()
        } catch (_: IOException) {
            // already closed
        }
    }
}

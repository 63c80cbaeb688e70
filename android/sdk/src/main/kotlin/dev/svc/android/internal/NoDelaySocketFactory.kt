package dev.svc.android.internal

import java.net.InetAddress
import java.net.Socket
import javax.net.SocketFactory

/**
 * Plain sockets with `TCP_NODELAY` (Nagle's algorithm off), which OkHttp does not set: a signaling
 * frame written while an earlier small write (a pong, an ICE candidate) is still unacknowledged would
 * otherwise wait for that acknowledgement, which the server's TCP delays by up to 40 ms when it has
 * nothing to send back. TLS sockets are layered over these, so `wss` gets the same.
 */
internal object NoDelaySocketFactory : SocketFactory() {
    private fun noDelay(socket: Socket) = socket.apply { tcpNoDelay = true }

    override fun createSocket(): Socket = noDelay(Socket())

    override fun createSocket(host: String, port: Int): Socket = noDelay(Socket(host, port))

    override fun createSocket(host: String, port: Int, localHost: InetAddress, localPort: Int): Socket =
        noDelay(Socket(host, port, localHost, localPort))

    override fun createSocket(host: InetAddress, port: Int): Socket = noDelay(Socket(host, port))

    override fun createSocket(address: InetAddress, port: Int, localAddress: InetAddress, localPort: Int): Socket =
        noDelay(Socket(address, port, localAddress, localPort))
}

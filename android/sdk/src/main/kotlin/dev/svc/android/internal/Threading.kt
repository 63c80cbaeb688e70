package dev.svc.android.internal

import kotlin.coroutines.CoroutineContext
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.Runnable
import okhttp3.Dispatcher
import okhttp3.OkHttpClient
import okhttp3.Protocol

/**
 * A client's serial dispatcher: runs one task at a time on [base] (which must itself run one at a time,
 * in order), each holding [lock]. A coroutine runs each stretch between two suspension points as one
 * task, so every such stretch is atomic with respect to the client's socket reader threads, which handle
 * incoming frames holding the same [lock] (see [SignalChannel]).
 */
internal class LockedDispatcher(private val lock: Any, private val base: CoroutineDispatcher) : CoroutineDispatcher() {
    override fun dispatch(context: CoroutineContext, block: Runnable) {
        base.dispatch(context, Runnable { synchronized(lock) { block.run() } })
    }
}

/**
 * The process's one OkHttp client, shared by every [dev.svc.android.SvcClient]: one connection pool (a
 * token request reuses a kept-alive connection) and one dispatcher, whose threads end after 60 s idle and
 * whose idle connections are evicted after 5 minutes, so an idle process keeps nothing running. Its sockets
 * send small writes at once ([NoDelaySocketFactory]). Created on first use.
 */
internal object SharedHttp {
    /**
     * Each open WebSocket holds one of the dispatcher's running calls for its whole life (OkHttp reads the
     * socket on that call's thread), so the default 64 would stop the 65th connection in a process; REST
     * calls stay bounded by the per-host limit (5), which WebSockets do not count against.
     */
    private const val MAX_RUNNING_CALLS = 4096

    val client: OkHttpClient by lazy {
        OkHttpClient.Builder()
            .dispatcher(Dispatcher().apply { maxRequests = MAX_RUNNING_CALLS })
            .socketFactory(NoDelaySocketFactory)
            .build()
    }

    /** [client] limited to HTTP/1.1, which WebSocket upgrades need ([FrameSocket]): one for the process. */
    private val upgrading: OkHttpClient by lazy { http1(client) }

    /** [http] limited to HTTP/1.1; the shared one for [client]. */
    fun forUpgrade(http: OkHttpClient): OkHttpClient = if (http === client) upgrading else http1(http)

    private fun http1(http: OkHttpClient) = http.newBuilder().protocols(listOf(Protocol.HTTP_1_1)).build()
}

package dev.svc.android

/**
 * How the client reaches the server.
 *
 * ```kotlin
 * SvcConfig(projectId = "prj_…", apiKey = "svc_pk_…", baseUrl = "https://svc.example.com")
 * ```
 */
public data class SvcConfig(
    /** The project id (sent as `X-Project-Id`). */
    val projectId: String,
    /** A client key (`svc_pk_…`, `realtime` scope) in apps; never ship a server key (`svc_sk_…`) in an app. */
    val apiKey: String,
    /**
     * The server's base address, e.g. `https://svc.example.com` (a trailing `/v1` is optional). The default,
     * `http://10.0.2.2:8080`, is a server on the development machine seen from the Android emulator.
     */
    val baseUrl: String = DEFAULT_BASE_URL,
    /** Sent as `X-Bundle-Id`; null means the app's package name (`Context.getPackageName()`). */
    val bundleId: String? = null,
    /** Automatic reconnection after a drop. */
    val reconnectPolicy: SvcReconnectPolicy = SvcReconnectPolicy(),
    /** How long a signaling request (join, resume, message…) or the whole handshake may take, in ms. */
    val requestTimeoutMs: Long = 10_000,
    /**
     * How often the client pings the server (ms); a ping without a pong within [requestTimeoutMs] counts
     * as a drop. 0 disables the client's pings (the server still pings).
     */
    val heartbeatIntervalMs: Long = 15_000,
    /** Subscribe to every track others publish, as soon as it starts (true); false: call nothing, receive nothing. */
    val autoSubscribe: Boolean = true,
) {
    init {
        require(projectId.isNotEmpty()) { "SvcConfig.projectId is required" }
        require(apiKey.isNotEmpty()) { "SvcConfig.apiKey is required" }
        require(requestTimeoutMs > 0) { "requestTimeoutMs must be positive" }
        require(heartbeatIntervalMs >= 0) { "heartbeatIntervalMs must not be negative" }
    }

    /** Defaults. */
    public companion object {
        /** A server on the development machine, as the Android emulator reaches it. */
        public const val DEFAULT_BASE_URL: String = "http://10.0.2.2:8080"
    }
}

/**
 * Automatic reconnection, as the TypeScript client does it. After a drop the client waits
 * `min(maxDelayMs, initialDelayMs · 2^(attempt−1))` scaled by a random factor in [0.5, 1) ("equal
 * jitter") before each attempt, and at least the `Retry-After` (up to a minute) of a 429 or 503 that
 * refused the previous one. Within the server's departure grace period (15 s by default) an attempt
 * resumes the session (others see nothing); after it, the attempt joins again as a new session. After
 * [maxAttempts] failed attempts the client gives up: [SvcConnectionState.FAILED] and
 * `onDisconnected(ReconnectFailed)`. With the defaults (10 attempts, 250 ms, 10 s) it gives up after 28–56 s.
 */
public data class SvcReconnectPolicy(
    /** Attempts before giving up (10). 0 disables reconnection: a drop is final at once. */
    val maxAttempts: Int = 10,
    /** The first delay before jitter, in ms (250). */
    val initialDelayMs: Long = 250,
    /** The largest delay before jitter, in ms (10000). */
    val maxDelayMs: Long = 10_000,
) {
    init {
        require(maxAttempts >= 0 && initialDelayMs >= 0 && maxDelayMs >= initialDelayMs) { "invalid reconnect policy" }
    }
}

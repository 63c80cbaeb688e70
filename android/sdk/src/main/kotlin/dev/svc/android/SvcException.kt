package dev.svc.android

/**
 * The one exception type the library throws. [code] is the server's registry code (the problem+json
 * `code` of a REST answer, or the signaling `error` frame's code, e.g. `room_full`, `token_invalid`,
 * `server_key_required`) when the server refused, or one of the client's own codes:
 * - `network_error`: the request or socket could not reach the server;
 * - `invalid_response`: the server answered something that is not the protocol;
 * - `connection_closed`: the socket closed before the session was established, without a code;
 * - `timeout`: no answer within the client's timeout;
 * - `client_disconnected`: [SvcClient.disconnect] was called while the operation was pending;
 * - `not_connected`: a room operation while the client has no live connection (e.g. reconnecting);
 * - `reconnect_failed`: automatic reconnection reached its limit;
 * - `permission_denied`: runtime permissions are missing ([SvcPermissionException]).
 */
public open class SvcException(
    /** The registry code or a client code. */
    public val code: String,
    /** The server's message (problem `detail` or `title`, or the error frame's message), or the client's. */
    message: String,
    /** The HTTP status of a REST refusal; 0 if none. */
    public val status: Int = 0,
    /** The server's request id, when it answered over HTTP. */
    public val requestId: String? = null,
    /** The WebSocket close code, when the signaling channel was closed. */
    public val closeCode: Int? = null,
    /** The underlying failure, if any. */
    cause: Throwable? = null,
) : Exception(message, cause) {
    /**
     * How long the server asked to wait before trying again (`Retry-After` of a 429 or 503), in ms; the
     * client's own retries (reconnection, room switches) wait at least this long.
     */
    public var retryAfterMs: Long? = null
        internal set

    override fun toString(): String = "SvcException($code: $message)"
}

/**
 * [SvcClient.connect] (or a media operation) needs runtime permissions the app has not been granted.
 * Thrown before any network call; ask the user with `ActivityCompat.requestPermissions` and retry.
 */
public class SvcPermissionException(
    /** The missing permissions, e.g. `android.permission.CAMERA`. */
    public val missingPermissions: List<String>,
) : SvcException(
    code = "permission_denied",
    message = "Missing runtime permissions: ${missingPermissions.joinToString()}",
)

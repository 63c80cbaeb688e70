package dev.svc.android.internal

import dev.svc.android.SvcException
import java.io.IOException
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.jsonObject
import okhttp3.Call
import okhttp3.Callback
import okhttp3.HttpUrl
import okhttp3.HttpUrl.Companion.toHttpUrl
import okhttp3.MediaType.Companion.toMediaType
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.RequestBody.Companion.toRequestBody
import okhttp3.Response

/** The REST side: authenticated requests to `<base>/v1/…`, failures mapped to [SvcException]. */
internal class RestClient(
    private val http: OkHttpClient,
    baseUrl: String,
    private val projectId: String,
    private val apiKey: String,
    private val bundleId: String?,
) {
    val apiBase: HttpUrl = apiBaseOf(baseUrl)

    /** Sends a request; returns the decoded body, or null for an empty answer (204). */
    suspend fun <T> request(
        method: String,
        path: List<String>,
        answer: KSerializer<T>?,
        body: String? = null,
        query: Map<String, String?> = emptyMap(),
        headers: Map<String, String> = emptyMap(),
    ): T? {
        val url = apiBase.newBuilder().apply {
            path.forEach { addPathSegment(it) }
            query.forEach { (k, v) -> if (v != null) addQueryParameter(k, v) }
        }.build()
        val request = Request.Builder().url(url)
            .header("Accept", "application/json")
            .header("Authorization", "Bearer $apiKey")
            .header("X-Project-Id", projectId)
            .apply {
                if (bundleId != null) header("X-Bundle-Id", bundleId)
                headers.forEach { (k, v) -> header(k, v) }
            }
            .method(method, body?.toRequestBody(JSON))
            .build()
        val label = "$method /${path.joinToString("/")}"
        val response = try {
            http.newCall(request).await()
        } catch (e: IOException) {
            throw SvcException("network_error", "$label: ${e.message}", cause = e)
        }
        response.use {
            val text = it.body.string()
            val requestId = it.header("request-id")
            if (!it.isSuccessful) {
                throw errorOf(it.code, text, requestId).apply { retryAfterMs = retryAfterMs(it.header("retry-after")) }
            }
            if (answer == null || text.isEmpty()) return null
            return try {
                WireJson.decodeFromString(answer, text)
            } catch (e: SerializationException) {
                throw SvcException("invalid_response", "$label: ${e.message}", it.code, requestId, cause = e)
            } catch (e: IllegalArgumentException) {
                throw SvcException("invalid_response", "$label: ${e.message}", it.code, requestId, cause = e)
            }
        }
    }

    private fun errorOf(status: Int, text: String, requestId: String?): SvcException {
        val problem = try {
            WireJson.parseToJsonElement(text).jsonObject
        } catch (_: SerializationException) {
            null
        } catch (_: IllegalArgumentException) {
            null
        }
        val code = problem.string("code")
        if (problem == null || code == null) {
            return SvcException("invalid_response", "HTTP $status without a problem body", status, requestId)
        }
        val message = problem.string("detail") ?: problem.string("title") ?: code
        return SvcException(code, message, status, problem.string("requestId") ?: requestId)
    }

    private companion object {
        val JSON = "application/json".toMediaType()
    }
}

/** `Retry-After` in ms: delay-seconds or an HTTP date (RFC 9110 §10.2.3); null if absent or bad. */
internal fun retryAfterMs(header: String?, nowMs: Long = System.currentTimeMillis()): Long? {
    val value = header?.trim() ?: return null
    if (value.isNotEmpty() && value.all { it in '0'..'9' }) return value.toLongOrNull()?.times(1000)
    return Times.httpDateMillis(value)?.let { maxOf(0L, it - nowMs) }
}

private fun JsonObject?.string(key: String): String? = (this?.get(key) as? JsonPrimitive)?.takeIf { it.isString }?.content

/** `https://h/`, `https://h/v1`, `https://h/v1/` → `https://h/v1/`. */
internal fun apiBaseOf(baseUrl: String): HttpUrl {
    val url = try {
        baseUrl.toHttpUrl()
    } catch (e: IllegalArgumentException) {
        throw IllegalArgumentException("SvcConfig.baseUrl is not an http(s) URL: \"$baseUrl\"", e)
    }
    val segments = url.pathSegments.filter { it.isNotEmpty() }.toMutableList()
    if (segments.lastOrNull() == "v1") segments.removeAt(segments.size - 1)
    return url.newBuilder().encodedPath("/").apply {
        segments.forEach { addPathSegment(it) }
        addPathSegment("v1")
    }.build()
}

/** Runs the call; cancelling the coroutine cancels the call. */
internal suspend fun Call.await(): Response = suspendCancellableCoroutine { cont ->
    cont.invokeOnCancellation { cancel() }
    enqueue(
        object : Callback {
            override fun onResponse(call: Call, response: Response) {
                cont.resume(response) { _, value, _ -> value.close() }
            }

            override fun onFailure(call: Call, e: IOException) {
                if (!cont.isCancelled) cont.resumeWithException(e)
            }
        },
    )
}

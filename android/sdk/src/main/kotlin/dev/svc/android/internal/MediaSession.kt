package dev.svc.android.internal

import dev.svc.android.SvcException
import dev.svc.android.SvcTrackInfo
import dev.svc.android.SvcTrackSource
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject

/**
 * The media negotiation of one room connection (docs/realtime-protocol.md §8), shared by every
 * [MediaEngine]: publish a source (client offer → server answer), subscribe to a track (server offer →
 * client answer), trickle ICE both ways, and the renegotiation after a full rejoin or an engine restart.
 * Runs holding the client's state lock: on its serial dispatcher ([scope]), whose tasks hold it, or from
 * frame handling on the socket's reader thread ([onServerCandidate]); engine callbacks are posted to [scope].
 */
internal class MediaSession(
    private val engineProvider: () -> MediaEngine,
    private val scope: CoroutineScope,
    private val request: suspend (type: String, data: JsonElement) -> JsonObject,
    private val onRemoteTrack: (SvcTrackInfo, RemoteTrack) -> Unit,
    /** Lost media that could not be re-established. */
    private val onError: (SvcException) -> Unit,
) {
    private class Leg(val peer: MediaPeer) {
        /** The trackId (publication) or subscriptionId (subscription) once the server named it. */
        var id: String? = null
        val pending = ArrayList<IceCandidate?>()
        var gatheringDone = false
    }

    private class Publication(val source: SvcTrackSource, val local: LocalTrack, val leg: Leg)

    /** [subscriptionId]: the server's id, known before the negotiation ends (the leg is named after it). */
    private class Subscription(val track: SvcTrackInfo, val leg: Leg, val subscriptionId: String) {
        var remote: RemoteTrack? = null
    }

    private val engine: MediaEngine get() = engineProvider()

    var snapshot: MediaSnapshot? = null
    private val publications = LinkedHashMap<SvcTrackSource, Publication>()
    private val subscriptions = LinkedHashMap<String, Subscription>()

    /** Legs that failed in a row without connecting, by publication source or subscribed trackId. */
    private val failures = HashMap<Any, Int>()

    /** The sources the app enabled, with what their capture needs (the MediaProjection result for the screen). */
    private val enabled = LinkedHashMap<SvcTrackSource, Any?>()

    /** Remote tracks received, by trackId. */
    fun remoteTrack(trackId: String): RemoteTrack? = subscriptions[trackId]?.remote

    /** The local track of [source], if published. */
    fun localTrack(source: SvcTrackSource): LocalTrack? = publications[source]?.local

    fun publishedTrackId(source: SvcTrackSource): String? = publications[source]?.leg?.id

    private fun <T> encode(serializer: KSerializer<T>, value: T): JsonElement = WireJson.encodeToJsonElement(serializer, value)

    private fun <T> decode(serializer: KSerializer<T>, ack: JsonObject): T = try {
        WireJson.decodeFromJsonElement(serializer, ack)
    } catch (e: kotlinx.serialization.SerializationException) {
        throw SvcException("invalid_response", "Bad media ack: ${e.message}", cause = e)
    }

    private fun requireMedia(): MediaSnapshot {
        val media = snapshot ?: throw SvcException("not_connected", "Not connected to a room")
        if (!media.available) throw SvcException("media_unavailable", "The server runs without a media engine")
        return media
    }

    /** Publishes [source] (once; enabling an enabled source does nothing). */
    suspend fun enable(source: SvcTrackSource, screenCapture: Any?) {
        enabled[source] = screenCapture
        if (source in publications) return
        try {
            publish(source, screenCapture)
        } catch (e: Exception) {
            enabled.remove(source)
            throw e
        }
    }

    /** Unpublishes [source]. */
    suspend fun disable(source: SvcTrackSource) {
        enabled.remove(source)
        val publication = publications.remove(source) ?: return
        val id = publication.leg.id
        try {
            if (id != null) request("media.unpublish", encode(MediaTrackIdData.serializer(), MediaTrackIdData(id)))
        } finally {
            publication.leg.peer.close()
            publication.local.dispose()
        }
    }

    private suspend fun publish(source: SvcTrackSource, screenCapture: Any?) {
        val media = requireMedia()
        if (source !in media.permissions.canPublishSources) {
            throw SvcException("media_not_allowed", "This participant may not publish $source in this room")
        }
        val local = engine.createLocalTrack(source, screenCapture)
        val leg = newLeg(media, source) { }
        publications[source] = Publication(source, local, leg)
        try {
            leg.peer.addSendOnly(local)
            val offer = leg.peer.createOffer()
            val ack =
                decode(
                    MediaPublishAck.serializer(),
                    request("media.publish", encode(MediaPublishData.serializer(), MediaPublishData(source, offer))),
                )
            if (publications[source]?.leg !== leg) {
                // Ended while the server published it (its PeerConnection failed, or disable): release the track.
                release("media.unpublish", encode(MediaTrackIdData.serializer(), MediaTrackIdData(ack.trackId)))
                return
            }
            // Named first: a failure during the answer then releases the server's track.
            named(leg, ack.trackId)
            leg.peer.acceptAnswer(ack.sdp)
        } catch (e: Exception) {
            // Ended meanwhile: whoever ended it closed and released what it held.
            if (publications[source]?.leg !== leg) return
            publications.remove(source)
            leg.peer.close()
            local.dispose()
            throw e
        }
    }

    /** Subscribes to [track] unless already subscribed. */
    suspend fun subscribe(track: SvcTrackInfo) {
        val media = requireMedia()
        if (track.trackId in subscriptions) return
        val ack =
            decode(
                MediaSubscribeAck.serializer(),
                request("media.subscribe", encode(MediaTrackIdData.serializer(), MediaTrackIdData(track.trackId))),
            )
        lateinit var subscription: Subscription
        val leg = newLeg(media, track.trackId) { remote ->
            subscription.remote = remote
            onRemoteTrack(track, remote)
        }
        subscription = Subscription(track, leg, ack.subscriptionId)
        subscriptions[track.trackId] = subscription
        try {
            val answer = leg.peer.answerOffer(ack.sdp)
            if (subscriptions[track.trackId] !== subscription) return
            request("media.answer", encode(MediaAnswerData.serializer(), MediaAnswerData(ack.subscriptionId, answer)))
            named(leg, ack.subscriptionId)
        } catch (e: Exception) {
            // Ended meanwhile (its PeerConnection failed, the track stopped): released by whoever ended it.
            if (subscriptions[track.trackId] !== subscription) return
            subscriptions.remove(track.trackId)
            leg.peer.close()
            throw e
        }
    }

    /** A new leg; [key] names what it carries (the source or the trackId) for counting failures. */
    private fun newLeg(media: MediaSnapshot, key: Any, remoteTrack: (RemoteTrack) -> Unit): Leg {
        lateinit var leg: Leg
        val peer = engine.createPeer(
            media.iceServers,
            object : PeerEvents {
                override fun onIceCandidate(candidate: IceCandidate?) {
                    scope.launch { trickle(leg, candidate) }
                }

                override fun onRemoteTrack(track: RemoteTrack) {
                    scope.launch { remoteTrack(track) }
                }

                override fun onConnected() {
                    scope.launch { failures.remove(key) }
                }

                override fun onFailed() {
                    scope.launch { failed(leg) }
                }
            },
        )
        leg = Leg(ClosablePeer(peer))
        return leg
    }

    /** The server named the leg: candidates gathered meanwhile go out now (none may precede the id). */
    private fun named(leg: Leg, id: String) {
        leg.id = id
        val pending = leg.pending.toList()
        leg.pending.clear()
        pending.forEach { scope.launch { send(id, it) } }
    }

    private suspend fun trickle(leg: Leg, candidate: IceCandidate?) {
        if (candidate == null) {
            if (leg.gatheringDone) return
            leg.gatheringDone = true
        }
        val id = leg.id
        if (id == null) leg.pending += candidate else send(id, candidate)
    }

    private suspend fun send(id: String, candidate: IceCandidate?) {
        try {
            request("media.trickle", encode(MediaTrickleData.serializer(), MediaTrickleData(id, candidate)))
        } catch (_: SvcException) {
            // The leg ended or the connection dropped; the server's SDP carries its own candidates.
        }
    }

    /** A `media.trickle` session frame: a server candidate for one of this client's PeerConnections. */
    fun onServerCandidate(data: MediaTrickleData) {
        val leg = publications.values.firstOrNull { it.leg.id == data.id }?.leg
            ?: subscriptions.values.firstOrNull { it.leg.id == data.id }?.leg
            ?: return
        leg.peer.addIceCandidate(data.candidate)
    }

    /**
     * A PeerConnection failed here (ICE): it is released on the server and the source published, or the track subscribed to,
     * again on a new one. One that failed [MAX_FAILURES] times in a row without connecting is given up.
     */
    private suspend fun failed(leg: Leg) {
        val publication = publications.values.firstOrNull { it.leg === leg }
        if (publication != null) {
            publications.remove(publication.source)
            leg.peer.close()
            publication.local.dispose()
            leg.id?.let { release("media.unpublish", encode(MediaTrackIdData.serializer(), MediaTrackIdData(it))) }
            if (publication.source !in enabled) return
            if (!again(publication.source)) {
                enabled.remove(publication.source)
                onError(SvcException("media_failed", "The ${publication.source} connection failed $MAX_FAILURES times in a row"))
                return
            }
            publishAgain(publication.source)
            return
        }
        subscriptions.values.firstOrNull { it.leg === leg }?.let { ended(it, release = true) }
    }

    /** A `media.ended` session frame: the engine hung up one of this client's subscriptions. */
    suspend fun onEnded(data: MediaEndedData) {
        subscriptions.values.firstOrNull { it.subscriptionId == data.id }?.let { ended(it, release = false) }
    }

    /** The subscription's PeerConnection is gone ([release]: the server still holds it): subscribe to the track again. */
    private suspend fun ended(subscription: Subscription, release: Boolean) {
        val trackId = subscription.track.trackId
        if (subscriptions[trackId] !== subscription) return
        subscriptions.remove(trackId)
        subscription.leg.peer.close()
        if (release) {
            release(
                "media.unsubscribe",
                encode(MediaSubscriptionIdData.serializer(), MediaSubscriptionIdData(subscription.subscriptionId)),
            )
        }
        if (!again(trackId)) {
            onError(SvcException("media_failed", "The subscription to $trackId failed $MAX_FAILURES times in a row"))
            return
        }
        subscribeAgain(subscription.track)
    }

    /**
     * Publishes an enabled [source] again. An engine that is not back yet (`media_unavailable`, `media_failed`) is
     * retried 8 times, 250 ms doubling to 4 s, as the TypeScript client does; a source the server still refuses is
     * no longer enabled ([onError]). Without a connection it stays enabled: the rejoin publishes it.
     */
    private suspend fun publishAgain(source: SvcTrackSource) {
        var retry = 0
        while (source in enabled && source !in publications) {
            try {
                publish(source, enabled[source])
                return
            } catch (e: SvcException) {
                if (e.code == "not_connected") return
                if ((e.code == "media_unavailable" || e.code == "media_failed") && retry < REPUBLISH_RETRIES) {
                    delay(minOf(4_000L, 250L shl retry++))
                    continue
                }
                enabled.remove(source)
                onError(e)
                return
            }
        }
    }

    /** Subscribes to [track] again; a track that stopped meanwhile, or a dropped connection, is not an error. */
    private suspend fun subscribeAgain(track: SvcTrackInfo) {
        try {
            subscribe(track)
        } catch (e: SvcException) {
            if (e.code != "track_not_found" && e.code != "not_connected") onError(e)
        }
    }

    /** Releases a publication or subscription on the server; one already gone there, or a dropped connection, is fine. */
    private suspend fun release(type: String, data: JsonElement) {
        try {
            request(type, data)
        } catch (_: SvcException) {
            // Already gone on the server, or the connection dropped (the server ends the session's media).
        }
    }

    /** Counts one more failure of [key]; false once it failed [MAX_FAILURES] times in a row. */
    private fun again(key: Any): Boolean {
        val n = (failures[key] ?: 0) + 1
        if (n >= MAX_FAILURES) {
            failures.remove(key)
            return false
        }
        failures[key] = n
        return true
    }

    /** `media.stopped`: close the subscription to it; an own track the server lost is published again ([republish]). */
    suspend fun onTrackStopped(track: SvcTrackInfo, ownSid: String, republish: Boolean) {
        failures.remove(track.trackId)
        subscriptions.remove(track.trackId)?.leg?.peer?.close()
        if (track.sid != ownSid) return
        val publication = publications.values.firstOrNull { it.leg.id == track.trackId } ?: return
        publications.remove(publication.source)
        publication.leg.peer.close()
        publication.local.dispose()
        if (republish && publication.source in enabled) publishAgain(publication.source)
    }

    /**
     * After a resume: [held] names the subscriptions the server still holds for the session. The others
     * were held by another server node (the session moved there): subscribe to their tracks again.
     */
    suspend fun onResumed(held: List<String>?) {
        if (held == null) return
        val lost = subscriptions.values.filter { it.leg.id != null && it.leg.id !in held }
        for (subscription in lost) {
            subscriptions.remove(subscription.track.trackId)
            subscription.leg.peer.close()
            subscribeAgain(subscription.track)
        }
    }

    /**
     * A new session after a full rejoin (the old one's tracks and subscriptions are gone on the server):
     * publish every enabled source again; the caller subscribes to the snapshot's tracks.
     */
    suspend fun onRejoined() {
        subscriptions.values.forEach { it.leg.peer.close() }
        subscriptions.clear()
        publications.values.forEach {
            it.leg.peer.close()
            it.local.dispose()
        }
        publications.clear()
        for (source in enabled.keys.toList()) publishAgain(source)
    }

    /** Closes every PeerConnection and capture (leaving the room). */
    fun close() {
        subscriptions.values.forEach { it.leg.peer.close() }
        subscriptions.clear()
        publications.values.forEach {
            it.leg.peer.close()
            it.local.dispose()
        }
        publications.clear()
        enabled.clear()
    }
}

/** Failures in a row, without connecting in between, after which a publication or subscription is given up. */
private const val MAX_FAILURES = 5

/** Times a source is published again while the engine is not back, before it is given up. */
private const val REPUBLISH_RETRIES = 8

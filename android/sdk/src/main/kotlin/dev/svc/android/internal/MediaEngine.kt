package dev.svc.android.internal

import dev.svc.android.SvcException
import dev.svc.android.SvcIceServer
import dev.svc.android.SvcTrackKind
import dev.svc.android.SvcTrackSource
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Job
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.isActive

/**
 * The WebRTC stack behind the media API, one PeerConnection per track as the protocol wants. Two
 * implementations share every line of negotiation ([MediaSession]): `org.webrtc` on Android
 * ([AndroidMediaEngine]) and `dev.onvoid.webrtc` on a desktop JVM (the tests' engine).
 */
internal interface MediaEngine {
    /** A new PeerConnection using [iceServers]; [events] may be called on any thread. */
    fun createPeer(iceServers: List<SvcIceServer>, events: PeerEvents): MediaPeer

    /** Starts capturing [source] (camera, microphone or screen). Throws [dev.svc.android.SvcException] if it cannot. */
    fun createLocalTrack(source: SvcTrackSource, screenCapture: Any?): LocalTrack

    /** Releases the engine (factory, threads). */
    fun close()
}

/** A captured track. */
internal interface LocalTrack {
    val source: SvcTrackSource

    /** The native track (`org.webrtc.MediaStreamTrack` on Android). */
    val native: Any

    /** Stops capturing and releases the track. */
    fun dispose()
}

/** A received track. */
internal class RemoteTrack(val kind: SvcTrackKind, val native: Any)

/** What a PeerConnection reports. */
internal interface PeerEvents {
    /** A local ICE candidate; null when gathering is complete. */
    fun onIceCandidate(candidate: IceCandidate?)

    /** A remote track arrived (subscriptions). */
    fun onRemoteTrack(track: RemoteTrack)

    /** ICE connected (again). */
    fun onConnected()

    /** The connection failed for good. */
    fun onFailed()
}

/** One PeerConnection with one m-line. */
internal interface MediaPeer {
    /** Adds [track] as a send-only transceiver (publishing). */
    fun addSendOnly(track: LocalTrack)

    /** Creates an offer and sets it as the local description; returns its SDP. */
    suspend fun createOffer(): String

    /** Sets the remote answer. */
    suspend fun acceptAnswer(sdp: String)

    /** Sets the remote offer, creates an answer and sets it locally; returns its SDP. */
    suspend fun answerOffer(sdp: String): String

    /** Adds a remote ICE candidate; null: the remote side finished gathering. */
    fun addIceCandidate(candidate: IceCandidate?)

    /** Closes the PeerConnection. */
    fun close()
}

/**
 * A [MediaPeer] whose negotiation calls end once it is closed: a closed native PeerConnection may
 * never call back (the WebRTC spec abandons its pending operations), and a negotiation waiting on
 * it would wait for ever. A call cut short throws `media_failed`.
 */
internal class ClosablePeer(private val peer: MediaPeer) : MediaPeer by peer {
    private val closed = Job()

    override suspend fun createOffer(): String = untilClosed { peer.createOffer() }

    override suspend fun acceptAnswer(sdp: String) = untilClosed { peer.acceptAnswer(sdp) }

    override suspend fun answerOffer(sdp: String): String = untilClosed { peer.answerOffer(sdp) }

    override fun close() {
        closed.complete()
        peer.close()
    }

    private suspend fun <T> untilClosed(call: suspend () -> T): T {
        if (closed.isCompleted) throw closedError()
        return coroutineScope {
            val work = async { call() }
            val cut = closed.invokeOnCompletion { work.cancel() }
            try {
                work.await()
            } catch (e: CancellationException) {
                // Cut short by close(), not by the caller's own cancellation.
                if (closed.isCompleted && isActive) throw closedError()
                throw e
            } finally {
                cut.dispose()
            }
        }
    }

    private fun closedError() = SvcException("media_failed", "The PeerConnection was closed")
}

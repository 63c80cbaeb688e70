package dev.svc.android

import dev.svc.android.internal.ClosablePeer
import dev.svc.android.internal.IceCandidate
import dev.svc.android.internal.LocalTrack
import dev.svc.android.internal.MediaPeer
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.yield
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** A closed PeerConnection may never call back: its negotiation calls must end anyway. */
class ClosablePeerTest {
    /** A native PeerConnection that never answers until [answer] completes; counts closes. */
    private class SilentPeer : MediaPeer {
        val answer = CompletableDeferred<String>()
        var closes = 0

        override fun addSendOnly(track: LocalTrack) = Unit

        override suspend fun createOffer(): String = answer.await()

        override suspend fun acceptAnswer(sdp: String) {
            answer.await()
        }

        override suspend fun answerOffer(sdp: String): String = answer.await()

        override fun addIceCandidate(candidate: IceCandidate?) = Unit

        override fun close() {
            closes++
        }
    }

    @Test
    fun `a negotiation waiting on a closed peer ends with media_failed, and later calls fail at once`() = runBlocking<Unit> {
        val native = SilentPeer()
        val peer = ClosablePeer(native)
        val offer = async(start = CoroutineStart.UNDISPATCHED) { runCatching { peer.createOffer() } }
        val answer = async(start = CoroutineStart.UNDISPATCHED) { runCatching { peer.answerOffer("v=0") } }
        yield()
        assertTrue(offer.isActive && answer.isActive, "both wait for the native callback")
        peer.close()
        for (call in listOf(offer, answer)) {
            val error = withTimeout(5_000) { call.await() }.exceptionOrNull()
            assertEquals("media_failed", (error as SvcException).code)
        }
        assertEquals(1, native.closes)
        assertEquals("media_failed", assertThrows<SvcException> { runBlocking { peer.acceptAnswer("v=0") } }.code)
    }

    @Test
    fun `an open peer's calls return the native result, and the caller's own cancellation stays a cancellation`() = runBlocking<Unit> {
        val native = SilentPeer()
        val peer = ClosablePeer(native)
        val offer = async { peer.createOffer() }
        native.answer.complete("offer-sdp")
        assertEquals("offer-sdp", offer.await())

        val waiting = ClosablePeer(object : MediaPeer by native {
            override suspend fun createOffer(): String = awaitCancellation()
        })
        val cancelled = async(start = CoroutineStart.UNDISPATCHED) { waiting.createOffer() }
        cancelled.cancel()
        assertTrue(runCatching { cancelled.await() }.exceptionOrNull() is kotlinx.coroutines.CancellationException)
    }
}

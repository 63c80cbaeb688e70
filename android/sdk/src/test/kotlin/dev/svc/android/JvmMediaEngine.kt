package dev.svc.android

import dev.onvoid.webrtc.CreateSessionDescriptionObserver
import dev.onvoid.webrtc.PeerConnectionFactory
import dev.onvoid.webrtc.PeerConnectionObserver
import dev.onvoid.webrtc.RTCAnswerOptions
import dev.onvoid.webrtc.RTCConfiguration
import dev.onvoid.webrtc.RTCIceCandidate
import dev.onvoid.webrtc.RTCIceConnectionState
import dev.onvoid.webrtc.RTCIceGatheringState
import dev.onvoid.webrtc.RTCIceServer
import dev.onvoid.webrtc.RTCOfferOptions
import dev.onvoid.webrtc.RTCPeerConnection
import dev.onvoid.webrtc.RTCRtpTransceiver
import dev.onvoid.webrtc.RTCRtpTransceiverDirection
import dev.onvoid.webrtc.RTCRtpTransceiverInit
import dev.onvoid.webrtc.RTCSdpType
import dev.onvoid.webrtc.RTCSessionDescription
import dev.onvoid.webrtc.RTCStats
import dev.onvoid.webrtc.RTCStatsReport
import dev.onvoid.webrtc.SetSessionDescriptionObserver
import dev.onvoid.webrtc.media.MediaStreamTrack
import dev.onvoid.webrtc.media.audio.AudioOptions
import dev.onvoid.webrtc.media.audio.HeadlessAudioDeviceModule
import dev.onvoid.webrtc.media.video.CustomVideoSource
import dev.onvoid.webrtc.media.video.NativeI420Buffer
import dev.onvoid.webrtc.media.video.VideoFrame
import dev.svc.android.internal.IceCandidate
import dev.svc.android.internal.LocalTrack
import dev.svc.android.internal.MediaEngine
import dev.svc.android.internal.MediaPeer
import dev.svc.android.internal.PeerEvents
import dev.svc.android.internal.RemoteTrack
import java.util.concurrent.CopyOnWriteArrayList
import kotlinx.coroutines.CompletableDeferred

/**
 * The desktop engine for JVM tests: `dev.onvoid.webrtc` (libwebrtc over JNI) with a headless audio
 * device (its recording thread captures the microphone track; a CustomAudioSource pushed from a
 * thread of ours would race with it inside libwebrtc) and a generated camera. Negotiation is the library's own ([dev.svc.android.internal.MediaSession]).
 */
internal class JvmMediaEngine : MediaEngine {
    private val adm = HeadlessAudioDeviceModule()
    private val factory = PeerConnectionFactory(adm)
    private val peers = CopyOnWriteArrayList<RTCPeerConnection>()
    private val reporters = CopyOnWriteArrayList<PeerEvents>()

    /**
     * Reports ICE failure on every PeerConnection, as libwebrtc does when the network path dies (tests on
     * this machine cannot cut a path: it has no netfilter or qdisc). Closed ones are ignored by the library.
     */
    fun reportFailed() = reporters.forEach { it.onFailed() }

    /** While true, no PeerConnection reports that it connected (so failures count as in a row). */
    @Volatile
    var hideConnected = false

    override fun createPeer(iceServers: List<SvcIceServer>, events: PeerEvents): MediaPeer {
        val config = RTCConfiguration().apply {
            this.iceServers = iceServers.map { s ->
                RTCIceServer().apply {
                    urls = s.urls
                    username = s.username
                    password = s.credential
                }
            }
        }
        val pc = factory.createPeerConnection(
            config,
            object : PeerConnectionObserver {
                override fun onIceCandidate(candidate: RTCIceCandidate) {
                    events.onIceCandidate(IceCandidate(candidate.sdp, candidate.sdpMid, candidate.sdpMLineIndex))
                }

                override fun onIceGatheringChange(state: RTCIceGatheringState) {
                    if (state == RTCIceGatheringState.COMPLETE) events.onIceCandidate(null)
                }

                override fun onIceConnectionChange(state: RTCIceConnectionState) {
                    when (state) {
                        RTCIceConnectionState.CONNECTED -> if (!hideConnected) events.onConnected()
                        RTCIceConnectionState.FAILED -> events.onFailed()
                        else -> Unit
                    }
                }

                override fun onTrack(transceiver: RTCRtpTransceiver) {
                    val track = transceiver.receiver.track
                    val kind = if (track.kind == MediaStreamTrack.AUDIO_TRACK_KIND) SvcTrackKind.AUDIO else SvcTrackKind.VIDEO
                    events.onRemoteTrack(RemoteTrack(kind, track))
                }
            },
        )
        peers += pc
        reporters += events
        return JvmPeer(pc)
    }

    override fun createLocalTrack(source: SvcTrackSource, screenCapture: Any?): LocalTrack {
        if (source == SvcTrackSource.CAMERA) return generatedCamera()
        if (source != SvcTrackSource.MICROPHONE) throw SvcException("media_device_not_found", "The JVM test engine has no screen")
        // The headless audio device records on its own thread: the track is a real capture path.
        val audioSource = factory.createAudioSource(AudioOptions())
        val track = factory.createAudioTrack("mic-${System.nanoTime()}", audioSource)
        return object : LocalTrack {
            override val source = source
            override val native: Any = track

            // webrtc-java frees a track with its sender's PeerConnection and the factory; disposing it
            // while the closed PeerConnection's sender still holds it is refused.
            override fun dispose() = Unit
        }
    }

    /**
     * A camera without a camera: a CustomVideoSource fed by a thread of ours with generated I420 frames
     * ([VIDEO_WIDTH]×[VIDEO_HEIGHT], [VIDEO_FPS] fps; a bar that moves every frame, so the encoder has
     * real changes to send). Disposing the track stops the thread.
     */
    private fun generatedCamera(): LocalTrack {
        val videoSource = CustomVideoSource()
        val track = factory.createVideoTrack("camera-${System.nanoTime()}", videoSource)
        val feeder = Thread({
            var n = 0
            try {
                while (!Thread.currentThread().isInterrupted) {
                    val buffer = NativeI420Buffer.allocate(VIDEO_WIDTH, VIDEO_HEIGHT)
                    val y = buffer.dataY
                    for (row in 0 until VIDEO_HEIGHT) {
                        for (col in 0 until VIDEO_WIDTH) {
                            y.put(row * buffer.strideY + col, if ((col + n * 4) % VIDEO_WIDTH < 32) 235.toByte() else 16.toByte())
                        }
                    }
                    for (plane in listOf(buffer.dataU, buffer.dataV)) {
                        for (i in 0 until plane.capacity()) plane.put(i, 128.toByte())
                    }
                    val frame = VideoFrame(buffer, System.nanoTime())
                    videoSource.pushFrame(frame)
                    frame.release()
                    n++
                    Thread.sleep(1000L / VIDEO_FPS)
                }
            } catch (_: InterruptedException) {
                // disposed
            }
        }, "jvm-camera").apply { isDaemon = true }
        feeder.start()
        return object : LocalTrack {
            override val source = SvcTrackSource.CAMERA
            override val native: Any = track

            override fun dispose() {
                feeder.interrupt()
                feeder.join(2_000)
            }
        }
    }

    /** The RTP statistics of every PeerConnection of this engine (`inbound-rtp`, `outbound-rtp`…). */
    suspend fun stats(): List<RTCStats> = peers.flatMap { pc ->
        val report = CompletableDeferred<RTCStatsReport>()
        pc.getStats { report.complete(it) }
        report.await().stats.values
    }

    companion object {
        const val VIDEO_WIDTH = 320
        const val VIDEO_HEIGHT = 240
        const val VIDEO_FPS = 15
    }

    override fun close() {
        factory.dispose()
        adm.dispose()
    }

    private class JvmPeer(private val pc: RTCPeerConnection) : MediaPeer {
        override fun addSendOnly(track: LocalTrack) {
            pc.addTransceiver(
                track.native as MediaStreamTrack,
                RTCRtpTransceiverInit().apply {
                    direction = RTCRtpTransceiverDirection.SEND_ONLY
                    streamIds = listOf("svc")
                },
            )
        }

        override suspend fun createOffer(): String {
            val offer = create { pc.createOffer(RTCOfferOptions(), it) }
            set { pc.setLocalDescription(offer, it) }
            return offer.sdp
        }

        override suspend fun acceptAnswer(sdp: String) {
            set { pc.setRemoteDescription(RTCSessionDescription(RTCSdpType.ANSWER, sdp), it) }
        }

        override suspend fun answerOffer(sdp: String): String {
            set { pc.setRemoteDescription(RTCSessionDescription(RTCSdpType.OFFER, sdp), it) }
            val answer = create { pc.createAnswer(RTCAnswerOptions(), it) }
            set { pc.setLocalDescription(answer, it) }
            return answer.sdp
        }

        override fun addIceCandidate(candidate: IceCandidate?) {
            if (candidate == null) return
            pc.addIceCandidate(RTCIceCandidate(candidate.sdpMid ?: "0", candidate.sdpMLineIndex ?: 0, candidate.candidate))
        }

        override fun close() = pc.close()

        private suspend fun create(call: (CreateSessionDescriptionObserver) -> Unit): RTCSessionDescription {
            val result = CompletableDeferred<RTCSessionDescription>()
            call(
                object : CreateSessionDescriptionObserver {
                    override fun onSuccess(description: RTCSessionDescription) {
                        result.complete(description)
                    }

                    override fun onFailure(error: String) {
                        result.completeExceptionally(SvcException("media_failed", error))
                    }
                },
            )
            return result.await()
        }

        private suspend fun set(call: (SetSessionDescriptionObserver) -> Unit) {
            val result = CompletableDeferred<Unit>()
            call(
                object : SetSessionDescriptionObserver {
                    override fun onSuccess() {
                        result.complete(Unit)
                    }

                    override fun onFailure(error: String) {
                        result.completeExceptionally(SvcException("media_invalid_sdp", error))
                    }
                },
            )
            result.await()
        }
    }
}

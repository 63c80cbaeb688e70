package dev.svc.android.internal

import android.content.Context
import android.content.Intent
import android.media.projection.MediaProjection
import dev.svc.android.SvcException
import dev.svc.android.SvcIceServer
import dev.svc.android.SvcTrackKind
import dev.svc.android.SvcTrackSource
import java.util.UUID
import kotlinx.coroutines.CompletableDeferred
import org.webrtc.Camera2Enumerator
import org.webrtc.DataChannel
import org.webrtc.DefaultVideoDecoderFactory
import org.webrtc.DefaultVideoEncoderFactory
import org.webrtc.EglBase
import org.webrtc.IceCandidate as RtcIceCandidate
import org.webrtc.MediaConstraints
import org.webrtc.MediaStream
import org.webrtc.MediaStreamTrack
import org.webrtc.PeerConnection
import org.webrtc.PeerConnectionFactory
import org.webrtc.RtpTransceiver
import org.webrtc.ScreenCapturerAndroid
import org.webrtc.SdpObserver
import org.webrtc.SessionDescription
import org.webrtc.SurfaceTextureHelper
import org.webrtc.VideoCapturer
import org.webrtc.VideoSource

/** The Android engine: `org.webrtc` (LiveKit's libwebrtc build), camera through Camera2, screen through MediaProjection. */
internal class AndroidMediaEngine(context: Context) : MediaEngine {
    private val app: Context = context.applicationContext ?: context
    private val egl: EglBase by lazy { EglBase.create() }
    private val factory: PeerConnectionFactory by lazy {
        PeerConnectionFactory.initialize(PeerConnectionFactory.InitializationOptions.builder(app).createInitializationOptions())
        PeerConnectionFactory.builder()
            .setVideoEncoderFactory(DefaultVideoEncoderFactory(egl.eglBaseContext, true, true))
            .setVideoDecoderFactory(DefaultVideoDecoderFactory(egl.eglBaseContext))
            .createPeerConnectionFactory()
    }

    override fun createPeer(iceServers: List<SvcIceServer>, events: PeerEvents): MediaPeer {
        val servers = iceServers.map { s ->
            PeerConnection.IceServer.builder(s.urls).setUsername(s.username ?: "").setPassword(s.credential ?: "").createIceServer()
        }
        val config = PeerConnection.RTCConfiguration(servers).apply {
            sdpSemantics = PeerConnection.SdpSemantics.UNIFIED_PLAN
            continualGatheringPolicy = PeerConnection.ContinualGatheringPolicy.GATHER_ONCE
        }
        val observer = object : PeerConnection.Observer {
            override fun onSignalingChange(state: PeerConnection.SignalingState) = Unit

            override fun onIceConnectionChange(state: PeerConnection.IceConnectionState) {
                when (state) {
                    PeerConnection.IceConnectionState.CONNECTED -> events.onConnected()
                    PeerConnection.IceConnectionState.FAILED -> events.onFailed()
                    else -> Unit
                }
            }

            override fun onIceConnectionReceivingChange(receiving: Boolean) = Unit

            override fun onIceGatheringChange(state: PeerConnection.IceGatheringState) {
                if (state == PeerConnection.IceGatheringState.COMPLETE) events.onIceCandidate(null)
            }

            override fun onIceCandidate(candidate: RtcIceCandidate) {
                events.onIceCandidate(IceCandidate(candidate.sdp, candidate.sdpMid, candidate.sdpMLineIndex))
            }

            override fun onIceCandidatesRemoved(candidates: Array<out RtcIceCandidate>) = Unit

            override fun onAddStream(stream: MediaStream) = Unit

            override fun onRemoveStream(stream: MediaStream) = Unit

            override fun onDataChannel(channel: DataChannel) = Unit

            override fun onRenegotiationNeeded() = Unit

            override fun onTrack(transceiver: RtpTransceiver) {
                val track = transceiver.receiver.track() ?: return
                val kind = if (track.kind() == MediaStreamTrack.AUDIO_TRACK_KIND) SvcTrackKind.AUDIO else SvcTrackKind.VIDEO
                events.onRemoteTrack(RemoteTrack(kind, track))
            }
        }
        val pc = factory.createPeerConnection(config, observer) ?: throw SvcException("media_failed", "Could not create a PeerConnection")
        return AndroidPeer(pc)
    }

    override fun createLocalTrack(source: SvcTrackSource, screenCapture: Any?): LocalTrack {
        val id = "${source.name.lowercase()}-${UUID.randomUUID()}"
        return when (source) {
            SvcTrackSource.MICROPHONE -> {
                val audioSource = factory.createAudioSource(MediaConstraints())
                val track = factory.createAudioTrack(id, audioSource)
                object : LocalTrack {
                    override val source = source
                    override val native: Any = track

                    override fun dispose() {
                        track.dispose()
                        audioSource.dispose()
                    }
                }
            }

            SvcTrackSource.CAMERA -> {
                val enumerator = Camera2Enumerator(app)
                val name = enumerator.deviceNames.firstOrNull { enumerator.isFrontFacing(it) } ?: enumerator.deviceNames.firstOrNull()
                    ?: throw SvcException("media_device_not_found", "No camera on this device")
                videoTrack(id, source, enumerator.createCapturer(name, null), screencast = false)
            }

            SvcTrackSource.SCREEN -> {
                val data = screenCapture as? Intent
                    ?: throw SvcException("media_not_allowed", "Screen share needs the MediaProjection permission result (an Intent)")
                val capturer = ScreenCapturerAndroid(data, object : MediaProjection.Callback() {})
                videoTrack(id, source, capturer, screencast = true)
            }
        }
    }

    private fun videoTrack(id: String, source: SvcTrackSource, capturer: VideoCapturer, screencast: Boolean): LocalTrack {
        val helper = SurfaceTextureHelper.create("svc-capture-$id", egl.eglBaseContext)
        val videoSource: VideoSource = factory.createVideoSource(screencast)
        capturer.initialize(helper, app, videoSource.capturerObserver)
        capturer.startCapture(CAPTURE_WIDTH, CAPTURE_HEIGHT, CAPTURE_FPS)
        val track = factory.createVideoTrack(id, videoSource)
        return object : LocalTrack {
            override val source = source
            override val native: Any = track

            override fun dispose() {
                capturer.stopCapture()
                capturer.dispose()
                track.dispose()
                videoSource.dispose()
                helper.dispose()
            }
        }
    }

    override fun close() {
        factory.dispose()
        egl.release()
    }

    private class AndroidPeer(private val pc: PeerConnection) : MediaPeer {
        override fun addSendOnly(track: LocalTrack) {
            pc.addTransceiver(
                track.native as MediaStreamTrack,
                RtpTransceiver.RtpTransceiverInit(RtpTransceiver.RtpTransceiverDirection.SEND_ONLY, listOf("svc")),
            )
        }

        override suspend fun createOffer(): String {
            val offer = create { pc.createOffer(it, MediaConstraints()) }
            set { pc.setLocalDescription(it, offer) }
            return offer.description
        }

        override suspend fun acceptAnswer(sdp: String) {
            set { pc.setRemoteDescription(it, SessionDescription(SessionDescription.Type.ANSWER, sdp)) }
        }

        override suspend fun answerOffer(sdp: String): String {
            set { pc.setRemoteDescription(it, SessionDescription(SessionDescription.Type.OFFER, sdp)) }
            val answer = create { pc.createAnswer(it, MediaConstraints()) }
            set { pc.setLocalDescription(it, answer) }
            return answer.description
        }

        override fun addIceCandidate(candidate: IceCandidate?) {
            if (candidate == null) return
            pc.addIceCandidate(RtcIceCandidate(candidate.sdpMid ?: "0", candidate.sdpMLineIndex ?: 0, candidate.candidate))
        }

        override fun close() {
            pc.dispose()
        }

        private suspend fun create(call: (SdpObserver) -> Unit): SessionDescription {
            val result = CompletableDeferred<SessionDescription>()
            call(
                object : SdpObserver {
                    override fun onCreateSuccess(description: SessionDescription) {
                        result.complete(description)
                    }

                    override fun onSetSuccess() = Unit

                    override fun onCreateFailure(error: String) {
                        result.completeExceptionally(SvcException("media_failed", error))
                    }

                    override fun onSetFailure(error: String) = Unit
                },
            )
            return result.await()
        }

        private suspend fun set(call: (SdpObserver) -> Unit) {
            val result = CompletableDeferred<Unit>()
            call(
                object : SdpObserver {
                    override fun onCreateSuccess(description: SessionDescription) = Unit

                    override fun onSetSuccess() {
                        result.complete(Unit)
                    }

                    override fun onCreateFailure(error: String) = Unit

                    override fun onSetFailure(error: String) {
                        result.completeExceptionally(SvcException("media_invalid_sdp", error))
                    }
                },
            )
            result.await()
        }
    }

    private companion object {
        const val CAPTURE_WIDTH = 1280
        const val CAPTURE_HEIGHT = 720
        const val CAPTURE_FPS = 30
    }
}

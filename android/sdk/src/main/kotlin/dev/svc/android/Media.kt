package dev.svc.android

import kotlinx.serialization.SerialName
import kotlinx.serialization.Serializable

/** Where a track comes from: `camera` and `screen` are video, `microphone` is audio. */
@Serializable
public enum class SvcTrackSource {
    /** A camera (video). */
    @SerialName("camera")
    CAMERA,

    /** A microphone (audio). */
    @SerialName("microphone")
    MICROPHONE,

    /** A screen share (video). */
    @SerialName("screen")
    SCREEN,
}

/** A track's media kind. */
@Serializable
public enum class SvcTrackKind {
    /** Sound. */
    @SerialName("audio")
    AUDIO,

    /** Pictures. */
    @SerialName("video")
    VIDEO,
}

/** A published track as every participant sees it. */
@Serializable
public data class SvcTrackInfo(
    /** The track's id (`TR_…`), chosen by the server. */
    val trackId: String,
    /** The publishing participant's session id. */
    val sid: String,
    /** The publisher's user id. */
    val userId: String,
    /** Audio or video. */
    val kind: SvcTrackKind,
    /** Camera, microphone or screen. */
    val source: SvcTrackSource,
    /** True while muted by its publisher or a moderator. */
    val muted: Boolean,
)

/** A STUN/TURN server for the PeerConnections (from the server, in the join snapshot). */
@Serializable
public data class SvcIceServer(
    /** Its URLs, e.g. `stun:stun.example.org:3478`. */
    val urls: List<String>,
    /** The TURN user name (short-lived credentials). */
    val username: String? = null,
    /** The TURN password. */
    val credential: String? = null,
)

/** What this participant may do with media, from the room's liveType and the token. */
@Serializable
public data class SvcMediaPermissions(
    /** The sources this participant may publish (empty: watch only). */
    val canPublishSources: List<SvcTrackSource>,
    /** Whether it may receive others' tracks. */
    val canSubscribe: Boolean,
)

/** Why a track stopped. */
@Serializable
public enum class SvcTrackStopReason {
    /** Its publisher stopped it. */
    UNPUBLISHED,

    /** Its publisher left the room. */
    LEFT,

    /** The media engine restarted; the publisher publishes again (the library does it by itself). */
    ENGINE_RESTARTED,

    /** The publisher's connection to the media server ended. */
    HANGUP,

    /** The publisher's session resumed on another server node; it publishes again from there. */
    MOVED,
}

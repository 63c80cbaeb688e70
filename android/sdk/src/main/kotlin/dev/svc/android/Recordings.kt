package dev.svc.android

import kotlinx.serialization.SerialName
import kotlinx.serialization.Serializable

/** A recording's container format. */
@Serializable
public enum class SvcRecordingFileType {
    /** H.264 video and AAC audio. */
    MP4,

    /** Opus audio only. */
    OGG,

    /** VP8 video and Opus audio. */
    WEBM,
}

/** What a recording makes: one file of the room, or one file per participant. */
@Serializable
public enum class SvcRecordingMode {
    /** One file of the whole room: every camera in a grid, every microphone mixed. */
    @SerialName("room")
    ROOM,

    /** One file per participant (their camera, screen share and microphone). */
    @SerialName("participant")
    PARTICIPANT,
}

/** [SvcClient.startRecord]'s argument. */
@Serializable
public data class SvcStartRecordingOptions(
    /** The room to record. */
    val roomName: String,
    /** Where the server stores the file, relative to its recordings folder; null lets the server choose. */
    val filepath: String? = null,
    /** The container; MP4 by default. */
    val fileType: SvcRecordingFileType = SvcRecordingFileType.MP4,
    /** One file of the room (default) or one per participant; null lets the server use `ROOM`. */
    val mode: SvcRecordingMode? = null,
) {
    init {
        requireRoomName(roomName)
    }
}

/** [SvcClient.listRecordings]'s filters: page from 1 (default 1), limit 1–100 (default 10). */
public data class SvcListRecordingsOptions(
    /** Only recordings in this status (e.g. `COMPLETED`); null for all. */
    val status: String? = null,
    /** The page, from 1. */
    val page: Int = 1,
    /** Items per page, 1–100. */
    val limit: Int = 10,
)

/** A recording (egress) as the server reports it. */
@Serializable
public data class SvcRecordingInfo(
    /** The recording's id. */
    val egressId: String,
    /** The recorded room. */
    val roomName: String,
    /** `STARTED`, `COMPLETED`, `FAILED`… */
    val status: String,
    /** The container. */
    val fileType: SvcRecordingFileType,
    /** Where the file is stored. */
    val filepath: String? = null,
    /** ISO 8601 UTC start time. */
    val startedAt: String? = null,
    /** ISO 8601 UTC end time, once stopped. */
    val endedAt: String? = null,
    /** One file of the room or one per participant (older servers do not say: null). */
    val mode: SvcRecordingMode? = null,
    /** While paused: since when (ISO 8601 UTC). */
    val pausedAt: String? = null,
    /** When the file became ready (COMPLETED). */
    val completedAt: String? = null,
    /** Seconds (COMPLETED; participant mode: the longest file's). */
    val duration: Double? = null,
    /** Bytes (COMPLETED; participant mode: all files together). */
    val size: Long? = null,
    /** The files (COMPLETED): one in room mode, one per participant in participant mode. */
    val files: List<SvcRecordingFile>? = null,
    /** The server stopped while recording and made the file from what was written until then. */
    val recovered: Boolean? = null,
    /** FAILED: the reason code. */
    val error: String? = null,
    /** FAILED: what happened, for people. */
    val errorDetail: String? = null,
)

/** One file of a completed recording. */
@Serializable
public data class SvcRecordingFile(
    /** Where it is stored, relative to the project's recordings folder. */
    val filepath: String,
    /** Participant mode: whose file it is. */
    val userId: String? = null,
    /** Seconds. */
    val duration: Double,
    /** Bytes. */
    val size: Long,
)

/** One page of [SvcClient.listRecordings]. */
@Serializable
public data class SvcRecordingPage(
    /** The recordings of this page. */
    val items: List<SvcRecordingInfo>,
    /** Page information. */
    val meta: SvcPageMeta,
)

/** A signed, expiring address of a recording's file. */
@Serializable
public data class SvcRecordingDownloadUrl(
    /** Open it as is (no API key needed); it supports Range requests. */
    val downloadUrl: String,
    /** Seconds until it expires. */
    val expiresIn: Int,
    /** One signed address per file (participant mode: per participant); empty from older servers. */
    val files: List<SvcRecordingFileUrl> = emptyList(),
)

/** The signed address of one file of a recording. */
@Serializable
public data class SvcRecordingFileUrl(
    /** Where it is stored, relative to the project's recordings folder. */
    val filepath: String,
    /** Participant mode: whose file it is. */
    val userId: String? = null,
    /** Open it as is (no API key needed); it supports Range requests. */
    val downloadUrl: String,
)

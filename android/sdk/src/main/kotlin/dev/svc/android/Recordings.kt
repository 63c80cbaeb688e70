package dev.svc.android

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

/** [SvcClient.startRecord]'s argument. */
@Serializable
public data class SvcStartRecordingOptions(
    /** The room to record. */
    val roomName: String,
    /** Where the server stores the file, relative to its recordings folder; null lets the server choose. */
    val filepath: String? = null,
    /** The container; MP4 by default. */
    val fileType: SvcRecordingFileType = SvcRecordingFileType.MP4,
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
)

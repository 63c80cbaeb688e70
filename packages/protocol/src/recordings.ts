import { type Static, Type } from '@sinclair/typebox';
import { PageMeta, PageQuery, Timestamp } from './common.ts';
import { RoomNameSchema } from './realtime.ts';

/**
 * Recordings (egress) of Realtime rooms: `/v1/realtime/recordings…` (docs/recordings.md). The
 * Android library's `SvcClient` calls these routes with these field names.
 */

/** The container: MP4 (H.264 + AAC), WEBM (VP8 + Opus), OGG (Opus, audio only). */
export const RECORDING_FILE_TYPES = ['MP4', 'WEBM', 'OGG'] as const;
export const RecordingFileTypeSchema = Type.Union(RECORDING_FILE_TYPES.map((t) => Type.Literal(t)));
export type SvcRecordingFileType = (typeof RECORDING_FILE_TYPES)[number];

/**
 * `STARTED` (media is being written), `PROCESSING` (stopped; the file is being made),
 * `COMPLETED` (the file is ready), `FAILED` (see `error`).
 */
export const RECORDING_STATUSES = ['STARTED', 'PROCESSING', 'COMPLETED', 'FAILED'] as const;
export const RecordingStatusSchema = Type.Union(RECORDING_STATUSES.map((s) => Type.Literal(s)));
export type SvcRecordingStatus = (typeof RECORDING_STATUSES)[number];

/**
 * Why a recording FAILED: `no_media` (nothing of the requested kind was published while it
 * ran), `conversion_failed` (janus-pp-rec or ffmpeg failed), `engine_lost` (the server or the
 * media engine died while recording and no media had been written), `upload_failed` (the
 * S3-compatible store refused the file, three times).
 */
export const RECORDING_FAILURE_REASONS = [
  'no_media',
  'conversion_failed',
  'engine_lost',
  'upload_failed',
] as const;
export const RecordingFailureReasonSchema = Type.Union(
  RECORDING_FAILURE_REASONS.map((s) => Type.Literal(s)),
);
export type SvcRecordingFailureReason = (typeof RECORDING_FAILURE_REASONS)[number];

/**
 * `room` (default): one file of the whole room, every camera in a grid, every microphone mixed.
 * `participant`: one file per participant (their camera, screen share and microphone).
 */
export const RECORDING_MODES = ['room', 'participant'] as const;
export const RecordingModeSchema = Type.Union(RECORDING_MODES.map((m) => Type.Literal(m)));
export type SvcRecordingMode = (typeof RECORDING_MODES)[number];

/** Longest `filepath`, in characters. */
export const RECORDING_FILEPATH_MAX = 256;

/** `POST /realtime/recordings`. */
export const SvcStartRecordingOptionsSchema = Type.Object(
  {
    roomName: RoomNameSchema,
    /**
     * Where the file goes, relative to the project's recordings folder: `/`-separated segments
     * of letters, digits, `.`, `_` and `-`, none starting with `.`; the file type's extension is
     * added when missing. Default `<roomName>/<egressId>.<ext>`. In `participant` mode it is
     * the folder of the files (`<filepath>/<userId>.<ext>`), default `<roomName>/<egressId>`.
     */
    filepath: Type.Optional(Type.String({ minLength: 1, maxLength: RECORDING_FILEPATH_MAX })),
    /** Default MP4. */
    fileType: Type.Optional(RecordingFileTypeSchema),
    /** Default `room`. */
    mode: Type.Optional(RecordingModeSchema),
  },
  { additionalProperties: false },
);
export type SvcStartRecordingOptions = Static<typeof SvcStartRecordingOptionsSchema>;

/** One file of a COMPLETED recording. */
export const SvcRecordingFileSchema = Type.Object({
  /** Relative to the project's recordings folder (the key under the prefix in S3). */
  filepath: Type.String(),
  /** `participant` mode: whose file it is. */
  userId: Type.Optional(Type.String()),
  /** Seconds, from `ffprobe`. */
  duration: Type.Number({ minimum: 0 }),
  /** Bytes. */
  size: Type.Integer({ minimum: 0 }),
});
export type SvcRecordingFile = Static<typeof SvcRecordingFileSchema>;

/** A recording as the API reports it. */
export const SvcRecordingInfoSchema = Type.Object({
  /** `eg_…` */
  egressId: Type.String(),
  roomName: Type.String(),
  status: RecordingStatusSchema,
  fileType: RecordingFileTypeSchema,
  mode: RecordingModeSchema,
  /** Relative to the project's recordings folder (`participant` mode: the files' folder). */
  filepath: Type.String(),
  startedAt: Timestamp,
  /** When it was stopped. */
  endedAt: Type.Optional(Timestamp),
  /** When the file became ready (COMPLETED). */
  completedAt: Type.Optional(Timestamp),
  /** While paused: since when (STARTED; the paused time is cut from the file). */
  pausedAt: Type.Optional(Timestamp),
  /** The file's duration in seconds (COMPLETED; `participant` mode: the longest file's). */
  duration: Type.Optional(Type.Number({ minimum: 0 })),
  /** The file's size in bytes (COMPLETED; `participant` mode: all files together). */
  size: Type.Optional(Type.Integer({ minimum: 0 })),
  /** The files (COMPLETED): one in `room` mode, one per participant in `participant` mode. */
  files: Type.Optional(Type.Array(SvcRecordingFileSchema)),
  /**
   * True when the server stopped (or died) while recording and, on its restart, made the file
   * from the media written until then (the file ends there).
   */
  recovered: Type.Optional(Type.Boolean()),
  /** FAILED: the reason code. */
  error: Type.Optional(RecordingFailureReasonSchema),
  /** FAILED: what happened, for people. */
  errorDetail: Type.Optional(Type.String()),
});
export type SvcRecordingInfo = Static<typeof SvcRecordingInfoSchema>;

export const RecordingIdParamsSchema = Type.Object({
  egressId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const ListActiveRecordingsQuerySchema = Type.Object(
  { roomName: Type.Optional(RoomNameSchema) },
  { additionalProperties: false },
);

export const ListRecordingsQuerySchema = Type.Object(
  {
    status: Type.Optional(RecordingStatusSchema),
    roomName: Type.Optional(RoomNameSchema),
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type ListRecordingsQuery = Static<typeof ListRecordingsQuerySchema>;

export const RecordingItemsSchema = Type.Object({ items: Type.Array(SvcRecordingInfoSchema) });

export const RecordingPageSchema = Type.Object({
  items: Type.Array(SvcRecordingInfoSchema),
  meta: PageMeta,
});
export type SvcRecordingPage = Static<typeof RecordingPageSchema>;

/** Bounds of `expiresIn` (seconds) for a download URL. */
export const DOWNLOAD_URL_EXPIRES_MIN = 60;
export const DOWNLOAD_URL_EXPIRES_MAX = 7 * 24 * 3600;
export const DOWNLOAD_URL_EXPIRES_DEFAULT = 3600;

export const DownloadUrlQuerySchema = Type.Object(
  {
    expiresIn: Type.Optional(
      Type.Integer({
        minimum: DOWNLOAD_URL_EXPIRES_MIN,
        maximum: DOWNLOAD_URL_EXPIRES_MAX,
        default: DOWNLOAD_URL_EXPIRES_DEFAULT,
      }),
    ),
  },
  { additionalProperties: false },
);

export const SvcRecordingDownloadUrlSchema = Type.Object({
  /** Absolute, signed; opens without an API key until it expires. The first file's. */
  downloadUrl: Type.String(),
  /** Seconds it stays valid. */
  expiresIn: Type.Integer(),
  /** One signed address per file (`participant` mode: per participant). */
  files: Type.Array(
    Type.Object({
      filepath: Type.String(),
      userId: Type.Optional(Type.String()),
      downloadUrl: Type.String(),
    }),
  ),
});
export type SvcRecordingDownloadUrl = Static<typeof SvcRecordingDownloadUrlSchema>;

/**
 * The signed file address's query: `?exp=<unix seconds>&sig=<base64url HMAC>`, and `file=<n>`
 * (the index in `files`) for the files of a `participant` recording.
 */
export const RecordingFileQuerySchema = Type.Object({
  exp: Type.String({ maxLength: 20 }),
  sig: Type.String({ maxLength: 100 }),
  file: Type.Optional(Type.String({ maxLength: 4 })),
});

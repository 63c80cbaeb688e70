import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  REALTIME_TOKEN_AUDIENCE,
  type SvcRecordingFile,
  type SvcRecordingFileType,
  type SvcRecordingInfo,
  type SvcRecordingMode,
  type SvcRecordingPage,
  type SvcStartRecordingOptions,
} from '@svc/protocol';
import type { AuthContext } from '../auth/gate.ts';
import { iso } from '../clock.ts';
import { ApiError } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { MediaRequestError, type MediaService } from '../media/service.ts';
import { isAdmin } from '../realtime/controller/state.ts';
import type { RealtimeDeps } from '../realtime/deps.ts';
import type { LiveTrack, RoomStore } from '../realtime/room-store.ts';
import type { RoomService } from '../realtime/rooms.ts';
import type { RealtimeRecordingsTable } from '../realtime/tables.ts';
import {
  ConversionError,
  type ConvertTools,
  convertParticipants,
  convertRecording,
  DEFAULT_TOOLS,
  MANIFEST,
} from './convert.ts';
import { RecordingsS3 } from './storage.ts';

const EXT: Record<SvcRecordingFileType, string> = { MP4: 'mp4', WEBM: 'webm', OGG: 'ogg' };
export const CONTENT_TYPE: Record<SvcRecordingFileType, string> = {
  MP4: 'video/mp4',
  WEBM: 'video/webm',
  OGG: 'audio/ogg',
};
/** A conversion that fails this many times ends FAILED. */
const MAX_ATTEMPTS = 3;
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;

/** Who may see which recordings: every one of the project (server keys), or one room's. */
export type RecordingScope = { projectId: string; roomName: string | null };

/** A file as the row keeps it: with its object key when it was uploaded to S3. */
type StoredFile = SvcRecordingFile & { key?: string };

/** The files of a row (a COMPLETED row made before files were listed has its one filepath). */
function storedFiles(r: RealtimeRecordingsTable): StoredFile[] {
  if (r.files) return JSON.parse(r.files) as StoredFile[];
  if (r.status !== 'COMPLETED') return [];
  return [{ filepath: r.filepath, duration: Number(r.duration ?? 0), size: Number(r.size ?? 0) }];
}

/** The files as the API reports them. */
export function filesOf(r: RealtimeRecordingsTable): SvcRecordingFile[] {
  return storedFiles(r).map(({ key: _key, ...f }) => f);
}

export function recordingInfo(r: RealtimeRecordingsTable): SvcRecordingInfo {
  const files = filesOf(r);
  return {
    egressId: r.egress_id,
    roomName: r.room_name,
    status: r.status,
    fileType: r.file_type,
    mode: r.mode ?? 'room',
    filepath: r.filepath,
    startedAt: r.started_at,
    ...(r.ended_at ? { endedAt: r.ended_at } : {}),
    ...(r.completed_at ? { completedAt: r.completed_at } : {}),
    ...(r.paused_at && r.status === 'STARTED' ? { pausedAt: r.paused_at } : {}),
    ...(r.duration !== null ? { duration: Number(r.duration) } : {}),
    ...(r.size !== null ? { size: Number(r.size) } : {}),
    ...(files.length ? { files } : {}),
    ...(Number(r.recovered) ? { recovered: true } : {}),
    ...(r.error ? { error: r.error as SvcRecordingInfo['error'] } : {}),
    ...(r.error_detail ? { errorDetail: r.error_detail } : {}),
  };
}

/**
 * Recordings (egress): the media engine writes every publisher of the room to `.mjr` files
 * under `DATA_DIR/recordings/mjr/<egressId>`; on stop a conversion job (the row itself, status
 * PROCESSING) makes the file under `DATA_DIR/recordings/files/<projectId>/<filepath>`.
 */
export class RecordingService {
  private readonly root: string;
  private readonly urlKeys: Buffer[];
  /** Conversions run one at a time on a node (they are CPU bound). */
  private queue: Promise<void> = Promise.resolve();
  private queued = new Set<string>();
  private waiters = new Map<string, (() => void)[]>();
  private closed = false;
  private overdueTimer: NodeJS.Timeout | null = null;
  tools: ConvertTools = DEFAULT_TOOLS;
  /** The object store files go to (`SVC_RECORDINGS_S3_*`), or null: they stay in DATA_DIR. */
  readonly s3: RecordingsS3 | null;

  constructor(
    private readonly svc: RealtimeDeps,
    private readonly media: MediaService,
    private readonly rooms: RoomService,
    private readonly store: RoomStore,
    /** How long `stop` waits for the file before answering PROCESSING. */
    private readonly stopWaitMs: number,
    private readonly log: { warn(o: object, m: string): void },
  ) {
    this.root = svc.config.media.recordingsDir;
    this.urlKeys = [svc.secret, ...svc.config.secretPrevious]
      .filter(Boolean)
      .map((s) => Buffer.from(hkdfSync('sha256', s, 'svc', 'svc:recordings:download-url', 32)));
    media.onTrackPublished = (rid, track) => this.noteTrack(rid, track);
    // The length limit is checked a few times per limit, at least once a minute.
    const every = Math.min(
      60_000,
      Math.max(1000, (svc.config.media.recordingMaxSeconds * 1000) / 4),
    );
    this.overdueTimer = setInterval(() => {
      this.stopOverdue().catch((err) =>
        this.log.warn({ err }, 'recordings: the length-limit sweep failed'),
      );
    }, every);
    this.overdueTimer.unref();
    const s3 = svc.config.media.recordingsS3;
    this.s3 = s3 ? new RecordingsS3(s3) : null;
  }

  /**
   * Appends a line to the recording's manifest (`tracks.jsonl` in its `.mjr` folder, which every
   * node and Janus host shares): who published which SFU feed, and the pauses.
   */
  private note(mjrDir: string, line: object) {
    fs.appendFileSync(path.join(mjrDir, MANIFEST), `${JSON.stringify(line)}\n`);
  }

  private trackLine(t: LiveTrack) {
    return { feedId: t.feedId, userId: t.userId, source: t.source, kind: t.kind };
  }

  /** A track was published in room `rid`: its recordings note who publishes its feed. */
  private async noteTrack(rid: string, track: LiveTrack) {
    const rows = await this.db
      .selectFrom('realtime_recordings')
      .select('mjr_dir')
      .where('room_id', '=', rid)
      .where('status', '=', 'STARTED')
      .execute();
    for (const r of rows) if (fs.existsSync(r.mjr_dir)) this.note(r.mjr_dir, this.trackLine(track));
  }

  private get db() {
    return this.svc.store.db;
  }

  private iso() {
    return iso(this.svc.clock.now());
  }

  filePath(r: Pick<RealtimeRecordingsTable, 'project_id' | 'filepath'>) {
    return path.join(this.root, 'files', r.project_id, r.filepath);
  }

  /** Wall-clock µs for the manifest (the SFU stamps packets with the same clock). */
  private nowUs() {
    return Date.now() * 1000;
  }

  // ---- Who may call ---------------------------------------------------------------------------

  /**
   * Server keys see every recording of the project. A client key needs `X-Room-Token`: the
   * access token of a host or co-host present in the room; it then sees that room's recordings.
   */
  async scope(
    auth: AuthContext,
    roomToken: string | undefined,
    roomName?: string,
  ): Promise<RecordingScope> {
    if (auth.isServerKey) return { projectId: auth.projectId, roomName: roomName ?? null };
    if (!roomToken) {
      throw new ApiError(
        'server_key_required',
        'Recordings need a server key, or a client key with the access token of a host in the room (X-Room-Token).',
      );
    }
    const result = await this.svc.signingKeys.verify(roomToken, REALTIME_TOKEN_AUDIENCE);
    if (!result.ok)
      throw new ApiError(result.reason === 'expired' ? 'token_expired' : 'token_invalid');
    const p = result.payload as Record<string, unknown>;
    if (p.pid !== auth.projectId || typeof p.room !== 'string' || typeof p.sub !== 'string') {
      throw new ApiError('token_invalid');
    }
    if (roomName !== undefined && roomName !== p.room) throw new ApiError('token_room_mismatch');
    const room = typeof p.rid === 'string' ? await this.store.peek(p.rid) : null;
    const present = room?.participants.some((x) => x.userId === p.sub) ?? false;
    if (!room || !present) {
      throw new ApiError('host_required', 'The access token’s user is not in the room.');
    }
    const admin = room.controller ? isAdmin(room.controller, p.sub) : p.host === true;
    if (!admin)
      throw new ApiError('host_required', 'Only a host or co-host may manage recordings.');
    return { projectId: auth.projectId, roomName: p.room };
  }

  private async row(scope: RecordingScope, egressId: string) {
    const row = await this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('project_id', '=', scope.projectId)
      .where('egress_id', '=', egressId)
      .executeTakeFirst();
    if (!row || (scope.roomName !== null && row.room_name !== scope.roomName)) {
      throw new ApiError('recording_not_found');
    }
    return row;
  }

  // ---- Commands -------------------------------------------------------------------------------

  /**
   * The filepath as stored: checked, with the file type's extension (`participant` mode: the
   * files' folder, no extension).
   */
  private normalisePath(
    raw: string | undefined,
    roomName: string,
    egressId: string,
    type: SvcRecordingFileType,
    mode: SvcRecordingMode,
  ) {
    const ext = mode === 'participant' ? '' : `.${EXT[type]}`;
    if (raw === undefined) return `${roomName}/${egressId}${ext}`;
    const segments = raw.split('/');
    if (!segments.every((s) => SEGMENT.test(s)) || segments.length > 8) {
      throw new ApiError('recording_invalid_filepath');
    }
    return raw.toLowerCase().endsWith(ext) ? raw : `${raw}${ext}`;
  }

  async start(scope: RecordingScope, o: SvcStartRecordingOptions): Promise<SvcRecordingInfo> {
    const projectId = scope.projectId;
    if (scope.roomName !== null && scope.roomName !== o.roomName)
      throw new ApiError('token_room_mismatch');
    const fileType = o.fileType ?? 'MP4';
    const mode = o.mode ?? 'room';
    const egressId = newId('eg', this.svc.clock.now());
    const filepath = this.normalisePath(o.filepath, o.roomName, egressId, fileType, mode);
    const record = await this.rooms.getRecord(projectId, o.roomName);
    if (!record) throw new ApiError('room_not_found');
    if (record.status === 'ENDED') throw new ApiError('room_ended');
    const active = await this.db
      .selectFrom('realtime_recordings')
      .select('egress_id')
      .where('project_id', '=', projectId)
      .where('room_name', '=', o.roomName)
      .where('status', '=', 'STARTED')
      .executeTakeFirst();
    if (active)
      throw new ApiError('recording_in_progress', `Recording ${active.egress_id} is running.`);
    const taken = await this.db
      .selectFrom('realtime_recordings')
      .select('egress_id')
      .where('project_id', '=', projectId)
      .where('filepath', '=', filepath)
      .executeTakeFirst();
    if (taken || fs.existsSync(this.filePath({ project_id: projectId, filepath }))) {
      throw new ApiError('recording_filepath_taken');
    }
    const mjrDir = path.join(this.root, 'mjr', egressId);
    fs.mkdirSync(mjrDir, { recursive: true });
    // The tracks already published; those published later are noted by noteTrack.
    for (const t of (await this.store.peek(record.room_id))?.tracks ?? []) {
      this.note(mjrDir, this.trackLine(t));
    }
    let engine: string;
    try {
      engine = await this.media.startRecording(record.room_id, mjrDir);
    } catch (err) {
      fs.rmSync(mjrDir, { recursive: true, force: true });
      if (err instanceof MediaRequestError) {
        throw new ApiError(err.code === 'not_joined' ? 'room_not_found' : err.code, err.message);
      }
      throw err;
    }
    const row: RealtimeRecordingsTable = {
      egress_id: egressId,
      project_id: projectId,
      room_name: o.roomName,
      room_id: record.room_id,
      status: 'STARTED',
      file_type: fileType,
      filepath,
      mjr_dir: mjrDir,
      engine,
      started_at: this.iso(),
      ended_at: null,
      completed_at: null,
      duration: null,
      size: null,
      error: null,
      error_detail: null,
      attempts: 0,
      mode,
      files: null,
      paused_at: null,
      recovered: 0,
    };
    try {
      await this.db.insertInto('realtime_recordings').values(row).execute();
    } catch (err) {
      await this.media.stopRecording(record.room_id, engine).catch(() => {});
      throw err;
    }
    const info = recordingInfo(row);
    await this.emit(row, 'recording.started', { ...info });
    return info;
  }

  async stop(scope: RecordingScope, egressId: string): Promise<SvcRecordingInfo> {
    const row = await this.row(scope, egressId);
    if (row.status === 'STARTED') await this.finishRecording(row);
    const done = await this.waitDone(egressId, this.stopWaitMs);
    return recordingInfo(done ?? (await this.row(scope, egressId)));
  }

  /** Ends the engine's recording and queues the conversion (status PROCESSING). */
  private async finishRecording(row: RealtimeRecordingsTable) {
    const updated = await this.db
      .updateTable('realtime_recordings')
      .set({ status: 'PROCESSING', ended_at: this.iso() })
      .where('egress_id', '=', row.egress_id)
      .where('status', '=', 'STARTED')
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) return;
    await this.media.stopRecording(row.room_id, row.engine).catch(() => {});
    // The tracks published now (one published while the recording started may have been missed).
    for (const t of (await this.store.peek(row.room_id))?.tracks ?? []) {
      if (fs.existsSync(row.mjr_dir)) this.note(row.mjr_dir, this.trackLine(t));
    }
    this.enqueue(row.egress_id);
  }

  /**
   * Pauses a recording: the SFU stops writing; on resume it writes new `.mjr` files into the same
   * folder, and the conversion cuts the paused time (the manifest has when). Pausing a paused
   * recording only reports it.
   */
  async pause(scope: RecordingScope, egressId: string): Promise<SvcRecordingInfo> {
    const row = await this.row(scope, egressId);
    if (row.status !== 'STARTED') throw new ApiError('recording_not_active');
    if (row.paused_at) return recordingInfo(row);
    const pausedAt = this.iso();
    const updated = await this.db
      .updateTable('realtime_recordings')
      .set({ paused_at: pausedAt })
      .where('egress_id', '=', egressId)
      .where('status', '=', 'STARTED')
      .where('paused_at', 'is', null)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) return this.get(scope, egressId);
    await this.media.stopRecording(row.room_id, row.engine).catch(() => {});
    // Noted once the SFU has stopped writing: the cut is never longer than the gap.
    this.note(row.mjr_dir, { pause: this.nowUs() });
    return recordingInfo({ ...row, paused_at: pausedAt });
  }

  /** Resumes a paused recording (a running one is only reported). */
  async resume(scope: RecordingScope, egressId: string): Promise<SvcRecordingInfo> {
    const row = await this.row(scope, egressId);
    if (row.status !== 'STARTED') throw new ApiError('recording_not_active');
    if (!row.paused_at) return recordingInfo(row);
    // Noted before the SFU writes again: every packet after it is after the pause.
    this.note(row.mjr_dir, { resume: this.nowUs() });
    let engine: string;
    try {
      engine = await this.media.startRecording(row.room_id, row.mjr_dir);
    } catch (err) {
      this.note(row.mjr_dir, { pause: this.nowUs() });
      if (err instanceof MediaRequestError) {
        throw new ApiError(err.code === 'not_joined' ? 'room_not_found' : err.code, err.message);
      }
      throw err;
    }
    await this.db
      .updateTable('realtime_recordings')
      .set({ paused_at: null, engine })
      .where('egress_id', '=', egressId)
      .execute();
    return recordingInfo({ ...row, paused_at: null, engine });
  }

  /** Stops every running recording of a room (the room ended). */
  async stopRoom(projectId: string, roomName: string) {
    const rows = await this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('room_name', '=', roomName)
      .where('status', '=', 'STARTED')
      .execute();
    for (const r of rows) await this.finishRecording(r);
  }

  async get(scope: RecordingScope, egressId: string) {
    return recordingInfo(await this.row(scope, egressId));
  }

  async listActive(scope: RecordingScope, roomName?: string) {
    let q = this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('project_id', '=', scope.projectId)
      .where('status', '=', 'STARTED');
    const room = scope.roomName ?? roomName;
    if (room) q = q.where('room_name', '=', room);
    const rows = await q
      .orderBy('started_at', 'desc')
      .orderBy('egress_id', 'desc')
      .limit(1000)
      .execute();
    return { items: rows.map(recordingInfo) };
  }

  async list(
    scope: RecordingScope,
    status: string | undefined,
    roomName: string | undefined,
    page: number,
    limit: number,
  ): Promise<SvcRecordingPage> {
    let q = this.db.selectFrom('realtime_recordings').where('project_id', '=', scope.projectId);
    const room = scope.roomName ?? roomName;
    if (room) q = q.where('room_name', '=', room);
    if (status) q = q.where('status', '=', status as RealtimeRecordingsTable['status']);
    const total = await q
      .select((eb) => eb.fn.countAll<string | number>().as('n'))
      .executeTakeFirstOrThrow();
    const rows = await q
      .selectAll()
      .orderBy('started_at', 'desc')
      .orderBy('egress_id', 'desc')
      .limit(limit)
      .offset((page - 1) * limit)
      .execute();
    return { items: rows.map(recordingInfo), meta: { total: Number(total.n), page, limit } };
  }

  // ---- Signed download URLs ------------------------------------------------------------------

  /** `file`: the index of a `participant` recording's file (its own message, not the room's). */
  private sign(key: Buffer, egressId: string, exp: number, file?: number) {
    const what = file === undefined ? egressId : `${egressId}/${file}`;
    return createHmac('sha256', key).update(`${what}.${exp}`).digest('base64url');
  }

  async downloadUrl(scope: RecordingScope, egressId: string, expiresIn: number) {
    const row = await this.row(scope, egressId);
    if (row.status !== 'COMPLETED')
      throw new ApiError('recording_not_ready', `The recording is ${row.status}.`);
    const exp = Math.floor(this.svc.clock.now() / 1000) + expiresIn;
    const base = `${this.svc.config.publicUrl}/v1/realtime/recordings/${encodeURIComponent(egressId)}/file`;
    const files = await Promise.all(
      storedFiles(row).map(async (f, i) => {
        let downloadUrl: string;
        if (f.key) {
          // In the object store: its own presigned GET.
          if (!this.s3) {
            throw new ApiError(
              'recording_not_ready',
              'The file is in an object store this server is not configured for (SVC_RECORDINGS_S3_*).',
            );
          }
          downloadUrl = await this.s3.presign(f.key, expiresIn, path.basename(f.filepath));
        } else {
          const index = row.mode === 'participant' ? i : undefined;
          const sig = this.sign(this.urlKeys[0]!, egressId, exp, index);
          downloadUrl = `${base}?exp=${exp}&sig=${sig}${index === undefined ? '' : `&file=${i}`}`;
        }
        return { filepath: f.filepath, ...(f.userId ? { userId: f.userId } : {}), downloadUrl };
      }),
    );
    if (!files.length) throw new ApiError('recording_not_ready', 'The recording has no file.');
    return { downloadUrl: files[0]!.downloadUrl, expiresIn, files };
  }

  /** Checks a signed address; resolves with the recording and the file it opens. */
  async openSigned(egressId: string, exp: string, sig: string, fileParam?: string) {
    const index =
      fileParam === undefined ? undefined : /^\d{1,4}$/.test(fileParam) ? Number(fileParam) : -1;
    const expNum = /^\d{1,12}$/.test(exp) && index !== -1 ? Number(exp) : Number.NaN;
    // Compared as text: base64url has spare bits in its last character, so decoded bytes would
    // let a different-looking signature pass.
    const given = Buffer.from(sig);
    const valid =
      Number.isFinite(expNum) &&
      this.urlKeys.some((k) => {
        const want = Buffer.from(this.sign(k, egressId, expNum, index));
        return want.length === given.length && timingSafeEqual(want, given);
      });
    if (!valid) throw new ApiError('download_url_invalid');
    if (expNum * 1000 <= this.svc.clock.now()) throw new ApiError('download_url_expired');
    const row = await this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('egress_id', '=', egressId)
      .executeTakeFirst();
    if (!row) throw new ApiError('recording_not_found');
    const entry = storedFiles(row)[index ?? 0];
    const file =
      entry && !entry.key
        ? this.filePath({ project_id: row.project_id, filepath: entry.filepath })
        : '';
    if (row.status !== 'COMPLETED' || !entry || !fs.existsSync(file))
      throw new ApiError('recording_not_ready');
    return { row, file };
  }

  // ---- The conversion job --------------------------------------------------------------------

  /** Resolves with the row once it is COMPLETED or FAILED, or null after `timeoutMs`. */
  private async waitDone(egressId: string, timeoutMs: number) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = await this.db
        .selectFrom('realtime_recordings')
        .selectAll()
        .where('egress_id', '=', egressId)
        .executeTakeFirst();
      if (!row || row.status === 'COMPLETED' || row.status === 'FAILED') return row ?? null;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        const list = this.waiters.get(egressId) ?? [];
        list.push(() => {
          clearTimeout(timer);
          resolve();
        });
        this.waiters.set(egressId, list);
      });
    }
  }

  private wake(egressId: string) {
    for (const fn of this.waiters.get(egressId) ?? []) fn();
    this.waiters.delete(egressId);
  }

  private enqueue(egressId: string) {
    if (this.queued.has(egressId) || this.closed) return;
    this.queued.add(egressId);
    this.queue = this.queue
      .then(() => this.convert(egressId))
      .catch((err) => this.log.warn({ err, egressId }, 'recordings: conversion job failed'))
      .finally(() => {
        this.queued.delete(egressId);
        this.wake(egressId);
      });
  }

  private async convert(egressId: string) {
    if (this.closed) return;
    const row = await this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('egress_id', '=', egressId)
      .executeTakeFirst();
    if (row?.status !== 'PROCESSING') return;
    await this.db
      .updateTable('realtime_recordings')
      .set({ attempts: row.attempts + 1 })
      .where('egress_id', '=', egressId)
      .execute();
    try {
      const ms = (d: number) => Math.round(d * 1000) / 1000;
      let files: StoredFile[];
      if (row.mode === 'participant') {
        const made = await convertParticipants(
          this.tools,
          row.mjr_dir,
          row.file_type,
          this.filePath(row),
          EXT[row.file_type],
        );
        files = made.map((f) => ({
          filepath: `${row.filepath}/${f.name}`,
          userId: f.userId,
          duration: ms(f.duration),
          size: f.size,
        }));
      } else {
        const done = await convertRecording(
          this.tools,
          row.mjr_dir,
          row.file_type,
          this.filePath(row),
        );
        files = [{ filepath: row.filepath, duration: ms(done.duration), size: done.size }];
      }
      if (this.s3) await this.upload(row, files);
      const patch = {
        status: 'COMPLETED' as const,
        completed_at: this.iso(),
        duration: Math.max(...files.map((f) => f.duration)),
        size: files.reduce((n, f) => n + f.size, 0),
        files: JSON.stringify(files),
        paused_at: null,
      };
      await this.db
        .updateTable('realtime_recordings')
        .set(patch)
        .where('egress_id', '=', egressId)
        .execute();
      fs.rmSync(row.mjr_dir, { recursive: true, force: true });
      const info = recordingInfo({ ...row, ...patch });
      await this.emit(row, 'recording.completed', { ...info });
    } catch (err) {
      const reason = err instanceof ConversionError ? err.reason : 'conversion_failed';
      const detail = (err as Error).message.slice(0, 500);
      // A conversion or upload that failed is tried again (bounded); having no media is final.
      if (reason !== 'no_media' && row.attempts + 1 < MAX_ATTEMPTS && !this.closed) {
        this.queue = this.queue.then(() => this.convert(egressId));
        return;
      }
      await this.fail(row, reason, detail);
    }
  }

  /** Uploads the made files to the object store, then removes them from DATA_DIR. */
  private async upload(row: RealtimeRecordingsTable, files: StoredFile[]) {
    const s3 = this.s3!;
    for (const f of files) {
      const local = this.filePath({ project_id: row.project_id, filepath: f.filepath });
      f.key = s3.key(row.project_id, f.filepath);
      try {
        await s3.upload(local, f.key, CONTENT_TYPE[row.file_type]);
      } catch (err) {
        throw new ConversionError(
          'upload_failed',
          `S3 ${s3.bucket}/${f.key}: ${(err as Error).name}: ${(err as Error).message}`,
        );
      }
    }
    for (const f of files) {
      fs.rmSync(this.filePath({ project_id: row.project_id, filepath: f.filepath }), {
        force: true,
      });
    }
    if (row.mode === 'participant') fs.rmSync(this.filePath(row), { recursive: true, force: true });
  }

  private async fail(row: RealtimeRecordingsTable, reason: string, detail: string) {
    const patch = {
      status: 'FAILED' as const,
      error: reason,
      error_detail: detail,
      ended_at: row.ended_at ?? this.iso(),
    };
    await this.db
      .updateTable('realtime_recordings')
      .set(patch)
      .where('egress_id', '=', row.egress_id)
      .execute();
    await this.emit(row, 'recording.failed', { ...recordingInfo({ ...row, ...patch }) });
  }

  private async emit(row: RealtimeRecordingsTable, type: string, data: Record<string, unknown>) {
    await this.svc.events.emit({
      projectId: row.project_id,
      type,
      data: { roomId: row.room_id, ...data },
      orderingKey: `room:${row.project_id}:${row.room_name}`,
      occurredAtMs: this.svc.clock.now(),
    });
  }

  /**
   * After a restart: a recording this server's embedded engine was writing when the node died
   * (still STARTED) is converted from the `.mjr` files written so far (FAILED `engine_lost`
   * when there are none); conversions left PROCESSING are run again.
   */
  async recover() {
    const rows = await this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('status', 'in', ['STARTED', 'PROCESSING'])
      .where('engine', '=', 'embedded')
      .execute();
    for (const r of rows) {
      if (r.status === 'STARTED') {
        const hasMedia =
          fs.existsSync(r.mjr_dir) && fs.readdirSync(r.mjr_dir).some((f) => f.endsWith('.mjr'));
        if (!hasMedia) {
          await this.fail(
            r,
            'engine_lost',
            'The server stopped while recording, before any media was written.',
          );
          continue;
        }
        await this.db
          .updateTable('realtime_recordings')
          .set({ status: 'PROCESSING', ended_at: this.iso(), recovered: 1 })
          .where('egress_id', '=', r.egress_id)
          .execute();
      }
      this.enqueue(r.egress_id);
    }
  }

  /**
   * Stops the recordings that have run longer than `SVC_RECORDING_MAX_SECONDS` (started more than
   * that long ago and still running or paused), as a stop request would. Every node sweeps;
   * finishing is a conditional update, so one node does each. Resolves with how many it stopped.
   */
  async stopOverdue(): Promise<number> {
    const maxMs = this.svc.config.media.recordingMaxSeconds * 1000;
    const rows = await this.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('status', '=', 'STARTED')
      .where('started_at', '<=', iso(this.svc.clock.now() - maxMs))
      .execute();
    for (const r of rows) {
      this.log.warn(
        { egressId: r.egress_id, maxSeconds: maxMs / 1000 },
        'recordings: stopped at SVC_RECORDING_MAX_SECONDS',
      );
      await this.finishRecording(r);
    }
    return rows.length;
  }

  async close() {
    this.closed = true;
    if (this.overdueTimer) clearInterval(this.overdueTimer);
    await this.queue.catch(() => {});
    this.s3?.close();
  }
}

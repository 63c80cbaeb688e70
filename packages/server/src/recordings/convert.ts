import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { SvcRecordingFileType, SvcTrackSource } from '@svc/protocol';

/** A failure with the reason code the recording ends FAILED with. */
export class ConversionError extends Error {
  constructor(
    readonly reason: 'no_media' | 'conversion_failed' | 'upload_failed',
    message: string,
  ) {
    super(message);
  }
}

/** The programs a conversion runs (Debian `janus-tools` and `ffmpeg`); overridable for tests. */
export interface ConvertTools {
  ppRec: string;
  ffmpeg: string;
  ffprobe: string;
}

export const DEFAULT_TOOLS: ConvertTools = {
  ppRec: process.env.SVC_JANUS_PP_REC || 'janus-pp-rec',
  ffmpeg: process.env.SVC_FFMPEG || 'ffmpeg',
  ffprobe: process.env.SVC_FFPROBE || 'ffprobe',
};

function run(cmd: string, args: string[], timeoutMs = 6 * 3600_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { maxBuffer: 16 * 1024 * 1024, timeout: timeoutMs },
      (err, stdout, stderr) => {
        if (err) {
          const tail = String(stderr).trim().split('\n').slice(-3).join(' | ');
          reject(
            new ConversionError(
              'conversion_failed',
              `${path.basename(cmd)}: ${tail || err.message}`,
            ),
          );
        } else resolve(String(stdout));
      },
    );
  });
}

/** Who published a feed, from the recording's manifest (`tracks.jsonl`). */
export interface FeedInfo {
  userId: string;
  source: SvcTrackSource;
}

/** The recording's manifest: who published each feed, and the pauses (µs since the epoch). */
export interface Manifest {
  feeds: Map<number, FeedInfo>;
  pauses: [number, number][];
}

export const MANIFEST = 'tracks.jsonl';

/**
 * Reads `tracks.jsonl` of a `.mjr` folder: one JSON object a line, `{feedId, userId, source}`
 * for each track published while recording, `{pause: µs}` / `{resume: µs}` for pauses. A pause
 * without its resume lasts until the end. Lines that do not parse are skipped.
 */
export function readManifest(dir: string): Manifest {
  const feeds = new Map<number, FeedInfo>();
  const pauses: [number, number][] = [];
  const file = path.join(dir, MANIFEST);
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  let open: number | null = null;
  for (const line of text.split('\n')) {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof o.feedId === 'number' && typeof o.userId === 'string') {
      feeds.set(o.feedId, { userId: o.userId, source: String(o.source) as SvcTrackSource });
    } else if (typeof o.pause === 'number') {
      open ??= o.pause;
    } else if (typeof o.resume === 'number' && open !== null) {
      pauses.push([open, o.resume]);
      open = null;
    }
  }
  if (open !== null) pauses.push([open, Number.MAX_SAFE_INTEGER]);
  return { feeds, pauses };
}

/** One `.mjr` file Janus wrote: one track of one publisher (feed), depacketised. */
export interface Track {
  file: string;
  kind: 'audio' | 'video';
  codec: string;
  feedId: number;
  /** Who published it (`feed-<id>` when the manifest does not say). */
  userId: string;
  source: string;
  /** First packet's time (µs since the epoch). */
  firstUs: number;
  /** The depacketised file, and its length in seconds (0 until `measure`). */
  out: string;
  seconds: number;
}

/** `videoroom-<room>-user-<feed>-<µs>-<audio|video>-<mid>.mjr` */
const MJR_NAME = /-user-(\d+)-\d+-(?:audio|video)-/;

/**
 * The JSON header of a `.mjr` (`MJR00002`, 2-byte big-endian length, JSON), read directly;
 * `janus-pp-rec -j` for any other layout.
 */
async function mjrHeader(tools: ConvertTools, file: string): Promise<Record<string, unknown>> {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(4096);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    if (n >= 10 && head.toString('latin1', 0, 8) === 'MJR00002') {
      const len = head.readUInt16BE(8);
      if (10 + len <= n) return JSON.parse(head.toString('utf8', 10, 10 + len));
    }
  } finally {
    fs.closeSync(fd);
  }
  return JSON.parse(await run(tools.ppRec, ['-j', file], 60_000));
}

/**
 * Reads and depacketises the `.mjr` files of `dir` (those without usable media are skipped;
 * `audioOnly`: video files are not even depacketised). A track's length (`seconds`) is probed
 * only when `lengths` is set (the composition needs it); otherwise it is 0.
 */
export async function scanTracks(
  tools: ConvertTools,
  dir: string,
  work: string,
  manifest: Manifest,
  audioOnly = false,
): Promise<Track[]> {
  const files = fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.mjr'))
        .sort()
    : [];
  const one = async (f: string, i: number): Promise<Track | null> => {
    const file = path.join(dir, f);
    // A file Janus opened but never wrote a packet to has only its header (or less).
    if (fs.statSync(file).size < 64) return null;
    let header: Record<string, unknown>;
    try {
      header = await mjrHeader(tools, file);
    } catch {
      return null;
    }
    const kind = header.t === 'a' ? 'audio' : header.t === 'v' ? 'video' : null;
    const codec = String(header.c ?? '');
    if (!kind || (audioOnly && kind === 'video')) return null;
    // No first packet time: Janus never wrote a packet to it.
    if (header.u === undefined && header.s === undefined) return null;
    if (kind === 'audio' && codec !== 'opus') return null;
    if (kind === 'video' && !['vp8', 'vp9', 'h264'].includes(codec)) return null;
    const ext = kind === 'audio' ? 'opus' : codec === 'h264' ? 'mp4' : 'webm';
    const out = path.join(work, `t${i}.${ext}`);
    try {
      await run(tools.ppRec, [file, out]);
    } catch {
      return null;
    }
    if (!fs.existsSync(out) || fs.statSync(out).size === 0) return null;
    const feedId = Number(MJR_NAME.exec(f)?.[1] ?? -1);
    const who = manifest.feeds.get(feedId);
    return {
      file,
      kind,
      codec,
      feedId,
      userId: who?.userId ?? `feed-${feedId}`,
      source: who?.source ?? (kind === 'audio' ? 'microphone' : 'camera'),
      firstUs: Number(header.u ?? header.s ?? 0),
      out,
      seconds: 0,
    };
  };
  // Two at a time: janus-pp-rec and ffprobe are short, and the machine has other work.
  const tracks: (Track | null)[] = [];
  for (let i = 0; i < files.length; i += 2) {
    tracks.push(...(await Promise.all(files.slice(i, i + 2).map((f, j) => one(f, i + j)))));
  }
  return tracks.filter((t): t is Track => t !== null);
}

/** Probes each track's length (`seconds`; 0 when it has none or cannot be read). */
async function measure(tools: ConvertTools, tracks: Track[]) {
  for (let i = 0; i < tracks.length; i += 2) {
    await Promise.all(
      tracks.slice(i, i + 2).map(async (t) => {
        t.seconds = await probe(tools, t.out).then(
          (p) => p.duration || 0,
          () => 0,
        );
      }),
    );
  }
}

/** What a finished conversion produced. */
export interface Converted {
  duration: number;
  size: number;
}

/** The container's duration and size, by ffprobe. */
export async function probe(tools: ConvertTools, file: string) {
  const out = JSON.parse(
    await run(
      tools.ffprobe,
      ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file],
      60_000,
    ),
  ) as {
    format: { duration?: string; size?: string };
    streams: {
      codec_type: string;
      codec_name: string;
      duration?: string;
      width?: number;
      height?: number;
    }[];
  };
  return {
    duration: Number(out.format.duration ?? 0),
    size: Number(out.format.size ?? fs.statSync(file).size),
    streams: out.streams,
  };
}

/** The composed picture of a room with several videos. */
export const CANVAS = { width: 1280, height: 720, fps: 24 };

interface Tile {
  x: number;
  y: number;
  w: number;
  h: number;
}

const even = (n: number) => Math.max(2, Math.floor(n / 2) * 2);

/**
 * Where each video goes while `keys` are on (in order of first appearance): a screen share
 * takes the main tile (left, three quarters of the width) and the others stack on the right;
 * otherwise a grid of `ceil(√n)` columns, its last row centred.
 */
export function layout(keys: { key: string; screen: boolean }[]): Map<string, Tile> {
  const { width: W, height: H } = CANVAS;
  const out = new Map<string, Tile>();
  const screen = [...keys].reverse().find((k) => k.screen);
  if (screen) {
    const others = keys.filter((k) => k !== screen);
    const mainW = others.length ? even((W * 3) / 4) : W;
    out.set(screen.key, { x: 0, y: 0, w: mainW, h: H });
    const sideW = W - mainW;
    const h = even(Math.min(H / Math.max(1, others.length), (sideW * 9) / 16));
    for (const [i, k] of others.entries()) out.set(k.key, { x: mainW, y: i * h, w: sideW, h });
    return out;
  }
  const n = keys.length;
  const cols = Math.ceil(Math.sqrt(n));
  const rows = Math.ceil(n / cols);
  const w = even(W / cols);
  const h = even(H / rows);
  for (const [i, k] of keys.entries()) {
    const row = Math.floor(i / cols);
    const inRow = row === rows - 1 ? n - row * cols : cols;
    const left = Math.floor((W - inRow * w) / 2);
    out.set(k.key, { x: left + (i % cols) * w, y: row * h, w, h });
  }
  return out;
}

/** A track placed on the output timeline (seconds from the output's start). */
interface Placed extends Track {
  start: number;
  end: number;
  input: number;
}

/**
 * Makes one file of `fileType` at `target` from `tracks`, each at its real start offset (its
 * first packet time, minus the pauses before it, so paused time is cut). Video: one video track
 * is copied when the container takes its codec (VP8/VP9 into WEBM, H.264 into MP4) and
 * transcoded otherwise; several are composed on a 1280×720 canvas (`layout`) that follows
 * them coming and going. Audio: one microphone is copied where the container allows; several
 * are mixed (`amix`). OGG is audio only. Written next to `target`, renamed when complete.
 */
export async function convertTracks(
  tools: ConvertTools,
  tracks: Track[],
  fileType: SvcRecordingFileType,
  target: string,
  pauses: [number, number][] = [],
): Promise<Converted> {
  const audio = tracks.filter((t) => t.kind === 'audio');
  const videos = fileType === 'OGG' ? [] : tracks.filter((t) => t.kind === 'video');
  // Lengths are needed to lay out several videos (when each ends); one ffprobe per track.
  if (videos.length > 1) await measure(tools, [...videos, ...audio]);
  const used = [...videos, ...audio].filter((t) => videos.length <= 1 || t.seconds > 0);
  if (used.length === 0) {
    throw new ConversionError(
      'no_media',
      fileType === 'OGG'
        ? 'No microphone was published while recording.'
        : 'Nothing was published while recording.',
    );
  }
  /** Wall-clock µs → µs of recorded time (paused spans removed). */
  const recorded = (us: number) =>
    us -
    pauses.reduce((cut, [a, b]) => cut + (b <= us ? b - a : a < us ? Math.min(b, us) - a : 0), 0);
  const t0 = Math.min(...used.map((t) => recorded(t.firstUs)));
  const placed: Placed[] = used.map((t, input) => {
    const start = Math.max(0, (recorded(t.firstUs) - t0) / 1e6);
    return { ...t, start, end: start + t.seconds, input };
  });
  const total = Math.max(...placed.map((t) => t.end));
  const vids = placed.filter((t) => t.kind === 'video');
  const auds = placed.filter((t) => t.kind === 'audio');
  const args = ['-y', '-v', 'error'];
  for (const t of placed) {
    if (t.start > 0.001) args.push('-itsoffset', t.start.toFixed(3));
    args.push('-i', t.out);
  }
  const filters: string[] = [];
  const composed = vids.length > 1;
  if (composed) filters.push(...compose(vids, total));
  else if (vids.length === 1) args.push('-map', `${vids[0]!.input}:v:0`);
  const mixed = auds.length > 1;
  if (mixed) {
    for (const a of auds)
      filters.push(`[${a.input}:a:0]aresample=async=1:first_pts=0[a${a.input}]`);
    filters.push(
      `${auds.map((a) => `[a${a.input}]`).join('')}amix=inputs=${auds.length}:duration=longest:dropout_transition=0:normalize=0[aout]`,
    );
  }
  if (filters.length) args.push('-filter_complex', filters.join(';'));
  if (composed) args.push('-map', '[vout]');
  if (mixed) args.push('-map', '[aout]');
  else if (auds.length === 1) args.push('-map', `${auds[0]!.input}:a:0`);
  const v = vids[0];
  const x264 = ['-c:v', 'libx264', '-preset', 'superfast', '-crf', '23', '-pix_fmt', 'yuv420p'];
  const vp8 = ['-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '1500k'];
  if (fileType === 'MP4') {
    if (v) args.push(...(!composed && v.codec === 'h264' ? ['-c:v', 'copy'] : x264));
    if (auds.length) args.push('-c:a', 'aac', '-b:a', '96k');
    args.push('-movflags', '+faststart', '-f', 'mp4');
  } else if (fileType === 'WEBM') {
    if (v) args.push(...(!composed && v.codec !== 'h264' ? ['-c:v', 'copy'] : vp8));
    if (auds.length) args.push(...(mixed ? ['-c:a', 'libopus', '-b:a', '64k'] : ['-c:a', 'copy']));
    args.push('-f', 'webm');
  } else {
    args.push(...(mixed ? ['-c:a', 'libopus', '-b:a', '64k'] : ['-c:a', 'copy']), '-f', 'ogg');
  }
  if (composed) args.push('-threads', '2');
  fs.mkdirSync(path.dirname(target), { recursive: true });
  const partial = `${target}.partial`;
  args.push(partial);
  await run(tools.ffmpeg, args);
  const probed = await probe(tools, partial);
  fs.renameSync(partial, target);
  return { duration: probed.duration, size: probed.size };
}

/**
 * The filter graph composing several videos on the canvas: a black base as long as the
 * recording, and for each span in which the same videos are on, each of them trimmed to the
 * span, scaled into its tile (aspect kept) and overlaid there. Output label `[vout]`.
 */
function compose(vids: Placed[], total: number): string[] {
  const { width, height, fps } = CANVAS;
  const keyOf = (t: Placed) => `${t.userId}\u0000${t.source}`;
  const order = [...new Set([...vids].sort((a, b) => a.start - b.start).map(keyOf))];
  const cuts = [...new Set([0, total, ...vids.flatMap((t) => [t.start, t.end])])]
    .filter((c) => c >= 0 && c <= total)
    .sort((a, b) => a - b);
  const pieces = new Map<Placed, { a: number; b: number; tile: Tile }[]>();
  for (let i = 0; i + 1 < cuts.length; i++) {
    const a = cuts[i]!;
    const b = cuts[i + 1]!;
    if (b - a < 0.01) continue;
    const on = vids.filter((t) => t.start <= a + 0.005 && t.end >= b - 0.005);
    if (!on.length) continue;
    // One tile per person and source (a track that restarted keeps its place).
    const keys = order
      .filter((k) => on.some((t) => keyOf(t) === k))
      .map((k) => ({ key: k, screen: on.some((t) => keyOf(t) === k && t.source === 'screen') }));
    const tiles = layout(keys);
    for (const t of on) {
      const tile = tiles.get(keyOf(t))!;
      // Two tracks of the same key at once (a republish overlapping): the later one shows.
      const list = pieces.get(t) ?? [];
      list.push({ a, b, tile });
      pieces.set(t, list);
    }
  }
  const f: string[] = [
    `color=c=black:s=${width}x${height}:r=${fps}:d=${total.toFixed(3)},format=yuv420p[base0]`,
  ];
  let base = 'base0';
  let n = 0;
  for (const [t, list] of pieces) {
    const labels = list.map((_, j) => `v${t.input}_${j}`);
    f.push(
      `[${t.input}:v:0]fps=${fps},split=${list.length}${labels.map((l) => `[${l}]`).join('')}`,
    );
    list.forEach(({ a, b, tile }, j) => {
      const piece = `p${t.input}_${j}`;
      f.push(
        `[${labels[j]}]trim=start=${a.toFixed(3)}:end=${b.toFixed(3)},scale=${tile.w}:${tile.h}:force_original_aspect_ratio=decrease:force_divisible_by=2,setsar=1[${piece}]`,
      );
      const next = `base${++n}`;
      f.push(
        `[${base}][${piece}]overlay=x=${tile.x}+(${tile.w}-overlay_w)/2:y=${tile.y}+(${tile.h}-overlay_h)/2:eof_action=pass:enable='between(t,${a.toFixed(3)},${b.toFixed(3)})'[${next}]`,
      );
      base = next;
    });
  }
  f.push(`[${base}]null[vout]`);
  return f;
}

/** Room mode: every track of the recording in one file. */
export async function convertRecording(
  tools: ConvertTools,
  mjrDir: string,
  fileType: SvcRecordingFileType,
  target: string,
): Promise<Converted> {
  const work = fs.mkdtempSync(path.join(path.dirname(mjrDir), `.work-${path.basename(mjrDir)}-`));
  try {
    const manifest = readManifest(mjrDir);
    const tracks = await scanTracks(tools, mjrDir, work, manifest, fileType === 'OGG');
    return await convertTracks(tools, tracks, fileType, target, manifest.pauses);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** One participant's file (participant mode). */
export interface ParticipantFile extends Converted {
  userId: string;
  /** The file's name in the recording's folder. */
  name: string;
}

/** A file name for a user id: its letters, digits, `.`, `_`, `-` (others become `_`). */
export function fileNameOf(userId: string, taken: Set<string>) {
  let base =
    userId
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .replace(/^\.+/, '_')
      .slice(0, 100) || 'user';
  if (taken.has(base.toLowerCase())) {
    let i = 2;
    while (taken.has(`${base}-${i}`.toLowerCase())) i++;
    base = `${base}-${i}`;
  }
  taken.add(base.toLowerCase());
  return base;
}

/**
 * Participant mode: one file per participant under `targetDir` (`<userId>.<ext>`), each with
 * that participant's tracks from their own first packet. A participant without a track of
 * the needed kind (OGG: a microphone) has no file; no file at all is `no_media`.
 */
export async function convertParticipants(
  tools: ConvertTools,
  mjrDir: string,
  fileType: SvcRecordingFileType,
  targetDir: string,
  ext: string,
): Promise<ParticipantFile[]> {
  const work = fs.mkdtempSync(path.join(path.dirname(mjrDir), `.work-${path.basename(mjrDir)}-`));
  try {
    const manifest = readManifest(mjrDir);
    const tracks = await scanTracks(tools, mjrDir, work, manifest, fileType === 'OGG');
    const users = [...new Set(tracks.map((t) => t.userId))].sort();
    const taken = new Set<string>();
    const files: ParticipantFile[] = [];
    for (const userId of users) {
      const mine = tracks.filter(
        (t) => t.userId === userId && (fileType !== 'OGG' || t.kind === 'audio'),
      );
      if (!mine.length) continue;
      const name = `${fileNameOf(userId, taken)}.${ext}`;
      const done = await convertTracks(
        tools,
        mine,
        fileType,
        path.join(targetDir, name),
        manifest.pauses,
      );
      files.push({ userId, name, ...done });
    }
    if (!files.length) {
      throw new ConversionError(
        'no_media',
        fileType === 'OGG'
          ? 'No microphone was published while recording.'
          : 'Nothing was published while recording.',
      );
    }
    return files;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

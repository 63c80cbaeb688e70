import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { SvcRecordingFileType } from '@svc/protocol';

/** A failure with the reason code the recording ends FAILED with. */
export class ConversionError extends Error {
  constructor(
    readonly reason: 'no_media' | 'conversion_failed',
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

/** One `.mjr` file Janus wrote: one track of one publisher. */
interface Track {
  file: string;
  kind: 'audio' | 'video';
  codec: string;
  /** First packet's time (µs since the epoch). */
  firstUs: number;
  /** The depacketised file. */
  out: string;
}

/** Reads the header of each `.mjr` of `dir` (files without media are skipped). */
async function tracksOf(tools: ConvertTools, dir: string, work: string): Promise<Track[]> {
  const files = fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.mjr'))
        .sort()
    : [];
  const tracks: Track[] = [];
  for (const [i, f] of files.entries()) {
    const file = path.join(dir, f);
    // A file Janus opened but never wrote a packet to has only its header (or less).
    if (fs.statSync(file).size < 64) continue;
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(await run(tools.ppRec, ['-j', file], 60_000));
    } catch {
      continue;
    }
    const kind = header.t === 'a' ? 'audio' : header.t === 'v' ? 'video' : null;
    const codec = String(header.c ?? '');
    if (!kind) continue;
    const ext = kind === 'audio' ? 'opus' : codec === 'h264' ? 'mp4' : 'webm';
    if (kind === 'audio' && codec !== 'opus') continue;
    if (kind === 'video' && !['vp8', 'vp9', 'h264'].includes(codec)) continue;
    const firstUs = Number(header.u ?? header.s ?? 0);
    tracks.push({ file, kind, codec, firstUs, out: path.join(work, `t${i}.${ext}`) });
  }
  return tracks;
}

/** One tile of a grid (several video tracks). */
const TILE_W = 640;
const TILE_H = 360;

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
    streams: { codec_type: string; codec_name: string; duration?: string }[];
  };
  return {
    duration: Number(out.format.duration ?? 0),
    size: Number(out.format.size ?? fs.statSync(file).size),
    streams: out.streams,
  };
}

/**
 * Turns the `.mjr` files of one recording into one file of `fileType` at `target`:
 * `janus-pp-rec` depacketises each track, then `ffmpeg` puts them together with each track's
 * real start offset (from its first packet). Video: one track is copied when the container
 * takes its codec (VP8/VP9 into WEBM, H.264 into MP4) and transcoded otherwise (libx264
 * `veryfast` for MP4, libvpx realtime for WEBM); several tracks make a grid (`xstack`, 640x360
 * tiles, black until a track starts). Audio: every microphone, mixed (`amix`) when there are
 * several. OGG is audio only. The file is written next to `target` and renamed into place when complete.
 */
export async function convertRecording(
  tools: ConvertTools,
  mjrDir: string,
  fileType: SvcRecordingFileType,
  target: string,
): Promise<Converted> {
  const work = fs.mkdtempSync(path.join(path.dirname(mjrDir), `.work-${path.basename(mjrDir)}-`));
  try {
    const all = await tracksOf(tools, mjrDir, work);
    for (const t of all) {
      try {
        await run(tools.ppRec, [t.file, t.out]);
      } catch {
        t.out = '';
      }
    }
    const made = all.filter((t) => t.out && fs.existsSync(t.out) && fs.statSync(t.out).size > 0);
    const audio = made.filter((t) => t.kind === 'audio');
    const videos = made.filter((t) => t.kind === 'video');
    // OGG is audio only; otherwise every video track (a camera or a screen) gets a tile.
    const shown = fileType === 'OGG' ? [] : videos;
    const grid = shown.length > 1;
    const used = [...shown, ...audio];
    if (used.length === 0) {
      throw new ConversionError(
        'no_media',
        fileType === 'OGG'
          ? 'No microphone was published while recording.'
          : 'Nothing was published while recording.',
      );
    }
    const t0 = Math.min(...used.map((t) => t.firstUs));
    const offsetOf = (t: Track) => Math.max(0, (t.firstUs - t0) / 1e6);
    const args = ['-y', '-v', 'error'];
    for (const t of used) {
      // Grid tiles are delayed by their filter (black until the track starts).
      const offset = offsetOf(t);
      if (offset > 0.001 && !(grid && t.kind === 'video'))
        args.push('-itsoffset', offset.toFixed(3));
      args.push('-i', t.out);
    }
    const filters: string[] = [];
    if (grid) {
      const cols = Math.ceil(Math.sqrt(shown.length));
      const layout: string[] = [];
      shown.forEach((t, i) => {
        filters.push(
          `[${i}:v:0]setpts=PTS-STARTPTS,scale=${TILE_W}:${TILE_H}:force_original_aspect_ratio=decrease,` +
            `pad=${TILE_W}:${TILE_H}:(ow-iw)/2:(oh-ih)/2,fps=25,` +
            `tpad=start_duration=${offsetOf(t).toFixed(3)}:color=black[v${i}]`,
        );
        layout.push(`${(i % cols) * TILE_W}_${Math.floor(i / cols) * TILE_H}`);
      });
      filters.push(
        `${shown.map((_, i) => `[v${i}]`).join('')}xstack=inputs=${shown.length}:layout=${layout.join('|')}:fill=black[vout]`,
      );
    }
    const audioStart = shown.length;
    if (audio.length > 1) {
      const inputs = audio.map((_, i) => `[${audioStart + i}:a:0]`).join('');
      filters.push(`${inputs}amix=inputs=${audio.length}:duration=longest:normalize=0[aout]`);
    }
    if (filters.length) args.push('-filter_complex', filters.join(';'));
    if (grid) args.push('-map', '[vout]');
    else if (shown.length === 1) args.push('-map', '0:v:0');
    if (audio.length > 1) args.push('-map', '[aout]');
    else if (audio.length === 1) args.push('-map', `${audioStart}:a:0`);
    const mixed = audio.length > 1;
    const codec = grid ? 'raw' : shown[0]?.codec;
    if (fileType === 'MP4') {
      if (shown.length) {
        args.push(
          ...(codec === 'h264'
            ? ['-c:v', 'copy']
            : ['-c:v', 'libx264', '-preset', 'veryfast', '-crf', '23', '-pix_fmt', 'yuv420p']),
        );
      }
      if (audio.length) args.push('-c:a', 'aac', '-b:a', '96k');
      args.push('-movflags', '+faststart', '-f', 'mp4');
    } else if (fileType === 'WEBM') {
      if (shown.length) {
        args.push(
          ...(codec === 'vp8' || codec === 'vp9'
            ? ['-c:v', 'copy']
            : ['-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '1M']),
        );
      }
      if (audio.length)
        args.push(...(mixed ? ['-c:a', 'libopus', '-b:a', '64k'] : ['-c:a', 'copy']));
      args.push('-f', 'webm');
    } else {
      args.push(...(mixed ? ['-c:a', 'libopus', '-b:a', '64k'] : ['-c:a', 'copy']), '-f', 'ogg');
    }
    fs.mkdirSync(path.dirname(target), { recursive: true });
    const partial = `${target}.partial`;
    args.push(partial);
    await run(tools.ffmpeg, args);
    const probed = await probe(tools, partial);
    fs.renameSync(partial, target);
    return { duration: probed.duration, size: probed.size };
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

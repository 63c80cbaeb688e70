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
 * real start offset (from its first packet). Video: the longest-running camera/screen track
 * (VP8/VP9 copied into WEBM, H.264 copied into MP4, otherwise transcoded: MP4 gets H.264 by
 * libx264 `veryfast`); audio: every microphone, mixed (`amix`) when there are several. OGG is
 * audio only. The file is written next to `target` and renamed into place when complete.
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
    const video =
      fileType === 'OGG'
        ? undefined
        : videos.sort((a, b) => fs.statSync(b.out).size - fs.statSync(a.out).size)[0];
    const used = [...(video ? [video] : []), ...audio];
    if (used.length === 0) {
      throw new ConversionError(
        'no_media',
        fileType === 'OGG'
          ? 'No microphone was published while recording.'
          : 'Nothing was published while recording.',
      );
    }
    const t0 = Math.min(...used.map((t) => t.firstUs));
    const args = ['-y', '-v', 'error'];
    for (const t of used) {
      const offset = Math.max(0, (t.firstUs - t0) / 1e6);
      if (offset > 0.001) args.push('-itsoffset', offset.toFixed(3));
      args.push('-i', t.out);
    }
    const audioStart = video ? 1 : 0;
    if (video) args.push('-map', '0:v:0');
    if (audio.length > 1) {
      const inputs = audio.map((_, i) => `[${audioStart + i}:a:0]`).join('');
      args.push(
        '-filter_complex',
        `${inputs}amix=inputs=${audio.length}:duration=longest:normalize=0[aout]`,
        '-map',
        '[aout]',
      );
    } else if (audio.length === 1) {
      args.push('-map', `${audioStart}:a:0`);
    }
    const mixed = audio.length > 1;
    if (fileType === 'MP4') {
      if (video) {
        args.push(
          ...(video.codec === 'h264'
            ? ['-c:v', 'copy']
            : ['-c:v', 'libx264', '-preset', 'veryfast', '-crf', '23', '-pix_fmt', 'yuv420p']),
        );
      }
      if (audio.length) args.push('-c:a', 'aac', '-b:a', '96k');
      args.push('-movflags', '+faststart', '-f', 'mp4');
    } else if (fileType === 'WEBM') {
      if (video) {
        args.push(
          ...(video.codec === 'h264'
            ? ['-c:v', 'libvpx', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '1M']
            : ['-c:v', 'copy']),
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

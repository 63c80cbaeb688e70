import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { mediaTestsPossible } from '../../server/test/media/media-harness.ts';
import { browserTestsPossible } from './media-browser.ts';

/** The Debian tools the recordings browser tests use (janus-tools, ffmpeg). */
export const RECORDING_TOOLS = ['/usr/bin/janus-pp-rec', '/usr/bin/ffmpeg', '/usr/bin/ffprobe'];

/** Why a recordings browser test cannot run here (null when it can): media, a browser, `tools`. */
export function recordingTestsSkip(tools: string[] = RECORDING_TOOLS): string | null {
  return (
    mediaTestsPossible() ??
    browserTestsPossible() ??
    (tools.every((t) => fs.existsSync(t)) ? null : `needs ${tools.join(', ')}`)
  );
}

/** What `ffprobe -show_format -show_streams` says of a file. */
export interface Probe {
  format: { duration: string; format_name: string };
  streams: { codec_type: string; codec_name: string; width?: number; height?: number }[];
}

export const ffprobe = (file: string): Probe =>
  JSON.parse(
    execFileSync(
      'ffprobe',
      ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file],
      { encoding: 'utf8' },
    ),
  );

import fs from 'node:fs';
import path from 'node:path';
import type { SvcIceServer } from '@svc/protocol';
import { ConfigError, envInt as int } from '../env.ts';

/** Media settings, read from the environment (names are part of the contract; README lists them). */
export interface MediaConfig {
  /**
   * How the media engine is found: `SVC_MEDIA` = `auto` (default: external Janus when
   * `SVC_JANUS_URLS` is set, else a supervised child when a `janus` binary is found, else off) or
   * `off`.
   */
  mode: 'auto' | 'off';
  /** `SVC_JANUS_BINARY`: the Janus program for the embedded engine (default: `janus` on PATH). */
  janusBinary: string | null;
  /** `SVC_JANUS_MODULES_DIR`: the folder with Janus's `plugins/` and `transports/` (Debian's by default). */
  janusModulesDir: string | null;
  /** `SVC_JANUS_URLS`: external Janus WebSocket URLs (comma-separated); the first is used. */
  janusUrls: string[];
  /** `SVC_JANUS_WS_PORT` (8188) and `SVC_JANUS_ADMIN_PORT` (7188): the embedded Janus's ports. */
  janusWsPort: number;
  janusAdminPort: number;
  /** `SVC_JANUS_ADMIN_SECRET`: the admin API secret of the embedded Janus (random when unset). */
  janusAdminSecret: string | null;
  /**
   * `SVC_MEDIA_INTERFACE`: the IP address the embedded Janus binds its WebSocket to and gathers
   * ICE candidates on (default: WebSocket on 127.0.0.1, ICE on every interface).
   */
  mediaInterface: string | null;
  /** `SVC_MEDIA_RTP_PORTS` (`20000-40000`): the UDP port range of media. */
  rtpPortMin: number;
  rtpPortMax: number;
  /** `SVC_MEDIA_PUBLIC_IP`: the public address Janus advertises when it is behind NAT (1:1). */
  publicIp: string | null;
  /** `SVC_ICE_SERVERS`: STUN/TURN URLs for clients, comma-separated (e.g. `stun:stun.example.org:3478`). */
  iceServerUrls: string[];
  /** `SVC_TURN_URLS`: TURN URLs that get short-lived credentials (TURN REST) signed with `SVC_TURN_SECRET`. */
  turnUrls: string[];
  turnSecret: string | null;
  /** `SVC_TURN_TTL_SECONDS` (86400): lifetime of a TURN credential. */
  turnTtlSeconds: number;
  /** `SVC_JANUS_RESTART_MAX_DELAY_MS` (5000): the longest wait between restarts of a dying Janus. */
  restartMaxDelayMs: number;
  /**
   * `SVC_MEDIA_SUBSCRIBE_WAIT_MS` (5000): how long a subscription waits for a just-published
   * track's media to reach the SFU before failing with media_failed.
   */
  subscribeWaitMs: number;
  /** Where the embedded Janus's config folder and log go (`DATA_DIR/janus`). */
  janusDir: string;
  /** Where recordings go (`DATA_DIR/recordings`); never inside Janus's protected folders. */
  recordingsDir: string;
  /**
   * `SVC_RECORDING_STOP_WAIT_MS` (30000): how long a stop request waits for the file before it
   * answers `PROCESSING` (the conversion goes on; `recording.completed` tells when it is done).
   */
  recordingStopWaitMs: number;
  /**
   * `SVC_RECORDING_MAX_SECONDS` (21600, 6 h): a recording running longer (paused time included)
   * is stopped by the server as if stop had been called.
   */
  recordingMaxSeconds: number;
  /** `SVC_RECORDINGS_S3_*`: the object store finished recordings go to; null: `DATA_DIR`. */
  recordingsS3: RecordingsS3Config | null;
}

/**
 * `SVC_RECORDINGS_S3_BUCKET` turns it on. `SVC_RECORDINGS_S3_ENDPOINT` (an S3-compatible store's
 * URL; default AWS), `SVC_RECORDINGS_S3_REGION` (us-east-1), `SVC_RECORDINGS_S3_ACCESS_KEY_ID` +
 * `SVC_RECORDINGS_S3_SECRET_ACCESS_KEY` (default: the AWS SDK's own chain: environment, profile,
 * instance role), `SVC_RECORDINGS_S3_PREFIX` (key prefix, default none),
 * `SVC_RECORDINGS_S3_FORCE_PATH_STYLE` (default true with an endpoint, false without).
 */
export interface RecordingsS3Config {
  bucket: string;
  endpoint: string | null;
  region: string;
  accessKeyId: string | null;
  secretAccessKey: string | null;
  prefix: string;
  forcePathStyle: boolean;
}

function recordingsS3(env: NodeJS.ProcessEnv): RecordingsS3Config | null {
  const bucket = env.SVC_RECORDINGS_S3_BUCKET;
  if (!bucket) return null;
  const endpoint = env.SVC_RECORDINGS_S3_ENDPOINT || null;
  if (endpoint && !/^https?:\/\/[^\s]+$/.test(endpoint)) {
    throw new ConfigError('SVC_RECORDINGS_S3_ENDPOINT must be an http(s) URL');
  }
  const accessKeyId = env.SVC_RECORDINGS_S3_ACCESS_KEY_ID || null;
  const secretAccessKey = env.SVC_RECORDINGS_S3_SECRET_ACCESS_KEY || null;
  if (!accessKeyId !== !secretAccessKey) {
    throw new ConfigError(
      'SVC_RECORDINGS_S3_ACCESS_KEY_ID and SVC_RECORDINGS_S3_SECRET_ACCESS_KEY go together',
    );
  }
  const pathStyle = env.SVC_RECORDINGS_S3_FORCE_PATH_STYLE;
  if (pathStyle && pathStyle !== 'true' && pathStyle !== 'false') {
    throw new ConfigError('SVC_RECORDINGS_S3_FORCE_PATH_STYLE must be true or false');
  }
  return {
    bucket,
    endpoint,
    region: env.SVC_RECORDINGS_S3_REGION || 'us-east-1',
    accessKeyId,
    secretAccessKey,
    prefix: env.SVC_RECORDINGS_S3_PREFIX || '',
    forcePathStyle: pathStyle ? pathStyle === 'true' : endpoint !== null,
  };
}

const list = (raw: string | undefined) =>
  (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** Looks `name` up on PATH; null when absent. */
function which(name: string, envPath = process.env.PATH ?? ''): string | null {
  for (const dir of envPath.split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {}
  }
  return null;
}

const MODULE_DIRS = [
  '/usr/lib/x86_64-linux-gnu/janus',
  '/usr/lib/aarch64-linux-gnu/janus',
  '/usr/lib/janus',
  '/opt/janus/lib/janus',
  '/usr/local/lib/janus',
];

export function loadMediaConfig(env: NodeJS.ProcessEnv, dataDir: string): MediaConfig {
  const mode = env.SVC_MEDIA || 'auto';
  if (mode !== 'auto' && mode !== 'off') throw new ConfigError('SVC_MEDIA must be auto or off');
  const ports = env.SVC_MEDIA_RTP_PORTS || '20000-40000';
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(ports);
  const rtpPortMin = m ? Number(m[1]) : 0;
  const rtpPortMax = m ? Number(m[2]) : 0;
  if (!m || rtpPortMin < 1024 || rtpPortMax > 65535 || rtpPortMax - rtpPortMin < 10) {
    throw new ConfigError(
      'SVC_MEDIA_RTP_PORTS must be MIN-MAX within 1024-65535, 10 ports or more',
    );
  }
  for (const url of list(env.SVC_JANUS_URLS)) {
    if (!/^wss?:\/\//.test(url))
      throw new ConfigError('SVC_JANUS_URLS must list ws:// or wss:// URLs');
  }
  for (const url of [...list(env.SVC_ICE_SERVERS), ...list(env.SVC_TURN_URLS)]) {
    if (!/^(stun|stuns|turn|turns):/.test(url)) {
      throw new ConfigError(
        'SVC_ICE_SERVERS and SVC_TURN_URLS must list stun:, stuns:, turn: or turns: URLs',
      );
    }
  }
  const ip = (name: string) => {
    const v = env[name];
    if (!v) return null;
    if (!/^[0-9a-fA-F.:]+$/.test(v)) throw new ConfigError(`${name} must be an IP address`);
    return v;
  };
  const binary = env.SVC_JANUS_BINARY || which('janus', env.PATH);
  const modules =
    env.SVC_JANUS_MODULES_DIR ||
    MODULE_DIRS.find((d) => fs.existsSync(path.join(d, 'plugins'))) ||
    null;
  return {
    mode,
    janusBinary: binary || null,
    janusModulesDir: modules,
    janusUrls: list(env.SVC_JANUS_URLS),
    janusWsPort: int(env, 'SVC_JANUS_WS_PORT', 8188, 1, 65535),
    janusAdminPort: int(env, 'SVC_JANUS_ADMIN_PORT', 7188, 1, 65535),
    janusAdminSecret: env.SVC_JANUS_ADMIN_SECRET || null,
    mediaInterface: ip('SVC_MEDIA_INTERFACE'),
    rtpPortMin,
    rtpPortMax,
    publicIp: ip('SVC_MEDIA_PUBLIC_IP'),
    iceServerUrls: list(env.SVC_ICE_SERVERS),
    turnUrls: list(env.SVC_TURN_URLS),
    turnSecret: env.SVC_TURN_SECRET || null,
    turnTtlSeconds: int(env, 'SVC_TURN_TTL_SECONDS', 86_400, 60, 7 * 86_400),
    restartMaxDelayMs: int(env, 'SVC_JANUS_RESTART_MAX_DELAY_MS', 5000, 10, 600_000),
    subscribeWaitMs: int(env, 'SVC_MEDIA_SUBSCRIBE_WAIT_MS', 5000, 0, 60_000),
    recordingStopWaitMs: int(env, 'SVC_RECORDING_STOP_WAIT_MS', 30_000, 0, 600_000),
    recordingMaxSeconds: int(env, 'SVC_RECORDING_MAX_SECONDS', 21_600, 1, 7 * 86_400),
    recordingsS3: recordingsS3(env),
    janusDir: path.join(dataDir, 'janus'),
    recordingsDir: path.join(dataDir, 'recordings'),
  };
}

/** The ICE servers a participant gets: the configured ones plus TURN REST credentials. */
export function iceServersFor(
  cfg: MediaConfig,
  userId: string,
  nowMs: number,
  hmac: (secret: string, text: string) => string,
): SvcIceServer[] {
  const servers: SvcIceServer[] = [];
  if (cfg.iceServerUrls.length > 0) servers.push({ urls: cfg.iceServerUrls });
  if (cfg.turnUrls.length > 0 && cfg.turnSecret) {
    const username = `${Math.floor(nowMs / 1000) + cfg.turnTtlSeconds}:${userId}`;
    servers.push({ urls: cfg.turnUrls, username, credential: hmac(cfg.turnSecret, username) });
  }
  return servers;
}

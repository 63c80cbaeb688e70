import type { PlatformConfig } from '../config.ts';
import type { MediaConfig } from '../media/config.ts';
import type { MediaService } from '../media/service.ts';
import type { Platform } from '../platform.ts';
import type { RecordingService } from '../recordings/service.ts';
import type { RealtimeConfig } from './config.ts';

/** What the Realtime product (rooms, signaling, controller, media, recordings) is given. */
export interface RealtimeDeps
  extends Pick<
    Platform,
    'store' | 'state' | 'clock' | 'projects' | 'signingKeys' | 'secret' | 'events' | 'readiness'
  > {
  config: PlatformConfig & { realtime: RealtimeConfig; media: MediaConfig };
  /** Set by the Realtime plugin, for the composition root (tests reach the engine through it). */
  media: MediaService | null;
  /** Set by the Realtime plugin, for the composition root. */
  recordings: RecordingService | null;
}

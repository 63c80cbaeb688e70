// The test page of the media browser tests: @svc/client bundled for the browser (esbuild), driven
// by the test through `window.svcm`.
import { SvcClient, type SvcConfig, SvcError, type SvcRoomOptions } from '../../src/index.ts';

interface Seen {
  type: string;
  trackId: string;
  sid: string;
  source: string;
  kind: string;
  at: number;
}

const events: Seen[] = [];
const states: string[] = [];
let client: SvcClient | null = null;
let lastSocket: WebSocket | null = null;
const attached = new Map<unknown, HTMLMediaElement>();

async function attempt<T>(fn: () => Promise<T>) {
  try {
    return { ok: true as const, value: await fn() };
  } catch (err) {
    return {
      ok: false as const,
      code: err instanceof SvcError ? err.code : String(err),
      message: String(err),
    };
  }
}

const svcm = {
  events,
  states,
  async connect(config: SvcConfig, options: SvcRoomOptions, relay = false) {
    client = new SvcClient(config, {
      iceTransportPolicy: relay ? 'relay' : 'all',
      webSocketFactory: (url) => {
        lastSocket = new WebSocket(url);
        return lastSocket as never;
      },
    });
    client.connectionState.subscribe((s) => states.push(String(s)));
    const record =
      (type: string) =>
      (_p: unknown, t: { trackId: string; sid: string; source: string; kind: string }) =>
        events.push({
          type,
          trackId: t.trackId,
          sid: t.sid,
          source: t.source,
          kind: t.kind,
          at: performance.now(),
        });
    client.onMediaStarted = record('started');
    client.onMediaStopped = record('stopped');
    return attempt(async () => (await client!.connect(options)).localParticipant.sid);
  },
  enable(source: 'camera' | 'microphone' | 'screen') {
    const c = client!;
    return attempt(() =>
      source === 'camera'
        ? c.enableCamera()
        : source === 'microphone'
          ? c.enableMicrophone()
          : c.enableScreenShare(),
    );
  },
  disable(source: 'camera' | 'microphone' | 'screen') {
    const c = client!;
    return attempt(() =>
      source === 'camera'
        ? c.disableCamera()
        : source === 'microphone'
          ? c.disableMicrophone()
          : c.disableScreenShare(),
    );
  },
  /** Closes the signaling socket abnormally (a drop): the client resumes by itself. */
  dropSocket() {
    lastSocket?.close(3000, 'test drop');
  },
  async disconnect() {
    await client?.disconnect();
  },
  /** Decoding state of every remote track (attaching each to an element so audio is rendered). */
  async remote() {
    const out = [];
    for (const t of client?.room?.remoteTracks ?? []) {
      const track = t.mediaStreamTrack as unknown as MediaStreamTrack | null;
      if (track && !attached.has(track)) {
        const el = document.createElement(track.kind === 'video' ? 'video' : 'audio');
        el.autoplay = true;
        el.srcObject = new MediaStream([track]);
        document.body.append(el);
        void el.play().catch(() => {});
        attached.set(track, el);
      }
      let framesDecoded = 0;
      let samples = 0;
      let width = 0;
      let candidateType = '';
      const stats = await t.getStats();
      for (const r of stats.values()) {
        if (r.type === 'candidate-pair' && r.nominated && r.state === 'succeeded') {
          candidateType = String(stats.get(String(r.localCandidateId))?.candidateType ?? '');
        }
        if (r.type !== 'inbound-rtp') continue;
        framesDecoded += Number(r.framesDecoded ?? 0);
        samples += Number(r.totalSamplesReceived ?? 0);
        width = Math.max(width, Number(r.frameWidth ?? 0));
      }
      out.push({ ...t.info, framesDecoded, samples, width, candidateType, hasTrack: !!track });
    }
    return out;
  },
};

(window as unknown as { svcm: typeof svcm }).svcm = svcm;

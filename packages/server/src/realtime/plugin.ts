import websocket from '@fastify/websocket';
import { MAX_FRAME_BYTES } from '@svc/protocol';
import type { FastifyBaseLogger, FastifyPluginAsync } from 'fastify';
import { JanusEngine, type MediaEngine } from '../media/engine.ts';
import { MediaService } from '../media/service.ts';
import { recordingRoutes } from '../recordings/routes.ts';
import { RecordingService } from '../recordings/service.ts';
import type { RealtimeDeps } from './deps.ts';
import { MemoryRoomStore, type RoomStore } from './room-store.ts';
import { RedisRoomStore } from './room-store-redis.ts';
import { RoomService } from './rooms.ts';
import { realtimeRoutes } from './routes.ts';
import { SignalingHub } from './signaling.ts';

/**
 * The Realtime area: REST routes under /v1/realtime and the signaling WebSocket at
 * /v1/realtime/ws. Room state lives in a RoomStore over the shared state (in process, or Redis
 * when the shared state is Redis), so every node serves every room.
 */
export const realtimePlugin: FastifyPluginAsync<{ svc: RealtimeDeps }> = async (app, { svc }) => {
  const cfg = svc.config.realtime;
  const now = () => svc.clock.now();
  // Rooms live where the shared state does; with Redis, nodes watch each other's heartbeats.
  const [store, multiNode] = svc.state.match<[RoomStore, boolean]>({
    memory: () => [new MemoryRoomStore(now, cfg.replayBuffer), false],
    redis: (redis) => [new RedisRoomStore(redis, now, cfg.replayBuffer), true],
  });
  const rooms = new RoomService(svc, store, cfg, multiNode, app.log);
  const hub = new SignalingHub(svc, rooms, store, cfg, app.log);
  const media = new MediaService(
    createEngines(svc, app.log),
    svc.config.media,
    rooms,
    store,
    hub.nodeId,
    now,
    app.log,
    (rid, sid, frame) => hub.sendToSid(rid, sid, frame),
  );
  hub.media = media;
  // The controller's forced mutes are enforced in the SFU: every audio track of the user is
  // moderated (a client that keeps sending is still silent for its subscribers).
  rooms.controller.mediaEngine = {
    async setAudioMuted(rid, userId, muted, by) {
      const room = await store.peek(rid);
      for (const t of room?.tracks ?? []) {
        if (t.userId === userId && t.kind === 'audio') {
          await media.moderateTrack(rid, t.trackId, muted, by);
        }
      }
    },
  };
  svc.readiness.set('media', () => media.health());
  svc.media = media;
  const recordings = new RecordingService(
    svc,
    media,
    rooms,
    store,
    svc.config.media.recordingStopWaitMs,
    app.log,
  );
  svc.recordings = recordings;
  // A room that ends stops its recordings (their files are made as after a stop request).
  const unsink = svc.events.addSink(async (ev) => {
    const roomName = ev.data.roomName;
    if (ev.type === 'room.ended' && typeof roomName === 'string') {
      void recordings.stopRoom(ev.projectId, roomName).catch((err) => {
        app.log.warn({ err, roomName }, 'recordings: stopping on room end failed');
      });
    }
  });

  app.addHook('onReady', async () => {
    await rooms.reviveOpenRooms();
    media.reportIfOff();
    await recordings.recover();
  });
  // Before @fastify/websocket's own preClose: sessions enter their grace period, then sockets close.
  app.addHook('preClose', async () => {
    await hub.close();
  });
  app.addHook('onClose', async () => {
    unsink();
    await recordings.close();
    await media.close();
    await store.close();
  });
  await app.register(websocket, {
    options: { maxPayload: MAX_FRAME_BYTES },
    errorHandler: (err, socket, request) => {
      // A client's protocol fault (invalid UTF-8, a frame over the limit): ws already closes the
      // socket with the matching code (1007, 1009). Any client can cause it: not an error here.
      const code = (err as { code?: unknown }).code;
      if (typeof code === 'string' && code.startsWith('WS_ERR_')) {
        request.log.debug({ code, message: err.message }, 'realtime: client protocol fault');
        return;
      }
      request.log.error({ err }, 'realtime: socket failed');
      socket.terminate();
    },
  });

  app.get('/v1/realtime/ws', { websocket: true, schema: { hide: true } }, (socket, request) =>
    hub.accept(socket, request.query as Record<string, unknown>, request.raw.socket),
  );
  await app.register(realtimeRoutes, { prefix: '/v1', rooms });
  await app.register(recordingRoutes, { prefix: '/v1', recordings });
};

/** The media engines the configuration asks for, by key; empty when media is off. */
function createEngines(svc: RealtimeDeps, log: FastifyBaseLogger): Map<string, MediaEngine> {
  const cfg = svc.config.media;
  const engines = new Map<string, MediaEngine>();
  if (cfg.mode === 'off') return engines;
  if (cfg.janusUrls.length > 0) {
    for (const url of cfg.janusUrls) {
      const engine = new JanusEngine(url, null, log);
      void engine.ready(1).catch(() => {});
      engines.set(url, engine);
    }
  } else if (cfg.janusBinary && cfg.janusModulesDir) {
    engines.set('embedded', JanusEngine.embedded(cfg, log));
  }
  return engines;
}

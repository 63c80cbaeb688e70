import fs from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  DOWNLOAD_URL_EXPIRES_DEFAULT,
  DownloadUrlQuerySchema,
  ListActiveRecordingsQuerySchema,
  ListRecordingsQuerySchema,
  RecordingFileQuerySchema,
  RecordingIdParamsSchema,
  RecordingItemsSchema,
  RecordingPageSchema,
  SvcRecordingDownloadUrlSchema,
  SvcRecordingInfoSchema,
  SvcStartRecordingOptionsSchema,
} from '@svc/protocol';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../http/problem.ts';
import { CONTENT_TYPE, type RecordingService } from './service.ts';

const client = { auth: { product: 'realtime', clientKeys: true } } as const;
const tags = ['recordings'];
const security = [{ apiKey: [], projectId: [] }];
const RoomTokenHeaders = Type.Object({
  /** A client key's proof: the access token of a host or co-host present in the room. */
  'x-room-token': Type.Optional(Type.String({ maxLength: 8192 })),
});

/** The recordings API (docs/recordings.md), under /v1. */
export const recordingRoutes: FastifyPluginAsyncTypebox<{ recordings: RecordingService }> = async (
  app,
  { recordings },
) => {
  const scopeOf = (request: FastifyRequest, roomName?: string) =>
    recordings.scope(
      request.auth!,
      (request.headers as Record<string, string | undefined>)['x-room-token'],
      roomName,
    );

  app.post(
    '/realtime/recordings',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Start recording a room',
        headers: RoomTokenHeaders,
        body: SvcStartRecordingOptionsSchema,
        response: { 201: SvcRecordingInfoSchema },
      },
    },
    async (request, reply) => {
      const scope = await scopeOf(request, request.body.roomName);
      return reply.code(201).send(await recordings.start(scope, request.body));
    },
  );

  app.post(
    '/realtime/recordings/:egressId/stop',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Stop a recording; answers once its file is ready (or PROCESSING after a bound)',
        headers: RoomTokenHeaders,
        params: RecordingIdParamsSchema,
        response: { 200: SvcRecordingInfoSchema },
      },
    },
    async (request) => recordings.stop(await scopeOf(request), request.params.egressId),
  );

  for (const action of ['pause', 'resume'] as const) {
    app.post(
      `/realtime/recordings/:egressId/${action}`,
      {
        config: client,
        schema: {
          tags,
          security,
          summary:
            action === 'pause'
              ? 'Pause a recording: nothing is written until it resumes, and the file skips the gap'
              : 'Resume a paused recording (the same file goes on)',
          headers: RoomTokenHeaders,
          params: RecordingIdParamsSchema,
          response: { 200: SvcRecordingInfoSchema },
        },
      },
      async (request) => recordings[action](await scopeOf(request), request.params.egressId),
    );
  }

  app.get(
    '/realtime/recordings/active',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'The recordings in progress (of one room with a client key)',
        headers: RoomTokenHeaders,
        querystring: ListActiveRecordingsQuerySchema,
        response: { 200: RecordingItemsSchema },
      },
    },
    async (request) =>
      recordings.listActive(await scopeOf(request, request.query.roomName), request.query.roomName),
  );

  app.get(
    '/realtime/recordings',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'List recordings, newest first (one room’s with a client key)',
        headers: RoomTokenHeaders,
        querystring: ListRecordingsQuerySchema,
        response: { 200: RecordingPageSchema },
      },
    },
    async (request) => {
      const { status, roomName, page = 1, limit = 10 } = request.query;
      return recordings.list(await scopeOf(request, roomName), status, roomName, page, limit);
    },
  );

  app.get(
    '/realtime/recordings/:egressId',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Get a recording',
        headers: RoomTokenHeaders,
        params: RecordingIdParamsSchema,
        response: { 200: SvcRecordingInfoSchema },
      },
    },
    async (request) => recordings.get(await scopeOf(request), request.params.egressId),
  );

  app.get(
    '/realtime/recordings/:egressId/download-url',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'A signed, expiring address of a COMPLETED recording’s file',
        headers: RoomTokenHeaders,
        params: RecordingIdParamsSchema,
        querystring: DownloadUrlQuerySchema,
        response: { 200: SvcRecordingDownloadUrlSchema },
      },
    },
    async (request) =>
      recordings.downloadUrl(
        await scopeOf(request),
        request.params.egressId,
        request.query.expiresIn ?? DOWNLOAD_URL_EXPIRES_DEFAULT,
      ),
  );

  const fileBody = (type: string) => ({ [type]: { schema: { type: 'string', format: 'binary' } } });
  const fileContent = {
    ...fileBody('video/mp4'),
    ...fileBody('video/webm'),
    ...fileBody('audio/ogg'),
  };
  app.get(
    '/realtime/recordings/:egressId/file',
    {
      schema: {
        tags,
        security: [],
        summary: 'A recording’s file, by its signed address (no API key; supports Range)',
        params: RecordingIdParamsSchema,
        querystring: RecordingFileQuerySchema,
        response: {
          200: { description: 'The whole file', content: fileContent },
          206: { description: 'The requested range', content: fileContent },
        },
      } as never,
    },
    async (request, reply) => {
      const { egressId } = request.params as { egressId: string };
      const {
        exp,
        sig,
        file: index,
      } = request.query as { exp: string; sig: string; file?: string };
      const { row, file } = await recordings.openSigned(egressId, exp, sig, index);
      const size = fs.statSync(file).size;
      const name = path.basename(file).replace(/[^A-Za-z0-9._-]/g, '_');
      reply
        .header('accept-ranges', 'bytes')
        .header('content-type', CONTENT_TYPE[row.file_type])
        .header('content-disposition', `attachment; filename="${name}"`)
        .header('cache-control', 'private, no-store');
      const range = request.headers.range;
      if (range === undefined) {
        reply.header('content-length', size);
        return reply.code(200).send(fs.createReadStream(file) as never);
      }
      const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
      let start = 0;
      let end = size - 1;
      if (m && (m[1] || m[2])) {
        if (m[1]) {
          start = Number(m[1]);
          if (m[2]) end = Math.min(Number(m[2]), size - 1);
        } else {
          start = Math.max(0, size - Number(m[2]));
        }
      }
      if (!m || (!m[1] && !m[2]) || start >= size || start > end) {
        throw new ApiError(
          'range_not_satisfiable',
          `The file has ${size} bytes.`,
          {},
          {
            'content-range': `bytes */${size}`,
          },
        );
      }
      reply.header('content-range', `bytes ${start}-${end}/${size}`);
      reply.header('content-length', end - start + 1);
      return reply.code(206).send(fs.createReadStream(file, { start, end }) as never);
    },
  );
};

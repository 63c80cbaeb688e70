import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  ListRoomsQuerySchema,
  ParticipantListSchema,
  RoomListSchema,
  RoomNameParamsSchema,
  SendMessageBodySchema,
  SendMessageResultSchema,
  SvcCreateRoomOptionsSchema,
  SvcRoomInfoSchema,
  SvcRoomOptionsSchema,
  SvcTokenResponseSchema,
} from '@svc/protocol';
import { type RoomService, roomInfoFromRow } from './rooms.ts';

const client = { auth: { product: 'realtime', clientKeys: true } } as const;
const serverOnly = { auth: { product: 'realtime', clientKeys: false } } as const;
const tags = ['realtime'];
const security = [{ apiKey: [], projectId: [] }];

/** The Realtime REST API (API.md, Realtime), under /v1. */
export const realtimeRoutes: FastifyPluginAsyncTypebox<{ rooms: RoomService }> = async (
  app,
  { rooms },
) => {
  app.post(
    '/realtime/rooms',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Create a room',
        body: SvcCreateRoomOptionsSchema,
        response: { 201: SvcRoomInfoSchema },
      },
    },
    async (request, reply) => {
      const row = await rooms.openRoom(request.auth!.projectId, request.body, false);
      return reply.code(201).send(roomInfoFromRow(row));
    },
  );

  app.get(
    '/realtime/rooms',
    {
      config: serverOnly,
      schema: {
        tags,
        security,
        summary: 'List rooms (server keys only)',
        querystring: ListRoomsQuerySchema,
        response: { 200: RoomListSchema },
      },
    },
    async (request) => {
      const { status, page = 1, limit = 10 } = request.query;
      return rooms.listRooms(request.auth!.projectId, status, page, limit);
    },
  );

  app.get(
    '/realtime/rooms/:roomName',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Get a room',
        params: RoomNameParamsSchema,
        response: { 200: SvcRoomInfoSchema },
      },
    },
    async (request) => rooms.getRoom(request.auth!.projectId, request.params.roomName),
  );

  app.delete(
    '/realtime/rooms/:roomName',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Delete a room: everyone connected is disconnected with ROOM_DELETED',
        params: RoomNameParamsSchema,
        response: { 204: Type.Null() },
      },
    },
    async (request, reply) => {
      await rooms.deleteRoom(request.auth!.projectId, request.params.roomName);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/realtime/rooms/:roomName/participants',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: "A room's participants",
        params: RoomNameParamsSchema,
        response: { 200: ParticipantListSchema },
      },
    },
    async (request) => ({
      items: await rooms.participants(request.auth!.projectId, request.params.roomName),
    }),
  );

  app.post(
    '/realtime/token',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'An access token for one user in one room (creates the room if needed)',
        body: SvcRoomOptionsSchema,
        response: { 200: SvcTokenResponseSchema },
      },
    },
    async (request) => rooms.issueToken(request.auth!.projectId, request.body),
  );

  app.post(
    '/realtime/rooms/:roomName/messages',
    {
      config: client,
      schema: {
        tags,
        security,
        summary: 'Send a message to everyone connected to the room',
        params: RoomNameParamsSchema,
        body: SendMessageBodySchema,
        response: { 202: SendMessageResultSchema },
      },
    },
    async (request, reply) => {
      const seq = await rooms.sendApiMessage(
        request.auth!.projectId,
        request.params.roomName,
        request.body,
      );
      return reply.code(202).send({ seq });
    },
  );
};

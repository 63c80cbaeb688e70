import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  ApiKey,
  CreatedApiKey,
  CreateKeyBody,
  CreateProjectBody,
  ImportLegacyKeyBody,
  Project,
  ResourceId,
  RotateKeyBody,
  UpdateKeyBody,
  UpdateProjectBody,
} from '@svc/protocol';
import type { onRequestAsyncHookHandler } from 'fastify';
import { sendProblem } from '../http/problem.ts';
import type { KeyService } from './keys.ts';
import type { ProjectService } from './projects.ts';

const ProjectParams = Type.Object({
  projectId: ResourceId,
});
const KeyParams = Type.Object({
  projectId: ResourceId,
  keyId: ResourceId,
});

export interface AdminDeps {
  adminToken: string;
  projects: ProjectService;
  keys: KeyService;
}

function digest(value: string) {
  return createHash('sha256').update(value).digest();
}

/**
 * The admin-token check as an onRequest hook: `Authorization: Bearer <admin token>`, compared
 * in constant time. Product areas guard their own `/v1/admin` routes with it (`svc.adminGuard`).
 */
export function adminTokenHook(adminToken: string): onRequestAsyncHookHandler {
  const expected = digest(adminToken);
  return async (request, reply) => {
    const authorization = request.headers.authorization;
    if (!authorization) return sendProblem(reply, 'missing_admin_token');
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
    // Compare digests, so the comparison takes the same time whatever was sent.
    if (!m || !timingSafeEqual(digest(m[1]), expected))
      return sendProblem(reply, 'invalid_admin_token');
  };
}

/**
 * The operator's admin API under `/admin`, guarded by the admin token. Each product area adds
 * its own admin routes in its plugin with the same `adminOnly` hook.
 */
export const adminRoutes: FastifyPluginAsyncTypebox<AdminDeps> = async (
  app,
  { adminToken, projects, keys },
) => {
  app.addHook('onRequest', adminTokenHook(adminToken));

  const tags = ['admin'];
  const security = [{ adminToken: [] }];

  app.post(
    '/projects',
    {
      schema: {
        summary: 'Create a project',
        tags,
        security,
        body: CreateProjectBody,
        response: { 201: Project },
      },
    },
    async (req, reply) => reply.code(201).send(await projects.create(req.body)),
  );
  app.get(
    '/projects',
    {
      schema: {
        summary: 'List projects',
        tags,
        security,
        response: { 200: Type.Object({ items: Type.Array(Project) }) },
      },
    },
    async () => ({
      items: await projects.list(),
    }),
  );
  app.get(
    '/projects/:projectId',
    {
      schema: {
        summary: 'Get a project',
        tags,
        security,
        params: ProjectParams,
        response: { 200: Project },
      },
    },
    async (req) => projects.get(req.params.projectId),
  );
  app.patch(
    '/projects/:projectId',
    {
      schema: {
        summary: "Update a project's name, products, webhook switch or product settings",
        tags,
        security,
        params: ProjectParams,
        body: UpdateProjectBody,
        response: { 200: Project },
      },
    },
    async (req) => projects.update(req.params.projectId, req.body),
  );
  app.delete(
    '/projects/:projectId',
    {
      schema: {
        summary: 'Delete a project and everything in it',
        tags,
        security,
        params: ProjectParams,
      },
    },
    async (req, reply) => {
      await projects.delete(req.params.projectId);
      return reply.code(204).send();
    },
  );

  app.post(
    '/projects/:projectId/keys',
    {
      schema: {
        summary: 'Create a key; the plaintext is shown only here',
        tags,
        security,
        params: ProjectParams,
        body: CreateKeyBody,
        response: { 201: CreatedApiKey },
      },
    },
    async (req, reply) => reply.code(201).send(await keys.create(req.params.projectId, req.body)),
  );
  app.get(
    '/projects/:projectId/keys',
    {
      schema: {
        summary: "List a project's keys (no plaintext)",
        tags,
        security,
        params: ProjectParams,
        response: { 200: Type.Object({ items: Type.Array(ApiKey) }) },
      },
    },
    async (req) => ({ items: await keys.list(req.params.projectId) }),
  );
  app.get(
    '/projects/:projectId/keys/:keyId',
    {
      schema: {
        summary: 'Get a key (no plaintext)',
        tags,
        security,
        params: KeyParams,
        response: { 200: ApiKey },
      },
    },
    async (req) => keys.get(req.params.projectId, req.params.keyId),
  );
  app.patch(
    '/projects/:projectId/keys/:keyId',
    {
      schema: {
        summary: "Update a key's name, scopes, locks or rate limit",
        tags,
        security,
        params: KeyParams,
        body: UpdateKeyBody,
        response: { 200: ApiKey },
      },
    },
    async (req) => keys.update(req.params.projectId, req.params.keyId, req.body),
  );
  app.delete(
    '/projects/:projectId/keys/:keyId',
    { schema: { summary: 'Revoke a key', tags, security, params: KeyParams } },
    async (req, reply) => {
      await keys.revoke(req.params.projectId, req.params.keyId);
      return reply.code(204).send();
    },
  );
  app.post(
    '/projects/:projectId/keys/:keyId/rotate',
    {
      schema: {
        summary:
          'Rotate a key: a new key with the same settings; the old one works for the grace period',
        description:
          'A key is rotated once: a key already rotated is refused with 409 `api_key_already_rotated` (rotate its `replacedBy`), a revoked or legacy key with 400 `invalid_request`. Of concurrent rotations of one key exactly one succeeds.',
        tags,
        security,
        params: KeyParams,
        body: Type.Optional(RotateKeyBody),
        response: { 201: CreatedApiKey },
      },
    },
    async (req, reply) =>
      reply
        .code(201)
        .send(
          await keys.rotate(
            req.params.projectId,
            req.params.keyId,
            req.body?.gracePeriodSeconds ?? 0,
          ),
        ),
  );
  app.post(
    '/projects/:projectId/keys/import-legacy',
    {
      schema: {
        summary: 'Import a legacy key (acts as a server key)',
        tags,
        security,
        params: ProjectParams,
        body: ImportLegacyKeyBody,
        response: { 201: ApiKey },
      },
    },
    async (req, reply) =>
      reply.code(201).send(await keys.importLegacy(req.params.projectId, req.body)),
  );
};

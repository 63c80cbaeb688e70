import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  ResourceId,
  SendCodeBody,
  SendCodeResponse,
  ValidateTokenBody,
  ValidateTokenResponse,
  VerifyCodeBody,
  VerifyCodeResponse,
  VerifyLogsQuery,
  VerifyLogsResponse,
  VerifyOutbox,
  VerifyStats,
  VerifyStatsQuery,
} from '@svc/protocol';
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { CallContext, VerifyService } from './service.ts';

const tags = ['verify'];
const clientOrServer = { auth: { product: 'verify' as const, clientKeys: true } };
const serverOnly = { auth: { product: 'verify' as const, clientKeys: false } };

function context(request: FastifyRequest): CallContext {
  const auth = request.auth!;
  return { projectId: auth.projectId, keyId: auth.keyId, clientIp: request.ip };
}

/** The Verify API under `/v1`, every route behind the key gate. */
export const verifyRoutes: FastifyPluginAsyncTypebox<{ service: VerifyService }> = async (
  app,
  { service },
) => {
  app.post(
    '/auth/sms/send',
    {
      config: clientOrServer,
      schema: {
        tags,
        summary: 'Text a one-time code to a phone number',
        description:
          "Creates the number's verification, or refreshes its pending one with a new code. Refusals: 400 `invalid_phone_number`, 403 `country_not_allowed`, 429 `resend_too_soon` / `max_sends_reached` / `max_attempts_reached` / `too_many_requests` (with Retry-After), 502 `sms_delivery_failed` (no send used).",
        body: SendCodeBody,
        response: { 200: SendCodeResponse },
      },
    },
    async (request) => service.send(context(request), request.body.phoneNumber),
  );

  app.post(
    '/verify',
    {
      config: clientOrServer,
      schema: {
        tags,
        summary: 'Check a code; on success get a token for the backend',
        description:
          'Give `phoneNumber` or `verificationId`, and `code`. Refusals: 400 `invalid_code` (with `attemptsRemaining`), 429 `max_attempts_reached`, 410 `verification_expired`, 404 `verification_not_found`, 429 `too_many_requests`.',
        body: VerifyCodeBody,
        response: { 200: VerifyCodeResponse },
      },
    },
    async (request) => service.check(context(request), request.body),
  );

  app.post(
    '/verify/validate-token',
    {
      config: serverOnly,
      schema: {
        tags,
        summary: 'Check a verification token (server keys)',
        description:
          'Valid when the signature, audience and expiry check out and the token belongs to the calling project. With `consume: true` a token validates only once, across every node.',
        body: ValidateTokenBody,
        response: { 200: ValidateTokenResponse },
      },
    },
    async (request) =>
      service.validateToken(
        request.auth!.projectId,
        request.body.token,
        request.body.consume ?? false,
      ),
  );

  app.get(
    '/verify/logs',
    {
      config: serverOnly,
      schema: {
        tags,
        summary: 'Every send and check, newest first (server keys)',
        querystring: VerifyLogsQuery,
        response: { 200: VerifyLogsResponse },
      },
    },
    async (request) => service.logs(request.auth!.projectId, request.query),
  );

  app.get(
    '/verify/stats',
    {
      config: serverOnly,
      schema: {
        tags,
        summary: 'Sends, approvals, failed checks, expirations and conversion (server keys)',
        description: 'Over `[from, to)`; by default the last 30 days. Test numbers are left out.',
        querystring: VerifyStatsQuery,
        response: { 200: VerifyStats },
      },
    },
    async (request) => service.stats(request.auth!.projectId, request.query.from, request.query.to),
  );
};

/** Verify's admin routes under `/v1/admin`, behind the admin token. */
export const verifyAdminRoutes: FastifyPluginAsyncTypebox<{
  service: VerifyService;
  guard: onRequestAsyncHookHandler;
}> = async (app, { service, guard }) => {
  app.addHook('onRequest', guard);
  app.get(
    '/projects/:projectId/verify/outbox',
    {
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: "The console SMS sender's last messages for a project (development)",
        description: 'Newest first; at most 50, kept in memory on the node that sent them.',
        params: Type.Object({
          projectId: ResourceId,
        }),
        response: { 200: VerifyOutbox },
      },
    },
    async (request) => {
      await service.projectExists(request.params.projectId);
      return { items: service.outbox.list(request.params.projectId) };
    },
  );
};

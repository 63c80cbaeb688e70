import type { FastifyPluginAsync } from 'fastify';
import { verifyAdminRoutes, verifyRoutes } from './routes.ts';
import { type VerifyDeps, VerifyService } from './service.ts';

/**
 * The Verify area: SMS one-time codes, verification tokens, logs and stats under `/v1`, the
 * console outbox under `/v1/admin`, and the `settings.verify` validator.
 */
export const verifyPlugin: FastifyPluginAsync<{ svc: VerifyDeps }> = async (app, { svc }) => {
  const service = new VerifyService(svc, app.log);
  await service.sealStoredCredentials();
  svc.projects.registerSettings('verify', service.settingsValidator());
  await app.register(verifyRoutes, { prefix: '/v1', service });
  await app.register(verifyAdminRoutes, { prefix: '/v1/admin', service, guard: svc.adminGuard });
};

import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../app.ts';

/** The Verify area: registered by app.ts under /v1 with the shared services. */
export const verifyPlugin: FastifyPluginAsync<{ svc: Services }> = async () => {};

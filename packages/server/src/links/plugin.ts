import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../app.ts';

/** The Links area: registered by app.ts under /v1 with the shared services. */
export const linksPlugin: FastifyPluginAsync<{ svc: Services }> = async () => {};

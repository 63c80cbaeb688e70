import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../app.ts';

/** The Webhooks area: registered by app.ts under /v1 with the shared services. */
export const webhooksPlugin: FastifyPluginAsync<{ svc: Services }> = async () => {};

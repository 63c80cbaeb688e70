import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../app.ts';

/** The Realtime area: registered by app.ts under /v1 with the shared services. */
export const realtimePlugin: FastifyPluginAsync<{ svc: Services }> = async () => {};

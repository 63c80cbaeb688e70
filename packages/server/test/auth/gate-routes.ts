import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';

/** Routes with each kind of gate declaration, for testing the gate before products exist. */
export function gateTestRoutes(app: FastifyInstance) {
  const ok = async (request: any) => ({
    ok: true,
    projectId: request.auth.projectId,
    keyType: request.auth.keyType,
  });
  app.get('/v1/test/realtime', { config: { auth: { product: 'realtime', clientKeys: true } } }, ok);
  app.get(
    '/v1/test/realtime-admin',
    { config: { auth: { product: 'realtime', clientKeys: false } } },
    ok,
  );
  app.get('/v1/test/links', { config: { auth: { product: 'links', clientKeys: true } } }, ok);
  app.get('/v1/test/mail', { config: { auth: { product: 'mail', clientKeys: false } } }, ok);
  app.post(
    '/v1/test/echo',
    {
      config: { auth: { product: 'realtime', clientKeys: true } },
      schema: {
        body: Type.Object(
          { name: Type.String({ maxLength: 20 }), count: Type.Optional(Type.Integer()) },
          { additionalProperties: false },
        ),
      },
    },
    async (request: any) => ({ echo: request.body }),
  );
  app.get(
    '/v1/test/boom',
    { config: { auth: { product: 'realtime', clientKeys: true } } },
    async () => {
      throw new Error('secret internals: database password is hunter2');
    },
  );
  app.get(
    '/v1/test/deadlock',
    { config: { auth: { product: 'realtime', clientKeys: true } } },
    async () => {
      // As pg raises it when PostgreSQL aborts a transaction to break a deadlock.
      throw Object.assign(new Error('deadlock detected'), { code: '40P01', severity: 'ERROR' });
    },
  );
}

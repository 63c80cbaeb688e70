import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import { ERROR_CODES } from '@svc/protocol';
import type { FastifyInstance, RouteOptions } from 'fastify';

/** The problem+json body, with `code` limited to the registry: the document and registry agree. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.Optional(Type.String()),
    code: Type.Unsafe<string>({ type: 'string', enum: Object.keys(ERROR_CODES) }),
    requestId: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
  },
  {
    $id: 'Problem',
    additionalProperties: true,
    description: 'RFC 9457 problem details with a stable `code`',
  },
);

/**
 * OpenAPI generated from the route schemas: every documented route gets the problem+json error
 * responses, and gated routes their security requirements, from their `config.auth`.
 */
export async function installOpenApi(app: FastifyInstance, publicUrl: string) {
  app.addSchema(ProblemSchema);
  app.addHook('onRoute', (route: RouteOptions) => {
    route.schema = route.schema ?? {};
    const schema = route.schema as Record<string, unknown> & { response?: Record<string, unknown> };
    if (schema.hide) return;
    schema.response = schema.response ?? {};
    const response = schema.response;
    const problem = {
      description: 'Error (application/problem+json)',
      content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
    };
    response['4XX'] ??= problem;
    response['5XX'] ??= problem;
    const auth = (route.config as { auth?: { product: string; clientKeys: boolean } } | undefined)
      ?.auth;
    if (auth) {
      schema.security ??= [{ apiKey: [], projectId: [] }];
      const who = auth.clientKeys
        ? `client keys with the \`${auth.product}\` scope, or server keys`
        : 'server keys only';
      schema.description = `${schema.description ? `${schema.description}\n\n` : ''}Product: \`${auth.product}\`; callable by ${who}.`;
      schema.tags ??= [auth.product];
    }
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Svc API',
        version: '1.0.0',
        description:
          'Realtime, Links and Verify behind one key system. Authenticate with `Authorization: Bearer <key>` (or `X-Api-Key`) and `X-Project-Id`. Errors are application/problem+json (RFC 9457) with a stable `code`. Authenticated responses carry `RateLimit-Policy` and `RateLimit`; a 429 carries `Retry-After`.',
      },
      servers: [{ url: publicUrl }],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'A client (svc_pk_…) or server (svc_sk_…) key',
          },
          projectId: { type: 'apiKey', in: 'header', name: 'X-Project-Id' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'The operator admin token' },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}

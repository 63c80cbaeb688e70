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
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
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
    transformObject: (document) =>
      finishDocument((document as { openapiObject: OpenApiDocument }).openapiObject),
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}

type OpenApiOperation = {
  operationId?: string;
  security?: Record<string, string[]>[];
  responses?: Record<string, { description?: string; headers?: Record<string, unknown> }>;
};
type OpenApiDocument = {
  paths?: Record<string, Record<string, OpenApiOperation>>;
  components?: Record<string, Record<string, unknown>>;
};

const HEADER = (description: string, schema: Record<string, unknown> = { type: 'string' }) => ({
  description,
  schema,
});

/** Response headers the API sends, declared once under `components.headers`. */
const RESPONSE_HEADERS = {
  RequestId: HEADER('The request id, also in every problem body as `requestId`', {
    type: 'string',
    examples: ['req_3TYaLw-v4'],
  }),
  RateLimit: HEADER('Remaining requests and seconds until the window resets (IETF draft)', {
    type: 'string',
    examples: ['"default";r=119;t=60'],
  }),
  RateLimitPolicy: HEADER("The key's limit per window (IETF draft)", {
    type: 'string',
    examples: ['"default";q=120;w=60'],
  }),
  RetryAfter: HEADER('Seconds to wait before trying again (429 and 503 answers)', {
    type: 'integer',
    minimum: 0,
  }),
  Location: HEADER('Where the redirect leads'),
};

const ref = (name: keyof typeof RESPONSE_HEADERS) => ({
  $ref: `#/components/headers/${name}`,
});

/** `GET /v1/realtime/rooms/{roomName}/participants` → `getRealtimeRoomsByRoomNameParticipants`. */
export function operationIdOf(method: string, path: string): string {
  const words = path
    .split('/')
    .filter((part) => part && part !== 'v1')
    .flatMap((part) => (part.startsWith('{') ? ['by', part] : [part]))
    .flatMap((part) => part.split(/[^A-Za-z0-9]+/))
    .filter(Boolean);
  return [method.toLowerCase(), ...words.map((w) => w[0]!.toUpperCase() + w.slice(1))].join('');
}

/**
 * Completes the generated document: an `operationId` for every operation (from its method and
 * path unless the route names one), `security: []` on public routes, a 204 on DELETEs, and the
 * headers every answer carries (`Request-Id`; `RateLimit*` on keyed routes; `Retry-After` on
 * errors; `Location` on redirects).
 */
function finishDocument(doc: OpenApiDocument): OpenApiDocument {
  doc.components ??= {};
  doc.components.headers = { ...RESPONSE_HEADERS };
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(operations)) {
      op.operationId ??= operationIdOf(method, path);
      op.security ??= [];
      op.responses ??= {};
      if (method === 'delete' && !Object.keys(op.responses).some((c) => c.startsWith('2'))) {
        op.responses['204'] = { description: 'Deleted' };
      }
      const keyed = op.security.some((s) => 'apiKey' in s);
      for (const [code, response] of Object.entries(op.responses)) {
        const headers: Record<string, unknown> = { 'Request-Id': ref('RequestId') };
        // Sent once the key has passed the gate: on successes and on most refusals alike.
        if (keyed && code !== '401') {
          headers.RateLimit = ref('RateLimit');
          headers['RateLimit-Policy'] = ref('RateLimitPolicy');
        }
        if (code === '4XX' || code === '5XX' || code === '429' || code === '503') {
          headers['Retry-After'] = ref('RetryAfter');
        }
        if (code.startsWith('3')) headers.Location = ref('Location');
        response.headers = { ...headers, ...response.headers };
      }
    }
  }
  return doc;
}

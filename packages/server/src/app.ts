import { randomBytes } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import type { DestinationStream } from 'pino';
import { KeyService } from './admin/keys.ts';
import { ProjectService } from './admin/projects.ts';
import { type AdminGuard, adminRoutes, adminTokenGuard } from './admin/routes.ts';
import { installGate } from './auth/gate.ts';
import { KeyStore } from './auth/key-store.ts';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import { DomainEvents } from './events.ts';
import { loggerOptions } from './http/logging.ts';
import { Metrics } from './http/metrics.ts';
import { installErrorHandling, sendProblem } from './http/problem.ts';
import { linksPlugin } from './links/plugin.ts';
import { realtimePlugin } from './realtime/plugin.ts';
import { resolveServerSecret } from './secret.ts';
import { openSharedState, type SharedState } from './state/index.ts';
import { openStore, type Store } from './storage/db.ts';
import { SigningKeys } from './tokens/signing-keys.ts';
import { verifyPlugin } from './verify/plugin.ts';
import { webhooksPlugin } from './webhooks/plugin.ts';

/** What every area of the server is given: the stores, the clock, the key system. */
export interface Services {
  config: Config;
  store: Store;
  state: SharedState;
  clock: Clock;
  metrics: Metrics;
  keyStore: KeyStore;
  projects: ProjectService;
  keys: KeyService;
  /** The token-signing key set (realtime access tokens, verification tokens). */
  signingKeys: SigningKeys;
  /** The server secret (HMAC key material): SVC_SECRET or the embedded default's generated one. */
  secret: string;
  /** Domain events (room.started, participant.joined…); the webhooks area subscribes. */
  events: DomainEvents;
  /** The admin-token check, for areas' own `/v1/admin` routes (add it as an onRequest hook). */
  adminGuard: AdminGuard;
}

declare module 'fastify' {
  interface FastifyInstance {
    svc: Services;
  }
}

export interface BuildOptions {
  config: Config;
  /** The admin API token (required; main.ts generates one for the embedded default). */
  adminToken: string;
  clock?: Clock;
  /** The server secret; resolved from the config (SVC_SECRET or DATA_DIR) when absent. */
  secret?: string;
  /** Where logs go (tests capture them); stdout by default. */
  logStream?: DestinationStream;
  /** Use these instead of opening stores from the config (tests share them). */
  store?: Store;
  state?: SharedState;
  /** PostgreSQL schema for this instance (tests give each file its own). */
  pgSchema?: string;
  /** Collect process metrics (CPU, memory, event loop); on in main.ts. */
  defaultMetrics?: boolean;
}

export type SvcApp = FastifyInstance & { withTypeProvider(): FastifyInstance };

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Builds the whole server: stores, shared state, the key gate, the admin API and every
 * product area, each an encapsulated plugin. Routes can still be added until `ready()`.
 * Closing the app closes the stores it opened.
 */
export async function buildApp(options: BuildOptions): Promise<FastifyInstance> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const store =
    options.store ??
    (await openStore({
      databaseUrl: config.databaseUrl,
      sqliteFile: `${config.dataDir}/svc.sqlite`,
      pgSchema: options.pgSchema,
    }));
  const state = options.state ?? openSharedState(config.redisUrl, config.redisPrefix);
  const metrics = new Metrics({ defaultMetrics: options.defaultMetrics });
  const keyStore = new KeyStore(store, state, clock, config.keyCacheTtlMs);
  await keyStore.start();
  const projects = new ProjectService(store, keyStore, clock);
  const keys = new KeyService(store, projects, keyStore, clock);
  const signingKeys = new SigningKeys(store, clock, config.publicUrl);
  await signingKeys.init();
  const services: Services = {
    config,
    store,
    state,
    clock,
    metrics,
    keyStore,
    projects,
    keys,
    signingKeys,
    events: new DomainEvents(),
    adminGuard: adminTokenGuard(options.adminToken),
    secret: options.secret ?? resolveServerSecret(config),
  };

  const logger = loggerOptions(config.logLevel);
  const app = Fastify({
    logger: options.logStream ? { ...logger, stream: options.logStream } : logger,
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    bodyLimit: config.bodyLimitBytes,
    // Unknown fields are refused (schemas say additionalProperties: false), never silently dropped.
    ajv: {
      customOptions: {
        removeAdditional: false,
        coerceTypes: 'array',
        useDefaults: true,
        allErrors: false,
      },
    },
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers['request-id'] ?? req.headers['x-request-id'];
      if (typeof incoming === 'string' && REQUEST_ID.test(incoming)) return incoming;
      return `req_${randomBytes(12).toString('base64url')}`;
    },
    logController: new LogController({
      disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace',
    }),
    routerOptions: { maxParamLength: 256 },
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorate('svc', services);
  // JSON only: a text/plain body is refused with 415 rather than reaching a schema as a string.
  app.removeContentTypeParser('text/plain');
  app.addHook('onRequest', async (request, reply) => {
    reply.header('Request-Id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    metrics.requestDuration.observe({ route }, reply.elapsedTime / 1000);
  });
  app.addHook('onClose', async () => {
    await keyStore.stop();
    if (!options.state) await state.close();
    if (!options.store) await store.close();
  });
  installErrorHandling(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Svc API',
        version: '1.0.0',
        description:
          'Realtime, Links and Verify behind one key system. Errors are application/problem+json (RFC 9457) with a stable `code`.',
      },
      servers: [{ url: config.publicUrl }],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'A client (svc_pk_) or server (svc_sk_) key',
          },
          projectId: { type: 'apiKey', in: 'header', name: 'X-Project-Id' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'The operator admin token' },
        },
      },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get(
    '/.well-known/jwks.json',
    {
      schema: { tags: ['tokens'], summary: 'The public keys that verify Svc-issued tokens (JWKS)' },
    },
    async (_request, reply) =>
      reply.header('Cache-Control', 'public, max-age=300').send(signingKeys.jwks()),
  );
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const [storeOk, stateOk] = await Promise.all([
      store.ping().catch(() => false),
      state.ping().catch(() => false),
    ]);
    if (!storeOk || !stateOk) {
      return sendProblem(
        reply,
        'service_unavailable',
        `store: ${storeOk ? 'ok' : 'down'}, shared state: ${stateOk ? 'ok' : 'down'}`,
      );
    }
    return { status: 'ready', store: store.dialect, sharedState: state.kind };
  });
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );

  installGate(app, { config, keys: keyStore, state, clock, metrics });
  await app.register(adminRoutes, {
    prefix: '/v1/admin',
    adminToken: options.adminToken,
    projects,
    keys,
  });
  // Product areas: each an encapsulated plugin owning its routes (public ones included).
  await app.register(linksPlugin, { svc: services });
  await app.register(verifyPlugin, { svc: services });
  await app.register(webhooksPlugin, { svc: services });
  await app.register(realtimePlugin, { svc: services });
  return app;
}

import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import type { DestinationStream } from 'pino';
import { Gauge } from 'prom-client';
import { KeyService } from './admin/keys.ts';
import { ProjectService } from './admin/projects.ts';
import { adminRoutes, adminTokenHook } from './admin/routes.ts';
import { AREA_MIGRATIONS, type Config } from './areas.ts';
import { installGate } from './auth/gate.ts';
import { KeyStore } from './auth/key-store.ts';
import { type Clock, systemClock } from './clock.ts';
import { DomainEvents } from './events.ts';
import { clientErrorHandler } from './http/client-errors.ts';
import { installCors } from './http/cors.ts';
import { strictDateTime } from './http/date-time.ts';
import { findInputFault } from './http/input-check.ts';
import { lazyChildLoggerFactory, loggerOptions } from './http/logging.ts';
import { Metrics } from './http/metrics.ts';
import { installOpenApi } from './http/openapi.ts';
import { installErrorHandling, sendProblem } from './http/problem.ts';
import { proxyTrust } from './http/proxy-trust.ts';
import { requestId } from './http/request-id.ts';
import { linksPlugin } from './links/plugin.ts';
import type { MediaService } from './media/service.ts';
import type { Platform } from './platform.ts';
import { realtimePlugin } from './realtime/plugin.ts';
import type { RecordingService } from './recordings/service.ts';
import { Sealer } from './sealing.ts';
import { resolveServerSecret } from './secret.ts';
import { openSharedState, type SharedState } from './state/index.ts';
import { openStore, type Store } from './storage/db.ts';
import { SigningKeys } from './tokens/signing-keys.ts';
import { type DependencyHealth, RETRY_AFTER_SECONDS, within } from './unavailable.ts';
import { verifyPlugin } from './verify/plugin.ts';
import { type WebhooksArea, webhooksPlugin } from './webhooks/plugin.ts';

/** How long `/readyz` waits for each dependency: it answers within a second, always. */
const READY_CHECK_MS = 800;

/**
 * Everything the app holds: the platform's services (each product is handed the part it uses)
 * and the product areas' parts that the composition root exposes (tests reach them through
 * `app.svc`).
 */
export interface Services extends Platform {
  config: Config;
  /** The media area, set by the Realtime plugin. */
  media: MediaService | null;
  /** The recordings area, set by the Realtime plugin. */
  recordings: RecordingService | null;
  /** The webhooks area, set by the Webhooks plugin. */
  webhooks?: WebhooksArea;
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

/**
 * Builds the whole server: stores, shared state, the key gate, the admin API and every
 * product area, each an encapsulated plugin. Routes can still be added until `ready()`.
 * Closing the app closes the stores it opened.
 */
export async function buildApp(options: BuildOptions): Promise<FastifyInstance> {
  const services = await openPlatform(options);
  const { config, store, state, keyStore, projects, keys, metrics } = services;
  const app = createFastify(config, options.logStream);
  app.decorate('svc', services);
  logDependencyChanges(app, [store.health, state.health]);
  new Gauge({
    name: 'svc_dependency_up',
    help: 'Whether this node sees the dependency answering (1) or down (0): store, shared_state',
    labelNames: ['dependency'],
    registers: [metrics.registry],
    collect() {
      this.set({ dependency: 'store' }, store.health.up ? 1 : 0);
      this.set({ dependency: 'shared_state' }, state.health.up ? 1 : 0);
    },
  });
  installRequestHooks(app, metrics);
  app.addHook('onClose', async () => {
    await keyStore.stop();
    if (!options.state) await state.close();
    if (!options.store) await store.close();
  });
  installErrorHandling(app);
  installCors(app, { adminOrigins: config.adminCorsOrigins });
  await installOpenApi(app, config.publicUrl);
  platformRoutes(app, services);

  installGate(app, { config, keys: keyStore, state, clock: services.clock, metrics });
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
  // Every area has declared its settings: record claims a store from before claims lacks.
  app.addHook('onReady', () => projects.reconcileClaims());
  return app;
}

/** The platform's services: stores and shared state (opened unless given), keys, signing. */
async function openPlatform(options: BuildOptions): Promise<Services> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const store =
    options.store ??
    (await openStore({
      databaseUrl: config.databaseUrl,
      sqliteFile: `${config.dataDir}/svc.sqlite`,
      pgSchema: options.pgSchema,
      timeoutMs: config.storeTimeoutMs,
      migrations: AREA_MIGRATIONS,
    }));
  const state =
    options.state ?? openSharedState(config.redisUrl, config.redisPrefix, config.stateTimeoutMs);
  const keyStore = new KeyStore(store, state, clock, config.keyCacheTtlMs);
  await keyStore.start();
  const projects = new ProjectService(store, keyStore, clock);
  const secret = options.secret ?? resolveServerSecret(config);
  const sealer = new Sealer(secret, config.secretPrevious);
  const signingKeys = new SigningKeys(store, clock, config.publicUrl, sealer);
  await signingKeys.init();
  return {
    config,
    store,
    state,
    clock,
    metrics: new Metrics({ defaultMetrics: options.defaultMetrics }),
    keyStore,
    projects,
    keys: new KeyService(store, projects, keyStore, clock),
    signingKeys,
    events: new DomainEvents(),
    secret,
    sealer,
    adminGuard: adminTokenHook(options.adminToken),
    readiness: new Map(),
    media: null,
    recordings: null,
  };
}

/** The Fastify instance with the server's logging, proxy trust, limits and validation rules. */
function createFastify(config: Config, logStream: DestinationStream | undefined) {
  const logger = loggerOptions(config.logLevel);
  return Fastify({
    logger: logStream ? { ...logger, stream: logStream } : logger,
    trustProxy: config.trustProxy.length > 0 ? proxyTrust(config.trustProxy) : false,
    bodyLimit: config.bodyLimitBytes,
    // Unknown fields are refused (schemas say additionalProperties: false), never silently dropped.
    ajv: {
      onCreate: strictDateTime,
      customOptions: {
        removeAdditional: false,
        coerceTypes: 'array',
        useDefaults: true,
        allErrors: false,
        // Errors carry their schema, so that a bad enum value is answered with the allowed ones.
        verbose: true,
      },
    },
    requestIdHeader: false,
    genReqId: requestId,
    logController: new LogController({
      disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace',
    }),
    childLoggerFactory: lazyChildLoggerFactory,
    routerOptions: { maxParamLength: 256 },
    return503OnClosing: true,
    clientErrorHandler,
    // Errors the router raises before any route (a path that is not valid percent-encoding, an
    // over-long parameter) bypass the error handler: answer them as problems too.
    frameworkErrors: (error, _request, reply) =>
      sendProblem(
        reply,
        'invalid_request',
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'A path parameter is longer than 256 characters.'
          : 'The path is not a valid URL.',
      ),
  }).withTypeProvider<TypeBoxTypeProvider>();
}

/** Logs each outage once when it starts and once when it ends, not once per request. */
function logDependencyChanges(app: FastifyInstance, healths: DependencyHealth[]) {
  for (const health of healths) {
    const onDown = (err: Error) =>
      app.log.warn({ err, dependency: health.dependency }, `${health.dependency} unavailable`);
    const onUp = () =>
      app.log.warn({ dependency: health.dependency }, `${health.dependency} available again`);
    health.on('down', onDown).on('up', onUp);
    app.addHook('onClose', (_instance, done) => {
      health.off('down', onDown).off('up', onUp);
      done();
    });
  }
}

/**
 * What every request goes through: its `Request-Id`, JSON bodies only, an absent body as `{}`
 * where every member is optional, the input check, the request metrics. Callback hooks, not
 * async ones: they run on every request and a promise each costs more.
 */
function installRequestHooks(app: FastifyInstance, metrics: Metrics) {
  // JSON only: a text/plain body is refused with 415 rather than reaching a schema as a string.
  app.removeContentTypeParser('text/plain');
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('Request-Id', request.id);
    done();
  });
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined) {
      const body = request.routeOptions.schema?.body as { required?: string[] } | undefined;
      if (body && !body.required?.length) request.body = {};
    }
    done();
  });
  // After each route's schema: finite numbers, no NUL, bounded nesting (http/input-check.ts).
  app.addHook('preHandler', (request, reply, done) => {
    const fault =
      findInputFault(request.params, 'params') ??
      findInputFault(request.query, 'query') ??
      findInputFault(request.body, 'body');
    if (!fault) return done();
    sendProblem(reply, 'invalid_request', `${fault.path} ${fault.message}`, { errors: [fault] });
  });
  app.addHook('onResponse', (request, reply, done) => {
    metrics.request(
      request.routeOptions.url ?? 'unmatched',
      request.method,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });
}

/** The platform's own routes: the token keys (JWKS), health, readiness and metrics. */
function platformRoutes(app: FastifyInstance, services: Services) {
  const { store, state, signingKeys, metrics } = services;
  app.get(
    '/.well-known/jwks.json',
    {
      schema: {
        tags: ['tokens'],
        summary: 'The public keys that verify Svc-issued tokens (JWKS)',
        response: {
          200: {
            description: 'A JSON Web Key Set (RFC 7517) of ES256 public keys',
            type: 'object',
            properties: {
              keys: { type: 'array', items: { type: 'object', additionalProperties: true } },
            },
            required: ['keys'],
          },
        },
      },
    },
    async (_request, reply) =>
      reply.header('Cache-Control', 'public, max-age=300').send(signingKeys.jwks()),
  );
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    // Each check has its own deadline, so a stalled dependency cannot hold the answer past 1 s.
    const [storeOk, stateOk] = await Promise.all([
      within(store.ping(), READY_CHECK_MS, false),
      within(state.ping(), READY_CHECK_MS, false),
    ]);
    if (!storeOk || !stateOk) {
      const check = (ok: boolean, health: DependencyHealth) =>
        ok ? { status: 'up' } : { status: 'down', error: health.lastError ?? 'no answer in time' };
      return sendProblem(
        reply,
        'service_unavailable',
        `store: ${storeOk ? 'up' : 'down'}, shared state: ${stateOk ? 'up' : 'down'}`,
        {
          checks: {
            store: { kind: store.dialect, ...check(storeOk, store.health) },
            sharedState: { kind: state.kind, ...check(stateOk, state.health) },
          },
        },
        { 'Retry-After': String(RETRY_AFTER_SECONDS) },
      );
    }
    const details: Record<string, object> = {};
    for (const [name, read] of services.readiness) details[name] = read();
    return { status: 'ready', store: store.dialect, sharedState: state.kind, ...details };
  });
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
}

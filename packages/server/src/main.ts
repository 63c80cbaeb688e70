#!/usr/bin/env node
import { bootstrapDefaultProject, resolveAdminToken } from './admin/bootstrap.ts';
import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './areas.ts';

async function main() {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`svc: configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const admin = resolveAdminToken(config);
  // Handlers before anything slow: a signal that arrives while starting still stops cleanly
  // (once the app is built, since a half-built one has nothing to close in order).
  const building = buildApp({ config, adminToken: admin.token, defaultMetrics: true });
  let closing = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    // Past the bound, what has not finished is given up: unfinished webhook deliveries come
    // back after their lease, and the exit status says the stop was not clean.
    setTimeout(() => {
      console.error(`svc: still stopping after ${config.shutdownTimeoutMs} ms; exiting`);
      process.exit(1);
    }, config.shutdownTimeoutMs).unref();
    try {
      const app = await building;
      app.log.info({ signal }, 'stopping: no new connections; finishing requests and writes');
      // Closes the listener (new requests get 503), waits for requests in flight, closes
      // WebSockets with 1001 (going away), flushes click batches, lets webhook deliveries in
      // progress finish, then closes the stores.
      await app.close();
      app.log.info('stopped');
      process.exit(0);
    } catch (err) {
      console.error('svc: stopping failed:', err instanceof Error ? err.message : err);
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  const app = await building;
  if (closing) return;
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    await app.close();
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot listen on ${config.host} port ${config.port} (HOST, PORT): ${reason}`);
  }
  // Once listening: a start that cannot listen creates nothing, so the keys of the default
  // project, shown once, are shown by the start that makes them.
  const created = config.bootstrap ? await bootstrapDefaultProject(app.svc) : null;
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const base = `http://localhost:${port}`;

  const lines = [
    '',
    `Svc is running at ${base}  (store: ${app.svc.store.dialect}, shared state: ${app.svc.state.kind})`,
    `  API base:  ${base}/v1        docs: ${base}/docs   OpenAPI: ${base}/openapi.json`,
  ];
  if (admin.generated)
    lines.push(`  Admin token (shown once; kept in ${admin.file}):`, `    ${admin.token}`);
  else if (admin.file) lines.push(`  Admin token: in ${admin.file}`);
  if (created) {
    lines.push(
      '  Created project "default" with every product enabled (these keys are shown once):',
      `    project id:  ${created.project.id}`,
      `    client key:  ${created.clientKey.key}`,
      `    server key:  ${created.serverKey.key}`,
      '  Try:',
      `    curl -s ${base}/v1/admin/projects -H "Authorization: Bearer <admin token>"`,
    );
  }
  lines.push('');
  // Printed to the terminal, not the log: the log must never carry key material.
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((err) => {
  console.error('svc: failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});

import { bootstrapDefaultProject, resolveAdminToken } from './admin/bootstrap.ts';
import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';

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
  const app = await buildApp({ config, adminToken: admin.token, defaultMetrics: true });
  // Handlers first: a signal that arrives while starting still shuts down cleanly.
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 10_000).unref();
    try {
      await app.close();
      clearTimeout(force);
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  const created = config.bootstrap ? await bootstrapDefaultProject(app.svc) : null;
  await app.listen({ port: config.port, host: config.host });
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

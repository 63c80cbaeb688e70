import { LINK_DEFAULT_DEFERRED_WINDOW_SECONDS } from '@svc/protocol';
import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../app.ts';
import { fingerprintKey } from './click-batch.mjs';
import { CLICK_RETENTION_MS } from './click-log.ts';
import { ClickRecorder } from './clicks.ts';
import { publicLinkRoutes } from './redirect.ts';
import { sdkLinkRoutes } from './routes.ts';
import { LinkService } from './service.ts';
import { LinkDirectory, linkSettingsValidator } from './settings.ts';

const PROJECTS_CHANNEL = 'links:projects';

/**
 * The Links area: project link settings, `/v1/sdk/links` (CRUD, resolve, deferred, events,
 * stats), and the public redirect and well-known routes on every link domain.
 */
export const linksPlugin: FastifyPluginAsync<{ svc: Services }> = async (app, { svc }) => {
  const defaultHost = new URL(svc.config.publicUrl).host.toLowerCase();
  const directory = new LinkDirectory(svc.store, svc.clock, defaultHost);
  const clicks = new ClickRecorder(
    svc.store,
    svc.state,
    fingerprintKey(svc.secret),
    app.log,
    undefined,
    undefined,
    svc.config.linksMaxCandidates,
  );
  const service = new LinkService(
    svc.store,
    svc.state,
    svc.clock,
    directory,
    clicks,
    svc.config.publicUrl,
  );
  svc.projects.registerSettings('links', linkSettingsValidator(svc.store, defaultHost));
  // A project changed here: drop our cached settings and tell the other nodes to do the same.
  svc.projects.onChange((projectId) => {
    directory.invalidate();
    service.forgetProject(projectId).catch((err) => app.log.warn({ err }, 'click cleanup failed'));
    svc.state.publish(PROJECTS_CHANNEL, '').catch((err) => app.log.warn({ err }, 'publish failed'));
  });
  const unsubscribers = await Promise.all([
    svc.state.subscribe(PROJECTS_CHANNEL, () => directory.invalidate()),
    service.listen(),
  ]);
  // Answer the other nodes' match questions, and put back the candidates of the clicks still
  // inside a window (served before this node started, here or by a node since stopped).
  const snapshot = await directory.current();
  let windowMs = LINK_DEFAULT_DEFERRED_WINDOW_SECONDS * 1000;
  for (const p of snapshot.projects.values()) {
    windowMs = Math.max(windowMs, p.settings.deferredWindowSeconds * 1000);
  }
  await clicks.start(svc.clock.now(), windowMs);
  // Raw clicks are kept for the longest referrer window, then pruned (their counts stay).
  const prune = () =>
    clicks
      .prune(svc.clock.now() - CLICK_RETENTION_MS)
      .catch((err) => app.log.warn({ err }, 'click log pruning failed'));
  const pruner = setInterval(prune, 3_600_000).unref();
  await prune();
  app.addHook('onClose', async () => {
    clearInterval(pruner);
    await clicks.close();
    await Promise.all(unsubscribers.map((u) => u().catch(() => {})));
  });

  publicLinkRoutes(app, service, directory, svc.front);
  await app.register(sdkLinkRoutes, { prefix: '/v1', service });
};

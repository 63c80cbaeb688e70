import { LINK_DEFAULT_DEFERRED_WINDOW_SECONDS, type Link } from '@svc/protocol';
import type { FastifyPluginAsync } from 'fastify';
import type { PlatformConfig } from '../config.ts';
import type { Platform } from '../platform.ts';
import { CandidateStore } from './candidates.ts';
import { CLICK_RETENTION_MS, ClickRecorder, fingerprintKey } from './clicks.ts';
import type { LinksConfig } from './config.ts';
import { LinkEvents } from './events.ts';
import { DeferredMatcher } from './matching.ts';
import { publicLinkRoutes, Redirector } from './redirect.ts';
import { sdkLinkRoutes } from './routes.ts';
import { LinkService } from './service.ts';
import { LINK_DOMAINS, LinkDirectory, linkSettingsValidator } from './settings.ts';

const PROJECTS_CHANNEL = 'links:projects';

/** What the Links product is given. */
export interface LinksDeps
  extends Pick<Platform, 'store' | 'state' | 'clock' | 'secret' | 'projects'> {
  config: PlatformConfig & { links: LinksConfig };
}

/**
 * The Links area: project link settings, `/v1/sdk/links` (CRUD, resolve, deferred, events,
 * stats), and the public redirect and well-known routes on every link domain.
 */
export const linksPlugin: FastifyPluginAsync<{ svc: LinksDeps }> = async (app, { svc }) => {
  const { store, state, clock, config } = svc;
  const defaultHost = new URL(config.publicUrl).host.toLowerCase();
  const directory = new LinkDirectory(svc.projects, clock, defaultHost);
  const candidates = new CandidateStore(state, config.links.maxCandidates);
  const clicks = new ClickRecorder(store, candidates, fingerprintKey(svc.secret), app.log);
  const toLink = (row: Parameters<LinkService['toLink']>[0]): Link => links.toLink(row);
  const redirector = new Redirector(store, state, clock, directory, clicks, toLink);
  // Stored and answered even when other nodes cannot be told: their entry lasts out its 10 s.
  const links = new LinkService(store, clock, directory, config.publicUrl, (domain, slug) =>
    redirector.changed(domain, slug).catch((err) => app.log.warn({ err }, 'link change unsent')),
  );
  const events = new LinkEvents(store, clock, directory, links, clicks);
  const matcher = new DeferredMatcher(store, clock, directory, links, events, clicks, candidates);

  svc.projects.registerSettings('links', linkSettingsValidator(defaultHost), LINK_DOMAINS);
  // A project changed here: drop our cached settings and tell the other nodes to do the same.
  svc.projects.onChange((projectId, deleted) => {
    directory.invalidate();
    const forgotten = deleted ? matcher.forgetProject(projectId) : null;
    forgotten?.catch((err) => app.log.warn({ err }, 'click cleanup failed'));
    state.publish(PROJECTS_CHANNEL, '').catch((err) => app.log.warn({ err }, 'publish failed'));
  });
  const unsubscribers = await Promise.all([
    state.subscribe(PROJECTS_CHANNEL, () => directory.invalidate()),
    redirector.listen(),
  ]);
  // Candidates kept in process are gone after a restart: put back those of the clicks still
  // inside the longest window of any project.
  if (!candidates.durable) {
    const projects = [...(await directory.current()).projects.values()];
    const windows = projects.map((p) => p.settings.deferredWindowSeconds);
    const windowMs = Math.max(LINK_DEFAULT_DEFERRED_WINDOW_SECONDS, ...windows) * 1000;
    await clicks.restoreCandidates(clock.now(), windowMs, config.links.maxCandidates);
  }
  // Raw clicks are kept for the longest referrer window, then pruned (their counts stay).
  const prune = () =>
    clicks
      .prune(clock.now() - CLICK_RETENTION_MS)
      .catch((err) => app.log.warn({ err }, 'click pruning failed'));
  const pruner = setInterval(prune, 3_600_000).unref();
  await prune();
  app.addHook('onClose', async () => {
    clearInterval(pruner);
    await clicks.close();
    await Promise.all(unsubscribers.map((u) => u().catch(() => {})));
  });

  publicLinkRoutes(app, redirector, directory);
  await app.register(sdkLinkRoutes, { prefix: '/v1', links, events, matcher });
};

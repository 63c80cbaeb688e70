import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  CreateLinkBody,
  DeferredBody,
  DeferredResult,
  Link,
  LinkEventAccepted,
  LinkEventBody,
  LinkIdParams,
  LinkList,
  LinkStats,
  LinkStatsQuery,
  ListLinksQuery,
  ResolvedLink,
  ResolveLinkQuery,
  UpdateLinkBody,
} from '@svc/protocol';
import type { FastifySchema } from 'fastify';
import type { LinkEvents } from './events.ts';
import type { DeferredMatcher } from './matching.ts';
import type { LinkService } from './service.ts';

/**
 * A route's options: the key gate for Links, the body limit (64 KiB: params ≤ 8 KiB plus the
 * rest), its summary and schemas.
 */
function route<S extends FastifySchema>(summary: string, schema: S) {
  return {
    config: { auth: { product: 'links', clientKeys: true } as const },
    bodyLimit: 64 * 1024,
    schema: { tags: ['links'], summary, ...schema },
  };
}

/** `/sdk/links`: every route takes client keys with the `links` scope, or server keys. */
export const sdkLinkRoutes: FastifyPluginAsyncTypebox<{
  links: LinkService;
  events: LinkEvents;
  matcher: DeferredMatcher;
}> = async (app, { links, events, matcher }) => {
  app.post(
    '/sdk/links',
    route('Create a link', { body: CreateLinkBody, response: { 201: Link } }),
    async (req, reply) => reply.code(201).send(await links.create(req.auth!.projectId, req.body)),
  );
  app.get(
    '/sdk/links',
    route('List links (newest first), searching slug, URL and external id', {
      querystring: ListLinksQuery,
      response: { 200: LinkList },
    }),
    async (req) => links.list(req.auth!.projectId, req.query),
  );
  app.get(
    '/sdk/links/resolve',
    route('The link an app was opened with (by URL or slug); records an open', {
      querystring: ResolveLinkQuery,
      response: { 200: ResolvedLink },
    }),
    async (req) => ({ link: await events.resolve(req.auth!.projectId, req.query) }),
  );
  app.post(
    '/sdk/links/deferred',
    route('Match an app’s first open to an earlier click (deferred deep link)', {
      body: DeferredBody,
      response: { 200: DeferredResult },
    }),
    async (req) =>
      matcher.deferred(req.auth!.projectId, req.body, req.ip, req.headers['user-agent'] ?? ''),
  );
  app.post(
    '/sdk/links/events',
    route('Record a link event (click, install, open, reinstall, custom)', {
      body: LinkEventBody,
      response: { 202: LinkEventAccepted },
    }),
    async (req, reply) =>
      reply.code(202).send({ id: await events.recordEvent(req.auth!.projectId, req.body) }),
  );
  app.get(
    '/sdk/links/:linkId',
    route('Get a link', { params: LinkIdParams, response: { 200: Link } }),
    async (req) => links.get(req.auth!.projectId, req.params.linkId),
  );
  app.patch(
    '/sdk/links/:linkId',
    route('Update a link (null clears a field)', {
      params: LinkIdParams,
      body: UpdateLinkBody,
      response: { 200: Link },
    }),
    async (req) => links.update(req.auth!.projectId, req.params.linkId, req.body),
  );
  app.delete(
    '/sdk/links/:linkId',
    route('Delete a link and its clicks and events', { params: LinkIdParams }),
    async (req, reply) => {
      await links.delete(req.auth!.projectId, req.params.linkId);
      return reply.code(204).send();
    },
  );
  app.get(
    '/sdk/links/:linkId/stats',
    route('Event counts per type and per UTC day', {
      params: LinkIdParams,
      querystring: LinkStatsQuery,
      response: { 200: LinkStats },
    }),
    async (req) =>
      events.stats(req.auth!.projectId, req.params.linkId, req.query.from, req.query.to),
  );
};

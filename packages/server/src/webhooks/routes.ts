import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  CreatedWebhookEndpoint,
  CreateWebhookBody,
  ResourceId,
  RotatedWebhookSecret,
  RotateWebhookSecretBody,
  UpdateWebhookBody,
  WebhookDeliveriesQuery,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookTestResult,
} from '@svc/protocol';
import type { onRequestAsyncHookHandler } from 'fastify';
import type { WebhookEndpoints } from './endpoints.ts';

const Id = ResourceId;
const ProjectParams = Type.Object({ projectId: Id });
const EndpointParams = Type.Object({ projectId: Id, webhookId: Id });
const DeliveryParams = Type.Object({ projectId: Id, webhookId: Id, deliveryId: Id });

/** Webhook endpoints under `/v1/admin/projects/{projectId}/webhooks`, admin token only. */
export const webhookAdminRoutes: FastifyPluginAsyncTypebox<{
  endpoints: WebhookEndpoints;
  adminGuard: onRequestAsyncHookHandler;
}> = async (app, { endpoints, adminGuard }) => {
  app.addHook('onRequest', adminGuard);
  const tags = ['webhooks'];
  const security = [{ adminToken: [] }];
  const base = '/projects/:projectId/webhooks';

  app.post(
    base,
    {
      schema: {
        tags,
        security,
        summary: 'Create a webhook endpoint; the signing secret is shown only here',
        params: ProjectParams,
        body: CreateWebhookBody,
        response: { 201: CreatedWebhookEndpoint },
      },
    },
    async (req, reply) =>
      reply.code(201).send(await endpoints.create(req.params.projectId, req.body)),
  );
  app.get(
    base,
    {
      schema: {
        summary: "List a project's webhook endpoints",
        tags,
        security,
        params: ProjectParams,
        response: { 200: Type.Object({ items: Type.Array(WebhookEndpoint) }) },
      },
    },
    async (req) => ({ items: await endpoints.list(req.params.projectId) }),
  );
  app.get(
    `${base}/:webhookId`,
    {
      schema: {
        summary: 'Get a webhook endpoint',
        tags,
        security,
        params: EndpointParams,
        response: { 200: WebhookEndpoint },
      },
    },
    async (req) => endpoints.get(req.params.projectId, req.params.webhookId),
  );
  app.patch(
    `${base}/:webhookId`,
    {
      schema: {
        summary: "Update a webhook endpoint's URL, events, description or switch",
        tags,
        security,
        params: EndpointParams,
        body: UpdateWebhookBody,
        response: { 200: WebhookEndpoint },
      },
    },
    async (req) => endpoints.update(req.params.projectId, req.params.webhookId, req.body),
  );
  app.delete(
    `${base}/:webhookId`,
    { schema: { summary: 'Delete a webhook endpoint', tags, security, params: EndpointParams } },
    async (req, reply) => {
      await endpoints.delete(req.params.projectId, req.params.webhookId);
      return reply.code(204).send();
    },
  );
  app.post(
    `${base}/:webhookId/rotate-secret`,
    {
      schema: {
        tags,
        security,
        summary: 'New signing secret; the previous one keeps signing during the overlap',
        params: EndpointParams,
        body: Type.Optional(RotateWebhookSecretBody),
        response: { 201: RotatedWebhookSecret },
      },
    },
    async (req, reply) =>
      reply
        .code(201)
        .send(
          await endpoints.rotateSecret(
            req.params.projectId,
            req.params.webhookId,
            req.body?.overlapSeconds ?? 86_400,
          ),
        ),
  );
  app.post(
    `${base}/:webhookId/test`,
    {
      schema: {
        tags,
        security,
        summary: 'Queue a webhook.test event for this endpoint',
        params: EndpointParams,
        response: { 202: WebhookTestResult },
      },
    },
    async (req, reply) =>
      reply.code(202).send(await endpoints.sendTest(req.params.projectId, req.params.webhookId)),
  );
  app.get(
    `${base}/:webhookId/deliveries`,
    {
      schema: {
        tags,
        security,
        summary: 'Deliveries to this endpoint, newest first, with their attempts',
        params: EndpointParams,
        querystring: WebhookDeliveriesQuery,
        response: { 200: WebhookDeliveryList },
      },
    },
    async (req) => endpoints.listDeliveries(req.params.projectId, req.params.webhookId, req.query),
  );
  app.post(
    `${base}/:webhookId/deliveries/:deliveryId/retry`,
    {
      schema: {
        tags,
        security,
        summary: 'Attempt this delivery again now',
        params: DeliveryParams,
        response: { 202: WebhookDelivery },
      },
    },
    async (req, reply) =>
      reply
        .code(202)
        .send(
          await endpoints.retryDelivery(
            req.params.projectId,
            req.params.webhookId,
            req.params.deliveryId,
          ),
        ),
  );
};

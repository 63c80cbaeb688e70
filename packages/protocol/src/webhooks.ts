import { type Static, Type } from '@sinclair/typebox';
import { PageMeta, Timestamp } from './common.ts';

/**
 * Event types a webhook endpoint can subscribe to. `webhook.test` is sent only on demand
 * (`POST …/webhooks/{id}/test`) and reaches the endpoint whatever its filter.
 */
export const WEBHOOK_EVENT_TYPES = [
  'room.started',
  'room.ended',
  'participant.joined',
  'participant.left',
  'invitation.created',
  'invitation.updated',
  'recording.started',
  'recording.completed',
  'recording.failed',
  'webhook.test',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const EventType = Type.Union(
  WEBHOOK_EVENT_TYPES.map((t) => Type.Literal(t)),
  { description: 'A webhook event type' },
);

const WebhookUrl = Type.String({
  minLength: 8,
  maxLength: 2048,
  description:
    'An absolute http(s) URL. Refused when it resolves to a loopback, private, link-local or metadata address (unless the server runs with SVC_WEBHOOK_ALLOW_PRIVATE=true).',
  examples: ['https://example.com/hooks/svc'],
});
const EventFilter = Type.Array(EventType, {
  uniqueItems: true,
  maxItems: WEBHOOK_EVENT_TYPES.length,
  description: 'Event types to send; empty or absent means every type.',
});

/** The body every webhook carries (Standard Webhooks payload). */
export const WebhookEvent = Type.Object(
  {
    type: Type.String({ examples: ['participant.joined'] }),
    id: Type.String({ description: 'Also the `webhook-id` header; stable across retries' }),
    createdAt: Timestamp,
    projectId: Type.String(),
    data: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'WebhookEvent' },
);
export type WebhookEvent = Static<typeof WebhookEvent>;

export const WebhookEndpoint = Type.Object(
  {
    id: Type.String({ examples: ['whe_01JD…'] }),
    projectId: Type.String(),
    url: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    events: Type.Array(Type.String(), { description: 'Empty means every type' }),
    enabled: Type.Boolean(),
    disabledReason: Type.Union(
      [Type.Literal('gone'), Type.Literal('failing'), Type.Literal('manual'), Type.Null()],
      {
        description:
          '`gone`: the receiver answered 410 and the endpoint was switched off; `failing`: every attempt failed for SVC_WEBHOOK_DISABLE_AFTER (5 days by default) and the endpoint was switched off; `manual`: an operator switched it off. Re-enable with `enabled: true`',
      },
    ),
    failingSince: Type.Union([Timestamp, Type.Null()], {
      description:
        'When the current run of failed attempts began (null while the endpoint answers 2xx); the endpoint is disabled once it has lasted SVC_WEBHOOK_DISABLE_AFTER',
    }),
    previousSecretExpiresAt: Type.Union([Timestamp, Type.Null()], {
      description: 'While set, deliveries are signed with the previous secret too',
    }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'WebhookEndpoint' },
);
export type WebhookEndpoint = Static<typeof WebhookEndpoint>;

/** An endpoint with its signing secret: returned once, at creation. */
export const CreatedWebhookEndpoint = Type.Composite(
  [WebhookEndpoint, Type.Object({ secret: Type.String({ examples: ['whsec_…'] }) })],
  { $id: 'CreatedWebhookEndpoint' },
);
export type CreatedWebhookEndpoint = Static<typeof CreatedWebhookEndpoint>;

export const CreateWebhookBody = Type.Object(
  {
    url: WebhookUrl,
    events: Type.Optional(EventFilter),
    enabled: Type.Optional(Type.Boolean({ default: true })),
    description: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
export type CreateWebhookBody = Static<typeof CreateWebhookBody>;

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(WebhookUrl),
    events: Type.Optional(EventFilter),
    enabled: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.Union([Type.String({ maxLength: 500 }), Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateWebhookBody = Static<typeof UpdateWebhookBody>;

export const RotateWebhookSecretBody = Type.Object(
  {
    overlapSeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 7 * 24 * 3600,
        default: 86_400,
        description: 'How long the previous secret keeps signing deliveries (24 h by default)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type RotateWebhookSecretBody = Static<typeof RotateWebhookSecretBody>;

export const RotatedWebhookSecret = Type.Object({
  id: Type.String(),
  secret: Type.String({ examples: ['whsec_…'] }),
  previousSecretExpiresAt: Type.Union([Timestamp, Type.Null()]),
});

export const WebhookTestResult = Type.Object({
  eventId: Type.String(),
  deliveryId: Type.String(),
});

export const WebhookAttempt = Type.Object({
  attempt: Type.Integer({ minimum: 1 }),
  attemptedAt: Timestamp,
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  latencyMs: Type.Integer({ minimum: 0 }),
  error: Type.Union([Type.String(), Type.Null()]),
  responseBody: Type.Union([Type.String(), Type.Null()], {
    description: 'The first bytes of the receiver’s answer (truncated)',
  }),
  nextAttemptAt: Type.Union([Timestamp, Type.Null()], {
    description: 'When the next attempt was scheduled after this one; null when none',
  }),
});
export type WebhookAttempt = Static<typeof WebhookAttempt>;

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'skipped'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

export const WebhookDelivery = Type.Object(
  {
    id: Type.String({ examples: ['whd_01JD…'] }),
    endpointId: Type.String(),
    eventId: Type.String(),
    eventType: Type.String(),
    orderingKey: Type.Union([Type.String(), Type.Null()]),
    status: Type.Union(
      WEBHOOK_DELIVERY_STATUSES.map((s) => Type.Literal(s)),
      {
        description:
          '`pending`: waiting for (or in) an attempt; `succeeded`: a 2xx came back; `failed`: the retry schedule ran out or the endpoint answered 410; `skipped`: not sent because the endpoint or the project switch was off',
      },
    ),
    attemptCount: Type.Integer({ minimum: 0 }),
    nextAttemptAt: Type.Union([Timestamp, Type.Null()]),
    lastStatusCode: Type.Union([Type.Integer(), Type.Null()]),
    lastError: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    attempts: Type.Array(WebhookAttempt),
  },
  { $id: 'WebhookDelivery' },
);
export type WebhookDelivery = Static<typeof WebhookDelivery>;

export const WebhookDeliveriesQuery = Type.Object(
  {
    status: Type.Optional(Type.Union(WEBHOOK_DELIVERY_STATUSES.map((s) => Type.Literal(s)))),
    page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  },
  { additionalProperties: false },
);

export const WebhookDeliveryList = Type.Object({
  items: Type.Array(WebhookDelivery),
  meta: PageMeta,
});

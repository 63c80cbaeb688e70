/**
 * @svc/server-sdk: the Svc server library for Node backends (server key). See README.md.
 */
export { SvcError, type SvcErrorCode } from '@svc/client';
export { DEFAULT_RETRY_POLICY, type RetryPolicy } from './http.ts';
export {
  LinksApi,
  type Page,
  RecordingsApi,
  RoomsApi,
  SvcServer,
  type SvcServerOptions,
  TokensApi,
  VerifyApi,
  WebhookEndpointsApi,
} from './server.ts';
export { SvcWebhookError, type SvcWebhookEvent, WebhookReceiver } from './webhooks.ts';

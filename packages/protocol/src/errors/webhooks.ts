import type { ErrorDefinitions } from './types.ts';

/** Webhooks (admin API) codes. */
export const WEBHOOKS_ERRORS = {
  webhook_endpoint_not_found: { status: 404, title: 'The webhook endpoint was not found.' },
  webhook_delivery_not_found: { status: 404, title: 'The webhook delivery was not found.' },
  invalid_webhook_url: {
    status: 400,
    title: 'The webhook URL must be an absolute http(s) URL without credentials.',
  },
  webhook_url_unresolvable: { status: 400, title: 'The webhook URL host does not resolve.' },
  webhook_url_forbidden: {
    status: 400,
    title:
      'The webhook URL resolves to a loopback, private, link-local or metadata address, which is refused.',
  },
  webhooks_disabled: { status: 409, title: 'Webhooks are switched off for this project.' },
  webhook_endpoint_disabled: { status: 409, title: 'The webhook endpoint is disabled.' },
  webhook_endpoint_limit: {
    status: 409,
    title: 'The project already has the maximum number of webhook endpoints.',
  },
} as const satisfies ErrorDefinitions;

import type { ErrorDefinitions } from './types.ts';

/** Codes shared by every area: request shape, authentication, authorisation, limits. */
export const CORE_ERRORS = {
  // Request shape
  invalid_request: { status: 400, title: 'The request failed validation.' },
  malformed_json: { status: 400, title: 'The request body is not valid JSON.' },
  missing_project_id: { status: 400, title: 'The X-Project-Id header is required.' },
  conflicting_credentials: {
    status: 400,
    title: 'Authorization and X-Api-Key carry different keys.',
  },
  invalid_header: { status: 400, title: 'A request header has an invalid value.' },
  unsupported_media_type: {
    status: 415,
    title: 'The request body must be sent as application/json.',
  },
  payload_too_large: { status: 413, title: 'The request body is too large.' },
  headers_too_large: { status: 431, title: 'The request headers are too large.' },
  request_timeout: { status: 408, title: 'The request was not received in time.' },
  method_not_allowed: { status: 405, title: 'The method is not allowed on this path.' },

  // Authentication
  missing_api_key: { status: 401, title: 'An API key is required.' },
  invalid_api_key: { status: 401, title: 'The API key is not valid.' },
  api_key_expired: { status: 401, title: 'The API key has expired.' },
  api_key_revoked: { status: 401, title: 'The API key has been revoked.' },
  missing_admin_token: { status: 401, title: 'An admin token is required.' },
  invalid_admin_token: { status: 401, title: 'The admin token is not valid.' },

  // Authorisation
  product_not_enabled: { status: 403, title: 'The project has not enabled this product.' },
  insufficient_scope: { status: 403, title: 'The client key lacks the scope for this product.' },
  server_key_required: { status: 403, title: 'This operation requires a server key.' },
  origin_not_allowed: { status: 403, title: 'The request origin is not allowed for this key.' },
  bundle_id_not_allowed: {
    status: 403,
    title: 'The app bundle id is not allowed for this key.',
  },
  ip_not_allowed: { status: 403, title: 'The client IP address is not allowed for this key.' },

  // Not found
  not_found: { status: 404, title: 'The resource was not found.' },
  project_not_found: { status: 404, title: 'The project was not found.' },
  key_not_found: { status: 404, title: 'The API key was not found.' },

  // Conflicts
  key_exists: { status: 409, title: 'That key is already registered.' },
  api_key_already_rotated: {
    status: 409,
    title: 'The API key has already been rotated; rotate its replacement instead.',
  },

  // Limits
  rate_limited: { status: 429, title: 'Too many requests; retry after the indicated delay.' },

  // Server
  internal_error: { status: 500, title: 'An internal error occurred.' },
  service_unavailable: { status: 503, title: 'The service is temporarily unavailable.' },
} as const satisfies ErrorDefinitions;

import type { ErrorDefinitions } from './types.ts';

/** Links codes. */
export const LINKS_ERRORS = {
  link_not_found: { status: 404, title: 'The link was not found.' },
  link_expired: { status: 410, title: 'The link has expired.' },
  slug_taken: { status: 409, title: 'That slug is already used on this domain.' },
  external_id_taken: { status: 409, title: 'That external id is already used in this project.' },
  domain_taken: { status: 409, title: 'That link domain belongs to another project.' },
  domain_not_allowed: {
    status: 400,
    title: 'The domain is not one of the project’s link domains.',
  },
  invalid_destination: {
    status: 400,
    title: 'The destination must be an absolute http:// or https:// URL.',
  },
  destination_not_allowed: {
    status: 400,
    title: 'The destination host is not in the project’s allowed destinations.',
  },
  params_too_large: { status: 400, title: 'The link params exceed 8 KiB of JSON.' },
} as const satisfies ErrorDefinitions;

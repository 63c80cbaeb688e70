import { isTimestampInRange } from '@svc/protocol';
import type { FastifyServerOptions } from 'fastify';

/** The validator's Ajv instance (the type through Fastify's options: ajv is not a dependency). */
type Ajv = Parameters<NonNullable<NonNullable<FastifyServerOptions['ajv']>['onCreate']>>[0];
type FormatCompare = (a: string, b: string) => number | undefined;

/**
 * Makes Ajv's `date-time` (ajv-formats' full RFC 3339 check, which the compiler has added) also
 * require an instant the server can store and write back: a leap second (`…T23:59:60Z`) or an
 * offset that moves the instant past the year 9999 in UTC (`9999-12-31T23:59:59-23:59`) would
 * pass the syntax, then fail `Date.parse` or `toISOString()`, or be stored and break every later
 * read of its row. Refused as `invalid_request` naming the field, like any other format.
 */
export function strictDateTime(ajv: Ajv) {
  const syntax = ajv.formats['date-time'];
  if (
    typeof syntax !== 'object' ||
    !('validate' in syntax) ||
    typeof syntax.validate !== 'function'
  )
    throw new Error('the date-time format of ajv-formats is missing');
  const valid = syntax.validate as (value: string) => boolean;
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (value: string) => valid(value) && isTimestampInRange(value),
    compare: 'compare' in syntax ? (syntax.compare as FormatCompare) : undefined,
  });
}

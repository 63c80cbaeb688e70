/**
 * The checks every input value passes after its schema, on HTTP and on the realtime socket alike:
 * what a schema cannot say, or what the validator lets through.
 *
 * - Numbers are finite. Ajv's coercion turns the strings "Infinity" and "1e309" into `Infinity`
 *   and then skips `minimum`/`maximum` for non-finite values, so bounds alone do not hold.
 * - Strings and object keys hold no NUL (U+0000): PostgreSQL's `text` and `jsonb` refuse it, so
 *   the same value would be stored on SQLite and fail on PostgreSQL. Refused on both.
 * - Strings and object keys are well-formed UTF-16: no lone surrogate (`"\ud800"` in JSON), which
 *   no UTF-8 store can hold. SQLite would give back three U+FFFD and PostgreSQL one, so the value
 *   read back would differ from the one accepted, and differ between the stores.
 * - Nesting is at most {@link MAX_INPUT_DEPTH} levels: deeper values are refused before any code
 *   recurses over them.
 */

/** The deepest nesting of objects and arrays an input may have. */
export const MAX_INPUT_DEPTH = 32;

/** Why a value was refused: the path of the offending member (`body.a.b`) and what is wrong. */
export interface InputFault {
  path: string;
  message: string;
}

/**
 * Returns the first fault in `value` (walked depth first, `path` naming its root), or null when
 * the value is fine. Never throws, whatever the value.
 */
export function findInputFault(value: unknown, path: string): InputFault | null {
  return walk(value, path, 0);
}

// String.prototype.isWellFormed is in Node 20 (ES2024); the project's TypeScript lib is ES2022.
const isWellFormed = (s: string) => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** A key as a path segment: NUL and lone surrogates written as `\uXXXX` escapes. */
const printable = (key: string) =>
  Array.from(key, (c) => {
    const unit = c.charCodeAt(0);
    const hidden = c.length === 1 && (unit === 0 || (unit >= 0xd800 && unit <= 0xdfff));
    return hidden ? `\\u${unit.toString(16).padStart(4, '0')}` : c;
  }).join('');

const LONE_SURROGATE = 'must be well-formed Unicode (no lone UTF-16 surrogate)';

function walk(value: unknown, path: string, depth: number): InputFault | null {
  switch (typeof value) {
    case 'string':
      if (value.includes('\u0000')) return { path, message: 'must not contain NUL (U+0000)' };
      return isWellFormed(value) ? null : { path, message: LONE_SURROGATE };
    case 'number':
      return Number.isFinite(value) ? null : { path, message: 'must be a finite number' };
    case 'object': {
      if (value === null) return null;
      if (depth >= MAX_INPUT_DEPTH)
        return { path, message: `is nested deeper than ${MAX_INPUT_DEPTH} levels` };
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const fault = walk(value[i], `${path}[${i}]`, depth + 1);
          if (fault) return fault;
        }
        return null;
      }
      for (const key of Object.keys(value)) {
        if (key.includes('\u0000'))
          return { path: `${path}.${printable(key)}`, message: 'has a NUL (U+0000) in its name' };
        if (!isWellFormed(key))
          return {
            path: `${path}.${printable(key)}`,
            message: 'has a lone UTF-16 surrogate in its name',
          };
        const fault = walk((value as Record<string, unknown>)[key], `${path}.${key}`, depth + 1);
        if (fault) return fault;
      }
      return null;
    }
    default:
      return null;
  }
}

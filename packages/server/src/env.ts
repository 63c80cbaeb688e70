/** Reading configuration from the environment: one parser for every area's config section. */

/** A bad configuration value: the server refuses to start and names the variable. */
export class ConfigError extends Error {}

/** An integer from `min` to `max` in `env[name]`; `fallback` when unset or empty. */
export function envInt(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** `true`/`1`/`yes` or `false`/`0`/`no` in `env[name]`; `fallback` when unset or empty. */
export function envBool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

export const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** One duration in `env[name]` (`30d`, `12h`, `500ms`; a bare number is seconds), in ms. */
export function envDuration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const raw = (env[name] || fallback).trim();
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw);
  const ms = m ? Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? 's']!) : Number.NaN;
  if (!Number.isFinite(ms) || ms > 3650 * 86_400_000) {
    throw new ConfigError(`${name} must be a duration like 30d, 12h, 90s or 0, got "${raw}"`);
  }
  return ms;
}

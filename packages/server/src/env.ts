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

import { loadPlatformConfig, type PlatformConfig } from './config.ts';
import { type LinksConfig, loadLinksConfig } from './links/config.ts';
import { linksMigrations } from './links/migrations.ts';
import { loadMediaConfig, type MediaConfig } from './media/config.ts';
import { loadRealtimeConfig, type RealtimeConfig } from './realtime/config.ts';
import { realtimeMigrations } from './realtime/migrations.ts';
import type { Migrations } from './storage/migrations.ts';
import { verifyMigrations } from './verify/migrations.ts';
import { loadVerifyConfig, type VerifyConfig } from './verify/sms-config.ts';
import { loadWebhooksConfig, type WebhooksConfig } from './webhooks/config.ts';
import { webhooksMigrations } from './webhooks/migrations.ts';

// The composition root's list of product areas (with app.ts): storage runs their migrations and
// the server reads their config sections, but neither storage nor the platform config imports a
// product.

/** Every product area's migrations, each numbered in its area's own range. */
export const AREA_MIGRATIONS: Migrations = {
  ...linksMigrations,
  ...verifyMigrations,
  ...webhooksMigrations,
  ...realtimeMigrations,
};

/** Everything the server reads from its environment: the platform's settings and each product's section. */
export interface Config extends PlatformConfig {
  links: LinksConfig;
  verify: VerifyConfig;
  webhooks: WebhooksConfig;
  realtime: RealtimeConfig;
  media: MediaConfig;
}

/** Reads and validates the configuration; throws `ConfigError` with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const platform = loadPlatformConfig(env);
  return {
    ...platform,
    links: loadLinksConfig(env),
    verify: loadVerifyConfig(env),
    webhooks: loadWebhooksConfig(env),
    realtime: loadRealtimeConfig(env),
    media: loadMediaConfig(env, platform.dataDir),
  };
}

export { ConfigError } from './env.ts';

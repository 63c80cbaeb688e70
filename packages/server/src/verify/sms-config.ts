import { ConfigError } from '../env.ts';

/**
 * The server-wide SMS sender, from the environment: used by every project that has no
 * `settings.verify.sender` of its own.
 *
 * - `SVC_SMS_SENDER`: `console` (default; writes messages to the server log) or `twilio`.
 * - `SVC_TWILIO_ACCOUNT_SID`, `SVC_TWILIO_AUTH_TOKEN`: required with `twilio`.
 * - `SVC_TWILIO_FROM` or `SVC_TWILIO_MESSAGING_SERVICE_SID`: one is required with `twilio`.
 * - `SVC_TWILIO_BASE_URL` (`https://api.twilio.com`): any Twilio-compatible Messages API.
 */
export type SmsSenderConfig =
  | { type: 'console' }
  | {
      type: 'twilio';
      accountSid: string;
      authToken: string;
      from?: string;
      messagingServiceSid?: string;
      baseUrl: string;
    };

export const TWILIO_DEFAULT_BASE_URL = 'https://api.twilio.com';

/** Reads the SMS sender configuration; calls `fail` with a message naming the variable. */
export function loadSmsSenderConfig(
  env: NodeJS.ProcessEnv,
  fail: (message: string) => never,
): SmsSenderConfig {
  const type = env.SVC_SMS_SENDER || 'console';
  if (type === 'console') return { type };
  if (type !== 'twilio') fail(`SVC_SMS_SENDER must be console or twilio, got "${type}"`);
  const accountSid = env.SVC_TWILIO_ACCOUNT_SID;
  const authToken = env.SVC_TWILIO_AUTH_TOKEN;
  if (!accountSid) fail('SVC_TWILIO_ACCOUNT_SID is required when SVC_SMS_SENDER=twilio');
  if (!authToken) fail('SVC_TWILIO_AUTH_TOKEN is required when SVC_SMS_SENDER=twilio');
  const from = env.SVC_TWILIO_FROM || undefined;
  const messagingServiceSid = env.SVC_TWILIO_MESSAGING_SERVICE_SID || undefined;
  if (!from && !messagingServiceSid) {
    fail(
      'SVC_TWILIO_FROM or SVC_TWILIO_MESSAGING_SERVICE_SID is required when SVC_SMS_SENDER=twilio',
    );
  }
  const baseUrl = (env.SVC_TWILIO_BASE_URL || TWILIO_DEFAULT_BASE_URL).replace(/\/+$/, '');
  if (!isHttpUrl(baseUrl)) fail(`SVC_TWILIO_BASE_URL is not an http(s) URL: "${baseUrl}"`);
  return {
    type,
    accountSid: accountSid!,
    authToken: authToken!,
    from,
    messagingServiceSid,
    baseUrl,
  };
}

export function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (
      (url.protocol === 'https:' || url.protocol === 'http:') && !url.username && !url.password
    );
  } catch {
    return false;
  }
}

/** Verify's settings section (`SVC_SMS_SENDER`, `SVC_TWILIO_*`). */
export interface VerifyConfig {
  /** The default SMS sender: projects without `settings.verify.sender` use it. */
  smsSender: SmsSenderConfig;
}

/** Reads Verify's section; throws {@link ConfigError} naming the variable. */
export function loadVerifyConfig(env: NodeJS.ProcessEnv): VerifyConfig {
  return {
    smsSender: loadSmsSenderConfig(env, (message) => {
      throw new ConfigError(message);
    }),
  };
}

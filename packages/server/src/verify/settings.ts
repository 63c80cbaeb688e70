import { Value } from '@sinclair/typebox/value';
import { type Project, type VerifyLimits, VerifySettings } from '@svc/protocol';
import type { SettingsValidator } from '../admin/projects.ts';
import { invalidField } from '../http/problem.ts';
import type { VerifySecrets } from './secrets.ts';
import { isHttpUrl, type SmsSenderConfig, TWILIO_DEFAULT_BASE_URL } from './sms-config.ts';

/** The limits in force when a project sets none (see docs/verify.md). */
export const DEFAULT_LIMITS: Required<VerifyLimits> = {
  codeTtlSeconds: 600,
  resendCooldownSeconds: 60,
  maxSendsPerVerification: 5,
  maxChecksPerVerification: 5,
  sendsPerNumberPerHour: 10,
  sendsPerIpPerHour: 50,
  checksPerIpPerHour: 120,
  tokenTtlSeconds: 600,
};

/** A project's Verify settings as the service uses them. */
export interface EffectiveSettings {
  limits: Required<VerifyLimits>;
  testNumbers: Map<string, string>;
  allowedCountries: Set<string> | null;
  /** null: the server's default sender (environment). */
  sender: SmsSenderConfig | null;
}

function invalid(path: string, message: string): never {
  throw invalidField(`body.settings.verify${path}`, message, `settings.verify${path} ${message}`);
}

/**
 * Validates and normalises `settings.verify` for `PATCH /admin/projects/{id}`: the Twilio
 * auth token is sealed (never stored or shown in clear); omitting it keeps the stored one when
 * the account is unchanged.
 */
export function verifySettingsValidator(secrets: VerifySecrets): SettingsValidator {
  return (value: unknown, project: Project) => {
    if (!Value.Check(VerifySettings, value)) {
      const first = Value.Errors(VerifySettings, value).First();
      invalid(first ? first.path.replaceAll('/', '.') : '', first?.message ?? 'is invalid');
    }
    const settings = structuredClone(value) as VerifySettings;
    const seen = new Set<string>();
    for (const [i, t] of (settings.testNumbers ?? []).entries()) {
      if (seen.has(t.phoneNumber)) invalid(`.testNumbers.${i}.phoneNumber`, 'is listed twice');
      seen.add(t.phoneNumber);
    }
    const sender = settings.sender;
    if (sender?.type === 'twilio') {
      if (!sender.from && !sender.messagingServiceSid) {
        invalid('.sender', 'needs from or messagingServiceSid');
      }
      if (sender.baseUrl !== undefined) {
        sender.baseUrl = sender.baseUrl.replace(/\/+$/, '');
        if (!isHttpUrl(sender.baseUrl)) invalid('.sender.baseUrl', 'is not an http(s) URL');
      }
      if (sender.authToken !== undefined) {
        sender.authTokenEncrypted = secrets.seal(sender.authToken);
        delete sender.authToken;
      } else if (sender.authTokenEncrypted !== undefined) {
        if (secrets.open(sender.authTokenEncrypted) === null) {
          invalid('.sender.authTokenEncrypted', 'was not issued by this server');
        }
      } else {
        const current = (project.settings.verify as VerifySettings | undefined)?.sender;
        if (
          current?.type === 'twilio' &&
          current.accountSid === sender.accountSid &&
          current.authTokenEncrypted
        ) {
          sender.authTokenEncrypted = current.authTokenEncrypted;
        } else {
          invalid('.sender.authToken', 'is required');
        }
      }
    }
    return settings as Record<string, unknown>;
  };
}

/** Reads a project's stored (already validated) settings with defaults applied. */
export function effectiveSettings(project: Project, secrets: VerifySecrets): EffectiveSettings {
  const stored = (project.settings.verify ?? {}) as VerifySettings;
  let sender: SmsSenderConfig | null = null;
  if (stored.sender?.type === 'console') sender = { type: 'console' };
  else if (stored.sender?.type === 'twilio') {
    const s = stored.sender;
    sender = {
      type: 'twilio',
      accountSid: s.accountSid,
      authToken: secrets.open(s.authTokenEncrypted ?? '') ?? '',
      from: s.from,
      messagingServiceSid: s.messagingServiceSid,
      baseUrl: s.baseUrl ?? TWILIO_DEFAULT_BASE_URL,
    };
  }
  return {
    limits: { ...DEFAULT_LIMITS, ...stored.limits },
    testNumbers: new Map((stored.testNumbers ?? []).map((t) => [t.phoneNumber, t.code])),
    allowedCountries: stored.allowedCountries ? new Set(stored.allowedCountries) : null,
    sender,
  };
}

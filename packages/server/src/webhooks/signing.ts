import { createHmac, randomBytes } from 'node:crypto';

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes (Standard Webhooks). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The HMAC key of a `whsec_…` secret: its base64 part, decoded. */
export function signingKey(secret: string): Buffer {
  return Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed by the secret's decoded bytes. */
export function signWebhook(
  secret: string | Buffer,
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const key = typeof secret === 'string' ? signingKey(secret) : secret;
  const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest();
  return `v1,${mac.toString('base64')}`;
}

/**
 * The Standard Webhooks headers for one attempt. Several secrets (during a rotation; secrets or
 * their {@link signingKey}s) give a space-separated list of signatures; a receiver accepts the
 * message if any matches.
 */
export function webhookHeaders(
  secrets: readonly (string | Buffer)[],
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature':
      secrets.length === 1
        ? signWebhook(secrets[0], id, timestampSeconds, body)
        : secrets.map((s) => signWebhook(s, id, timestampSeconds, body)).join(' '),
  };
}

import { createHmac, randomBytes } from 'node:crypto';

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes (Standard Webhooks). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed by the secret's decoded bytes. */
export function signWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest();
  return `v1,${mac.toString('base64')}`;
}

/**
 * The Standard Webhooks headers for one attempt. Several secrets (during a rotation) give a
 * space-separated list of signatures; a receiver accepts the message if any matches.
 */
export function webhookHeaders(
  secrets: string[],
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((s) => signWebhook(s, id, timestampSeconds, body)).join(' '),
  };
}

import { WEBHOOK_EVENT_TYPES, type WebhookEvent, type WebhookEventType } from '@svc/protocol';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

/** Why a delivery was refused by {@link WebhookReceiver.receive}. */
export class SvcWebhookError extends Error {
  override readonly name = 'SvcWebhookError';
}

/** A verified event. `type` is one of the event types this library knows, or another string. */
export type SvcWebhookEvent = WebhookEvent & { type: WebhookEventType | (string & {}) };

const KNOWN = new Set<string>(WEBHOOK_EVENT_TYPES);

/**
 * Verifies Standard Webhooks deliveries (`webhook-id`, `webhook-timestamp`, `webhook-signature`)
 * and returns their events. Give it the endpoint's secret (`whsec_…`); during a secret rotation,
 * give both: a delivery signed by either is accepted. Timestamps more than 5 minutes from now are
 * refused (replays).
 */
export class WebhookReceiver {
  private readonly verifiers: Webhook[];

  constructor(secrets: string | string[]) {
    const list = Array.isArray(secrets) ? secrets : [secrets];
    if (list.length === 0) throw new TypeError('WebhookReceiver needs at least one secret');
    this.verifiers = list.map((s) => new Webhook(s));
  }

  /**
   * Verifies `body` (the raw request body, exactly as received) against `headers` and returns the
   * event. Throws {@link SvcWebhookError} when the signature, timestamp or body is not valid.
   */
  receive(
    body: string | Buffer,
    headers: Record<string, string | string[] | undefined> | Headers,
  ): SvcWebhookEvent {
    const plain = normalizeHeaders(headers);
    const text = typeof body === 'string' ? body : body.toString('utf8');
    let lastError: unknown;
    for (const verifier of this.verifiers) {
      try {
        const event = verifier.verify(text, plain) as SvcWebhookEvent;
        if (!event || typeof event !== 'object' || typeof event.type !== 'string') {
          throw new SvcWebhookError('The delivery body is not a Svc event');
        }
        return event;
      } catch (err) {
        if (err instanceof SvcWebhookError) throw err;
        lastError = err;
      }
    }
    const reason = lastError instanceof WebhookVerificationError ? lastError.message : 'invalid';
    throw new SvcWebhookError(`The delivery could not be verified: ${reason}`);
  }

  /** Whether `type` is an event type this version of the library knows. */
  static isKnownType(type: string): type is WebhookEventType {
    return KNOWN.has(type);
  }
}

function normalizeHeaders(
  headers: Record<string, string | string[] | undefined> | Headers,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      out[name] = value;
    });
    return out;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined)
      out[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  return out;
}

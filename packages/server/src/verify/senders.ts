import type { FastifyBaseLogger } from 'fastify';
import { type Clock, iso } from '../clock.ts';

/** One text message to deliver. */
export interface SmsMessage {
  projectId: string;
  /** E.164. */
  to: string;
  body: string;
}

/** A delivery outcome: expected failures are values, not exceptions. */
export type SmsResult = { ok: true; providerMessageId?: string } | { ok: false; error: string };

/** Something that delivers SMS. Implementations never throw and never log the body elsewhere. */
export interface SmsSender {
  readonly kind: 'console' | 'twilio';
  send(message: SmsMessage): Promise<SmsResult>;
}

export interface OutboxItem {
  to: string;
  body: string;
  createdAt: string;
}

/**
 * The console sender's recent messages per project, for development. In memory on this node
 * only (never in the database, so codes at rest stay HMACs), bounded per project.
 */
export class Outbox {
  private byProject = new Map<string, OutboxItem[]>();
  constructor(private perProject = 50) {}

  add(projectId: string, item: OutboxItem) {
    let items = this.byProject.get(projectId);
    if (!items) {
      items = [];
      this.byProject.set(projectId, items);
    }
    items.push(item);
    if (items.length > this.perProject) items.splice(0, items.length - this.perProject);
  }

  /** Newest first. */
  list(projectId: string): OutboxItem[] {
    return [...(this.byProject.get(projectId) ?? [])].reverse();
  }
}

/**
 * The embedded default: writes each message to the server log (the only place a code is ever
 * logged) and keeps it in the outbox served at `GET /admin/projects/{id}/verify/outbox`.
 */
export class ConsoleSmsSender implements SmsSender {
  readonly kind = 'console' as const;
  constructor(
    private log: FastifyBaseLogger,
    private outbox: Outbox,
    private clock: Clock,
  ) {}

  async send(message: SmsMessage): Promise<SmsResult> {
    this.log.info(
      { sms: { projectId: message.projectId, to: message.to, body: message.body } },
      'console SMS sender',
    );
    this.outbox.add(message.projectId, {
      to: message.to,
      body: message.body,
      createdAt: iso(this.clock.now()),
    });
    return { ok: true };
  }
}

export interface TwilioOptions {
  accountSid: string;
  authToken: string;
  /** The sending number (E.164) or alphanumeric sender id; or use `messagingServiceSid`. */
  from?: string;
  messagingServiceSid?: string;
  /** `https://api.twilio.com`, or any server speaking the same Messages API. */
  baseUrl: string;
  /** Give up after this long (10 s). */
  timeoutMs?: number;
}

/**
 * Twilio's Messages API (and compatible providers): `POST
 * {baseUrl}/2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded `To`, `From` or
 * `MessagingServiceSid`, `Body`, with HTTP Basic auth (AccountSid:AuthToken). A 2xx answer is
 * success; anything else (or no answer) is a failure, logged without the message body.
 */
export class TwilioSmsSender implements SmsSender {
  readonly kind = 'twilio' as const;
  constructor(
    private options: TwilioOptions,
    private log: FastifyBaseLogger,
  ) {}

  async send(message: SmsMessage): Promise<SmsResult> {
    const { accountSid, authToken, from, messagingServiceSid, baseUrl } = this.options;
    const url = `${baseUrl.replace(/\/+$/, '')}/2010-04-01/Accounts/${encodeURIComponent(accountSid)}/Messages.json`;
    const form = new URLSearchParams({ To: message.to });
    if (messagingServiceSid) form.set('MessagingServiceSid', messagingServiceSid);
    else if (from) form.set('From', from);
    form.set('Body', message.body);
    const auth = Buffer.from(`${accountSid}:${authToken}`).toString('base64');
    let status = 0;
    let providerCode: unknown;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Basic ${auth}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
        redirect: 'error',
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
      });
      status = res.status;
      const text = await res.text();
      let parsed: { sid?: unknown; code?: unknown } = {};
      try {
        parsed = JSON.parse(text);
      } catch {
        // A non-JSON answer: judged by its status alone.
      }
      if (res.ok) {
        return {
          ok: true,
          providerMessageId: typeof parsed.sid === 'string' ? parsed.sid : undefined,
        };
      }
      providerCode = parsed.code;
    } catch (err) {
      const error = `request failed: ${(err as Error).name}`;
      this.log.warn(
        { projectId: message.projectId, provider: 'twilio', error },
        'SMS delivery failed',
      );
      return { ok: false, error };
    }
    const error = `provider answered ${status}${providerCode === undefined ? '' : ` (code ${String(providerCode)})`}`;
    this.log.warn(
      { projectId: message.projectId, provider: 'twilio', error },
      'SMS delivery failed',
    );
    return { ok: false, error };
  }
}

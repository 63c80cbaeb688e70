import {
  type ErrorCode,
  FIRST_TIMESTAMP_MS,
  type SendCodeResponse,
  type ValidateTokenResponse,
  type VerifyCodeBody,
  type VerifyCodeResponse,
  type VerifyLogItem,
  type VerifyLogsQuery,
  type VerifyStats,
} from '@svc/protocol';
import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { iso } from '../clock.ts';
import type { PlatformConfig } from '../config.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { newId } from '../ids.ts';
import type { Platform } from '../platform.ts';
import type { Database } from '../storage/schema.ts';
import { generateCode, maskPhone, VerifySecrets } from './secrets.ts';
import { ConsoleSmsSender, Outbox, type SmsSender, TwilioSmsSender } from './senders.ts';
import { type EffectiveSettings, effectiveSettings, verifySettingsValidator } from './settings.ts';
import type { SmsSenderConfig, VerifyConfig } from './sms-config.ts';
import type { VerificationsTable } from './tables.ts';

/** The audience of verification tokens. */
export const VERIFY_AUDIENCE = 'svc:verify';

/**
 * How long after its code expired a number's verification still answers `verification_expired`
 * to a check by phone number; after that it reads `verification_not_found`, as a number never
 * seen does. (A check by verification id always says `verification_expired`: its caller holds
 * the id.)
 */
const EXPIRED_VISIBLE_MS = 3_600_000;
const HOUR_MS = 3_600_000;
const E164 = /^\+[1-9][0-9]{1,14}$/;

/** Who is asking: the gate's project and key, and the client's address. */
export interface CallContext {
  projectId: string;
  keyId: string;
  clientIp: string;
}

interface Phone {
  e164: string;
  country: string | null;
  callingCode: string | undefined;
}

/** A number a check names: E.164 is enough (the number was checked when its code was sent). */
function checkedPhone(e164: string): Phone {
  if (!E164.test(e164)) {
    throw new ApiError(
      'invalid_phone_number',
      'phoneNumber must be in E.164 form, e.g. +14155552671.',
    );
  }
  const parsed = parsePhoneNumberFromString(e164);
  return { e164, country: parsed?.country ?? null, callingCode: parsed?.countryCallingCode };
}

type LogInput = {
  type: 'send' | 'check';
  status: VerifyLogItem['status'];
  reason?: ErrorCode;
  verificationId?: string | null;
  phone?: Phone | null;
  test?: boolean;
};

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

function retryAfter(code: ErrorCode, detail: string, waitMs: number): ApiError {
  const s = seconds(waitMs);
  return new ApiError(code, detail, { retryAfter: s }, { 'Retry-After': String(s) });
}

/** What the Verify product is given. */
export interface VerifyDeps
  extends Pick<
    Platform,
    'store' | 'state' | 'clock' | 'secret' | 'sealer' | 'projects' | 'signingKeys' | 'adminGuard'
  > {
  config: PlatformConfig & { verify: VerifyConfig };
}

/**
 * SMS one-time codes: send, check, tokens, logs and stats. Codes are stored only as HMACs;
 * every state change is a conditional UPDATE whose row count decides, so concurrent requests
 * on any number of nodes cannot approve twice, send past a limit, or skip a check.
 */
export class VerifyService {
  readonly secrets: VerifySecrets;
  readonly outbox = new Outbox();
  private db: Kysely<Database>;

  constructor(
    private svc: VerifyDeps,
    private log: FastifyBaseLogger,
  ) {
    this.secrets = new VerifySecrets(svc.secret, svc.sealer);
    this.db = svc.store.db;
  }

  /**
   * Seals again, with the current server secret, the SMS provider credentials in project
   * settings that are sealed with a previous one. A project's settings are replaced only if
   * unchanged since they were read (a PATCH meanwhile wins).
   */
  async sealStoredCredentials() {
    await this.svc.projects.rewriteSettings('verify', (value) => {
      const verify = value as { sender?: { authTokenEncrypted?: string } };
      const sealed = verify.sender?.authTokenEncrypted;
      const resealed = sealed ? this.secrets.resealed(sealed) : null;
      if (!resealed) return null;
      return { ...verify, sender: { ...verify.sender, authTokenEncrypted: resealed } };
    });
  }

  /** The validator registered for `settings.verify`. */
  settingsValidator() {
    return verifySettingsValidator(this.secrets);
  }

  /** Throws `project_not_found` for an unknown project. */
  async projectExists(projectId: string): Promise<void> {
    await this.svc.projects.get(projectId);
  }

  private async settings(projectId: string): Promise<EffectiveSettings> {
    return effectiveSettings(await this.svc.projects.get(projectId), this.secrets);
  }

  private sender(config: SmsSenderConfig | null): SmsSender {
    const c = config ?? this.svc.config.verify.smsSender;
    if (c.type === 'twilio') return new TwilioSmsSender(c, this.log);
    return new ConsoleSmsSender(this.log, this.outbox, this.svc.clock);
  }

  /** Parses a number for sending: E.164 and valid for its region, or a project test number. */
  private parsePhone(input: string, settings: EffectiveSettings): Phone {
    const parsed = E164.test(input) ? parsePhoneNumberFromString(input) : undefined;
    if (settings.testNumbers.has(input)) {
      return {
        e164: input,
        country: parsed?.country ?? null,
        callingCode: parsed?.countryCallingCode,
      };
    }
    if (!parsed?.isValid() || parsed.number !== input) {
      throw new ApiError(
        'invalid_phone_number',
        'phoneNumber must be a valid number in E.164 form, e.g. +14155552671.',
      );
    }
    return { e164: input, country: parsed.country ?? null, callingCode: parsed.countryCallingCode };
  }

  private async record(ctx: CallContext, entry: LogInput) {
    await this.db
      .insertInto('verify_logs')
      .values({
        id: newId('vlg', this.svc.clock.now()),
        project_id: ctx.projectId,
        created_at: iso(this.svc.clock.now()),
        type: entry.type,
        status: entry.status,
        reason: entry.reason ?? null,
        verification_id: entry.verificationId ?? null,
        phone_hmac: entry.phone ? this.secrets.phoneHmac(entry.phone.e164) : null,
        phone_masked: entry.phone ? maskPhone(entry.phone.e164, entry.phone.callingCode) : null,
        country: entry.phone?.country ?? null,
        key_id: ctx.keyId,
        client_ip: ctx.clientIp,
        test: entry.test ? 1 : 0,
      })
      .execute();
  }

  /** Records a refusal and returns the error to throw. */
  private async refuse(
    ctx: CallContext,
    type: 'send' | 'check',
    error: ApiError,
    extra: Omit<LogInput, 'type' | 'status' | 'reason'> = {},
  ) {
    await this.record(ctx, { type, status: 'refused', reason: error.code, ...extra });
    return error;
  }

  private async cap(bucket: string, limit: number, what: string): Promise<ApiError | null> {
    const rate = await this.svc.state.rateLimit(bucket, limit, HOUR_MS, this.svc.clock.now());
    if (rate.allowed) return null;
    return retryAfter(
      'too_many_requests',
      `At most ${limit} ${what} per hour.`,
      rate.retryAfterSeconds * 1000,
    );
  }

  private current(projectId: string, e164: string) {
    return this.db
      .selectFrom('verifications')
      .selectAll()
      .where('active_key', '=', `${projectId}:${e164}`)
      .executeTakeFirst();
  }

  /**
   * `POST /auth/sms/send`: creates the number's verification or refreshes its pending one
   * (a new code, a fresh lifetime), then sends the code. The answer has the same shape
   * whatever the number's history.
   */
  async send(ctx: CallContext, phoneNumber: string): Promise<SendCodeResponse> {
    const settings = await this.settings(ctx.projectId);
    const { limits } = settings;
    const phone = this.parsePhone(phoneNumber, settings);
    const testCode = settings.testNumbers.get(phone.e164);
    const test = testCode !== undefined;
    const refuse = (error: ApiError, verificationId?: string) =>
      this.refuse(ctx, 'send', error, { phone, verificationId, test });
    const now = this.svc.clock.now();
    const current = await this.current(ctx.projectId, phone.e164);
    const refusal = await this.sendRefusal(ctx, phone, settings, test, current, now);
    if (refusal) throw await refuse(refusal.error, refusal.verificationId);

    const live = current && Date.parse(current.expires_at) > now ? current : undefined;
    const resend = live?.status === 'pending' ? live : undefined;
    const code = testCode ?? generateCode();
    const claim = resend
      ? await this.claimResend(resend, code, limits, now)
      : await this.createVerification(ctx, phone, code, test, current, limits, now);
    if (!claim) {
      // A concurrent send won the row: this one is a resend too soon.
      throw await refuse(
        retryAfter(
          'resend_too_soon',
          'A code was sent moments ago.',
          limits.resendCooldownSeconds * 1000,
        ),
        resend?.id,
      );
    }
    const { verificationId, undo } = claim;
    if (!test && !(await this.deliver(ctx, phone, code, settings))) {
      await undo();
      await this.record(ctx, {
        type: 'send',
        status: 'failed',
        reason: 'sms_delivery_failed',
        verificationId,
        phone,
      });
      throw new ApiError(
        'sms_delivery_failed',
        'The SMS provider did not accept the message; no send was used.',
      );
    }
    await this.record(ctx, { type: 'send', status: 'sent', verificationId, phone, test });
    return {
      verificationId,
      status: 'pending',
      expiresIn: limits.codeTtlSeconds,
      resendAfter: test ? 0 : limits.resendCooldownSeconds,
    };
  }

  /**
   * Why a send must be refused, checked before anything is written: the country, a verification
   * locked by wrong codes, the resend limits, and the hourly caps per client address and per
   * number (test numbers skip all but the lock). Null when it may go ahead.
   */
  private async sendRefusal(
    ctx: CallContext,
    phone: Phone,
    settings: EffectiveSettings,
    test: boolean,
    current: VerificationsTable | undefined,
    now: number,
  ): Promise<{ error: ApiError; verificationId?: string } | null> {
    const { limits } = settings;
    if (
      !test &&
      settings.allowedCountries &&
      !(phone.country && settings.allowedCountries.has(phone.country))
    ) {
      return { error: new ApiError('country_not_allowed') };
    }
    const live = current && Date.parse(current.expires_at) > now ? current : undefined;
    if (live?.status === 'max_attempts_reached') {
      const error = retryAfter(
        'max_attempts_reached',
        'Too many wrong codes; wait until the verification expires.',
        Date.parse(live.expires_at) - now,
      );
      return { error, verificationId: live.id };
    }
    if (test) return null;
    const resend = live?.status === 'pending' ? live : undefined;
    if (resend) {
      if (resend.sends >= limits.maxSendsPerVerification) {
        const error = retryAfter(
          'max_sends_reached',
          `At most ${limits.maxSendsPerVerification} codes per verification.`,
          Date.parse(resend.expires_at) - now,
        );
        return { error, verificationId: resend.id };
      }
      const wait = Date.parse(resend.last_sent_at) + limits.resendCooldownSeconds * 1000 - now;
      if (wait > 0) {
        const error = retryAfter('resend_too_soon', 'A code was sent moments ago.', wait);
        return { error, verificationId: resend.id };
      }
    }
    const capped =
      (await this.cap(
        `verify:send-ip:${ctx.projectId}:${ctx.clientIp}`,
        limits.sendsPerIpPerHour,
        'codes from one client address',
      )) ??
      (await this.cap(
        `verify:send-number:${ctx.projectId}:${phone.e164}`,
        limits.sendsPerNumberPerHour,
        'codes to one number',
      ));
    return capped ? { error: capped, verificationId: resend?.id } : null;
  }

  /**
   * A new code on the pending verification. Only one of concurrent resends matches the counters
   * it read (null for the others); `undo` restores the previous code when delivery fails.
   */
  private async claimResend(
    resend: VerificationsTable,
    code: string,
    limits: EffectiveSettings['limits'],
    now: number,
  ) {
    const hmac = this.secrets.codeHmac(resend.id, code);
    const claimed = await this.db
      .updateTable('verifications')
      .set({
        code_hmac: hmac,
        sends: resend.sends + 1,
        last_sent_at: iso(now),
        expires_at: iso(now + limits.codeTtlSeconds * 1000),
      })
      .where('id', '=', resend.id)
      .where('status', '=', 'pending')
      .where('sends', '=', resend.sends)
      .where('last_sent_at', '=', resend.last_sent_at)
      .executeTakeFirst();
    if (claimed.numUpdatedRows !== 1n) return null;
    const undo = () =>
      this.db
        .updateTable('verifications')
        .set({
          code_hmac: resend.code_hmac,
          sends: resend.sends,
          last_sent_at: resend.last_sent_at,
          expires_at: resend.expires_at,
        })
        .where('id', '=', resend.id)
        .where('code_hmac', '=', hmac)
        .execute();
    return { verificationId: resend.id, undo };
  }

  /**
   * A new verification for the number (retiring the previous one). The unique `active_key` lets
   * exactly one of concurrent first sends create it (null for the others); `undo` fails it when
   * delivery fails.
   */
  private async createVerification(
    ctx: CallContext,
    phone: Phone,
    code: string,
    test: boolean,
    current: VerificationsTable | undefined,
    limits: EffectiveSettings['limits'],
    now: number,
  ) {
    if (current) {
      await this.db
        .updateTable('verifications')
        .set({ active_key: null })
        .where('id', '=', current.id)
        .execute();
    }
    const verificationId = newId('vrf', now);
    const row: VerificationsTable = {
      id: verificationId,
      project_id: ctx.projectId,
      phone_number: phone.e164,
      country: phone.country,
      status: 'pending',
      code_hmac: this.secrets.codeHmac(verificationId, code),
      attempts: 0,
      max_attempts: limits.maxChecksPerVerification,
      sends: 1,
      test: test ? 1 : 0,
      active_key: `${ctx.projectId}:${phone.e164}`,
      created_at: iso(now),
      expires_at: iso(now + limits.codeTtlSeconds * 1000),
      last_sent_at: iso(now),
      approved_at: null,
    };
    const inserted = await this.db
      .insertInto('verifications')
      .values(row)
      .onConflict((oc) => oc.doNothing())
      .executeTakeFirst();
    if (inserted.numInsertedOrUpdatedRows !== 1n) return null;
    const undo = () =>
      this.db
        .updateTable('verifications')
        .set({ status: 'failed', active_key: null })
        .where('id', '=', verificationId)
        .execute();
    return { verificationId, undo };
  }

  /** Sends the code by SMS through the project's sender; false when the provider refused it. */
  private async deliver(ctx: CallContext, phone: Phone, code: string, settings: EffectiveSettings) {
    const minutes = Math.round(settings.limits.codeTtlSeconds / 60);
    const body = `Your verification code is ${code}. It expires in ${minutes} minute${minutes === 1 ? '' : 's'}. Do not share it.`;
    const result = await this.sender(settings.sender).send({
      projectId: ctx.projectId,
      to: phone.e164,
      body,
    });
    return result.ok;
  }

  /**
   * `POST /verify`: checks a code in constant time. Each check (right or wrong) uses one of the
   * verification's attempts; the approval is a conditional UPDATE, so exactly one of any number
   * of concurrent right answers wins.
   */
  async check(ctx: CallContext, body: VerifyCodeBody): Promise<VerifyCodeResponse> {
    if ((body.phoneNumber === undefined) === (body.verificationId === undefined)) {
      const path = body.phoneNumber === undefined ? 'body.phoneNumber' : 'body.verificationId';
      throw invalidField(
        path,
        'give exactly one of phoneNumber and verificationId',
        'Give exactly one of phoneNumber and verificationId.',
      );
    }
    const settings = await this.settings(ctx.projectId);
    let phone = body.phoneNumber === undefined ? null : checkedPhone(body.phoneNumber);
    let row = await this.checked(ctx.projectId, body.verificationId, phone);
    if (row && !phone) {
      const parsed = parsePhoneNumberFromString(row.phone_number);
      phone = {
        e164: row.phone_number,
        country: row.country,
        callingCode: parsed?.countryCallingCode,
      };
    }
    const test = row ? row.test === 1 : phone ? settings.testNumbers.has(phone.e164) : false;
    const refuse = (error: ApiError) =>
      this.refuse(ctx, 'check', error, { phone, verificationId: row?.id ?? null, test });
    if (!test) {
      const capped = await this.cap(
        `verify:check-ip:${ctx.projectId}:${ctx.clientIp}`,
        settings.limits.checksPerIpPerHour,
        'checks from one client address',
      );
      if (capped) throw await refuse(capped);
    }

    // At most three rounds: a round repeats only when another request changed the row.
    for (let round = 0; round < 3; round++) {
      const now = this.svc.clock.now();
      if (!row || row.status === 'approved' || row.status === 'failed') {
        throw await refuse(new ApiError('verification_not_found'));
      }
      if (Date.parse(row.expires_at) <= now)
        throw await refuse(new ApiError('verification_expired'));
      if (row.status === 'max_attempts_reached' || row.attempts >= row.max_attempts) {
        throw await refuse(
          retryAfter(
            'max_attempts_reached',
            'Too many wrong codes; send a new code once this one expires.',
            Date.parse(row.expires_at) - now,
          ),
        );
      }
      const logged = { type: 'check', verificationId: row.id, phone, test } as const;
      if (this.secrets.sameHmac(this.secrets.codeHmac(row.id, body.code), row.code_hmac)) {
        if (await this.approve(row, now)) {
          const answer = await this.approvalToken(ctx.projectId, row, settings);
          await this.record(ctx, { ...logged, status: 'approved' });
          return answer;
        }
      } else {
        const attemptsRemaining = await this.countWrongCode(row, now);
        if (attemptsRemaining !== null) {
          await this.record(ctx, { ...logged, status: 'invalid_code' });
          throw new ApiError(
            'invalid_code',
            `The code is not correct; ${attemptsRemaining} attempt${attemptsRemaining === 1 ? '' : 's'} left.`,
            { attemptsRemaining },
          );
        }
      }
      // Lost a race (approved, locked, resent or expired meanwhile): judge the row as it is now.
      row = await this.db
        .selectFrom('verifications')
        .selectAll()
        .where('id', '=', row.id)
        .executeTakeFirst();
    }
    throw await refuse(new ApiError('verification_not_found'));
  }

  /**
   * The verification a check is about: by id, or the number's current one (none once it has
   * been expired for a while: old history of a number is indistinguishable from no history).
   */
  private async checked(
    projectId: string,
    verificationId: string | undefined,
    phone: Phone | null,
  ) {
    if (verificationId !== undefined) {
      return this.db
        .selectFrom('verifications')
        .selectAll()
        .where('id', '=', verificationId)
        .where('project_id', '=', projectId)
        .executeTakeFirst();
    }
    const row = await this.current(projectId, phone!.e164);
    if (row && Date.parse(row.expires_at) + EXPIRED_VISIBLE_MS <= this.svc.clock.now())
      return undefined;
    return row;
  }

  /** Approves a pending verification whose code was right; false when another request won. */
  private async approve(row: VerificationsTable, nowMs: number) {
    const nowIso = iso(nowMs);
    const approved = await this.db
      .updateTable('verifications')
      .set({
        status: 'approved',
        approved_at: nowIso,
        attempts: sql<number>`attempts + 1`,
        active_key: null,
      })
      .where('id', '=', row.id)
      .where('status', '=', 'pending')
      .where('code_hmac', '=', row.code_hmac)
      .where('attempts', '<', sql<number>`max_attempts`)
      .where('expires_at', '>', nowIso)
      .executeTakeFirst();
    return approved.numUpdatedRows === 1n;
  }

  /** The token an approved check answers with. */
  private async approvalToken(
    projectId: string,
    row: VerificationsTable,
    settings: EffectiveSettings,
  ): Promise<VerifyCodeResponse> {
    const { tokenTtlSeconds } = settings.limits;
    const { token } = await this.svc.signingKeys.sign(
      { project_id: projectId, phone_number: row.phone_number, verification_id: row.id },
      { audience: VERIFY_AUDIENCE, subject: row.phone_number, expiresInSeconds: tokenTtlSeconds },
    );
    return { status: 'approved', token, expiresIn: tokenTtlSeconds };
  }

  /**
   * Counts a wrong code against a pending verification (locking it at its last attempt);
   * resolves with the attempts left, or null when another request changed it first.
   */
  private async countWrongCode(row: VerificationsTable, nowMs: number) {
    const nowIso = iso(nowMs);
    const counted = await this.db
      .updateTable('verifications')
      .set({
        attempts: sql<number>`attempts + 1`,
        status: sql<string>`case when attempts + 1 >= max_attempts then 'max_attempts_reached' else status end`,
      })
      .where('id', '=', row.id)
      .where('status', '=', 'pending')
      .where('attempts', '<', sql<number>`max_attempts`)
      .where('expires_at', '>', nowIso)
      .returning(['attempts', 'max_attempts'])
      .executeTakeFirst();
    return counted ? Math.max(0, counted.max_attempts - counted.attempts) : null;
  }

  /**
   * `POST /verify/validate-token`: signature, audience, expiry, and that the token belongs to
   * the calling project. With `consume`, the token's id is recorded under a unique key, so
   * it validates once across every node.
   */
  async validateToken(
    projectId: string,
    token: string,
    consume: boolean,
  ): Promise<ValidateTokenResponse> {
    const verified = await this.svc.signingKeys.verify(token, VERIFY_AUDIENCE);
    if (!verified.ok) return { valid: false, reason: verified.reason };
    const p = verified.payload;
    if (
      p.project_id !== projectId ||
      typeof p.phone_number !== 'string' ||
      typeof p.verification_id !== 'string' ||
      typeof p.jti !== 'string' ||
      typeof p.iat !== 'number' ||
      typeof p.exp !== 'number'
    ) {
      return { valid: false, reason: 'invalid' };
    }
    const now = this.svc.clock.now();
    if (consume) {
      await this.db
        .deleteFrom('verify_consumed_tokens')
        .where('expires_at', '<', iso(now))
        .execute();
      const inserted = await this.db
        .insertInto('verify_consumed_tokens')
        .values({
          jti: p.jti,
          project_id: projectId,
          consumed_at: iso(now),
          expires_at: iso(p.exp * 1000),
        })
        .onConflict((oc) => oc.doNothing())
        .executeTakeFirst();
      if (inserted.numInsertedOrUpdatedRows !== 1n) return { valid: false, reason: 'already_used' };
    } else {
      const used = await this.db
        .selectFrom('verify_consumed_tokens')
        .select('jti')
        .where('jti', '=', p.jti)
        .executeTakeFirst();
      if (used) return { valid: false, reason: 'already_used' };
    }
    return {
      valid: true,
      phoneNumber: p.phone_number,
      verificationId: p.verification_id,
      verifiedAt: iso(p.iat * 1000),
      expiresAt: iso(p.exp * 1000),
    };
  }

  /** `GET /verify/logs`: newest first. */
  async logs(projectId: string, query: VerifyLogsQuery) {
    const page = query.page ?? 1;
    const limit = query.limit ?? 10;
    let q = this.db.selectFrom('verify_logs').where('project_id', '=', projectId);
    if (query.phoneNumber)
      q = q.where('phone_hmac', '=', this.secrets.phoneHmac(query.phoneNumber));
    if (query.type) q = q.where('type', '=', query.type);
    if (query.status) q = q.where('status', '=', query.status);
    if (query.from) q = q.where('created_at', '>=', iso(Date.parse(query.from)));
    if (query.to) q = q.where('created_at', '<', iso(Date.parse(query.to)));
    const [rows, total] = await Promise.all([
      q
        .selectAll()
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit)
        .offset((page - 1) * limit)
        .execute(),
      q.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow(),
    ]);
    const items: VerifyLogItem[] = rows.map((r) => ({
      id: r.id,
      createdAt: r.created_at,
      type: r.type as VerifyLogItem['type'],
      status: r.status as VerifyLogItem['status'],
      reason: r.reason,
      verificationId: r.verification_id,
      phoneNumber: r.phone_masked,
      country: r.country,
      keyId: r.key_id,
      clientIp: r.client_ip,
      test: r.test === 1,
    }));
    return { items, meta: { total: Number(total.n), page, limit } };
  }

  /**
   * `GET /verify/stats`: counts over `[from, to)` (default: the last 30 days), overall and per
   * country. Test numbers are left out.
   */
  async stats(projectId: string, fromIso?: string, toIso?: string): Promise<VerifyStats> {
    const now = this.svc.clock.now();
    const toMs = toIso ? Date.parse(toIso) : now;
    // The default window starts no earlier than the year 0000 (what a Timestamp can say).
    const fromMs = fromIso
      ? Date.parse(fromIso)
      : Math.max(toMs - 30 * 24 * HOUR_MS, FIRST_TIMESTAMP_MS);
    if (fromMs > toMs) {
      throw invalidField('querystring.from', 'must not be after to', 'from must not be after to.');
    }
    const from = iso(fromMs);
    const to = iso(toMs);
    const [logRows, started, expired] = await Promise.all([
      this.db
        .selectFrom('verify_logs')
        .select(['country', 'type', 'status', (eb) => eb.fn.countAll().as('n')])
        .where('project_id', '=', projectId)
        .where('test', '=', 0)
        .where('created_at', '>=', from)
        .where('created_at', '<', to)
        .where((eb) =>
          eb.or([
            eb.and([eb('type', '=', 'send'), eb('status', '=', 'sent')]),
            eb.and([eb('type', '=', 'check'), eb('status', 'in', ['approved', 'invalid_code'])]),
          ]),
        )
        .groupBy(['country', 'type', 'status'])
        .execute(),
      this.db
        .selectFrom('verifications')
        .select(['country', (eb) => eb.fn.countAll().as('n')])
        .where('project_id', '=', projectId)
        .where('test', '=', 0)
        .where('status', '!=', 'failed')
        .where('created_at', '>=', from)
        .where('created_at', '<', to)
        .groupBy('country')
        .execute(),
      this.db
        .selectFrom('verifications')
        .select(['country', (eb) => eb.fn.countAll().as('n')])
        .where('project_id', '=', projectId)
        .where('test', '=', 0)
        .where('status', '=', 'pending')
        .where('expires_at', '>=', from)
        .where('expires_at', '<', iso(Math.min(toMs, now + 1)))
        .groupBy('country')
        .execute(),
    ]);
    type Counts = Omit<VerifyStats['countries'][number], 'country' | 'conversionRate'>;
    const zero = (): Counts => ({
      verifications: 0,
      sends: 0,
      approvals: 0,
      failedChecks: 0,
      expirations: 0,
    });
    const total = zero();
    const byCountry = new Map<string | null, Counts>();
    const add = (country: string | null, field: keyof Counts, n: number) => {
      const c = byCountry.get(country) ?? zero();
      byCountry.set(country, c);
      c[field] += n;
      total[field] += n;
    };
    for (const r of logRows) {
      const field: keyof Counts =
        r.type === 'send' ? 'sends' : r.status === 'approved' ? 'approvals' : 'failedChecks';
      add(r.country, field, Number(r.n));
    }
    for (const r of started) add(r.country, 'verifications', Number(r.n));
    for (const r of expired) add(r.country, 'expirations', Number(r.n));
    const rate = (c: Counts) =>
      c.verifications === 0
        ? 0
        : Math.min(1, Math.round((c.approvals / c.verifications) * 10_000) / 10_000);
    const countries = [...byCountry.entries()]
      .map(([country, c]) => ({ country, ...c, conversionRate: rate(c) }))
      .sort((a, b) => b.sends - a.sends || String(a.country).localeCompare(String(b.country)));
    return { from, to, ...total, conversionRate: rate(total), countries };
  }
}

import { CompiledQuery, sql } from 'kysely';
import { iso } from '../clock.ts';
import type { Store } from '../storage/db.ts';
import type { WebhookAttemptsTable, WebhookDeliveriesTable } from './tables.ts';
import type { ClaimedDelivery } from './worker.ts';

/** One attempt's outcome (or a skip), waiting to be written with others in one transaction. */
export interface Outcome {
  delivery: ClaimedDelivery;
  /** The attempt's record; null when the delivery was skipped (a switch is off). */
  attempt: WebhookAttemptsTable | null;
  status: WebhookDeliveriesTable['status'];
  nextAttemptAt: string | null;
  code: number | null;
  error: string | null;
  success: boolean;
  gone: boolean;
  nowMs: number;
  /** The chain's last outcome: its key's lease is given back with it. */
  release?: boolean;
}

/** Endpoints whose health a batch changes, by id. */
interface EndpointChanges {
  /** Failing until now, answered this time. */
  recovered: string[];
  /** Healthy until now, failed this time. */
  failing: string[];
  /** Failing before and again: disabled if failing for longer than the limit. */
  checkDisable: string[];
  /** Answered 410 Gone: disabled. */
  gone: string[];
}

/** What a batch's write did to endpoints, for the worker's metrics and log. */
export interface OutcomesWritten {
  /** Disabled for failing too long. */
  disabled: string[];
  /** Disabled for answering 410 Gone. */
  gone: string[];
}

/**
 * SQLite: one delivery's outcome, written only while its key's lease token holds. A statement per
 * delivery: SQLite runs `update … from json_each(…)` as a join through a temporary table, about
 * three times the cost per row.
 */
const SQLITE_OUTCOME = `update webhook_deliveries set status = ?, attempt_count = ?,
  next_attempt_at = ?, last_status_code = ?, last_error = ?, success_attempted_at = ?,
  success_latency_ms = ?, success_response_body = ?, success_node_id = ?, updated_at = ?
  where id = ? and exists (select 1 from webhook_key_leases l
    where l.endpoint_id = ? and l.lease_key = ? and l.lease_token = ?)`;

/**
 * Writes a batch of outcomes: failed attempts' rows, deliveries' states (a success with its
 * attempt's data on the delivery row), the keys' leases given back, endpoints' health, in one
 * go. A delivery's state is written only while its key's lease token still holds. An endpoint
 * failing since `disableAfterMs` ago or longer is disabled (0: never).
 */
export async function writeOutcomes(
  store: Store,
  batch: Outcome[],
  nowMs: number,
  disableAfterMs: number,
): Promise<OutcomesWritten> {
  const now = iso(nowMs);
  const changes = endpointChanges(batch, disableAfterMs > 0);
  let disabled: string[] = [];
  const endpointWrites = async (db: Store['db']) => {
    disabled = await writeEndpointChanges(db, changes, now, iso(nowMs - disableAfterMs));
  };
  // The batch as two JSON parameters (serialised natively, parsed by the database), the
  // statements' text the same whatever the batch's size. Attempt rows for failed attempts
  // only: a success is kept on its delivery row.
  const attempts = JSON.stringify(
    batch.flatMap((o) => (o.attempt && !o.success ? [o.attempt] : [])),
  );
  const states = stateRows(batch);
  const statesJson = JSON.stringify(states);
  if (store.dialect === 'postgres') {
    const statement = postgresOutcomes(attempts, statesJson, now);
    // Endpoint changes commit with the outcomes that caused them (an endpoint that answered
    // 410 is disabled by the time its delivery shows as failed).
    if (Object.values(changes).some((ids) => ids.length > 0)) {
      await store.db.transaction().execute(async (trx) => {
        await statement.execute(trx);
        await endpointWrites(trx);
      });
    } else await statement.execute(store.db);
  } else {
    await store.db.transaction().execute(async (trx) => {
      await sqliteOutcomes(trx, attempts, states, statesJson, now);
      await endpointWrites(trx);
    });
  }
  return { disabled, gone: changes.gone };
}

/**
 * Endpoint health, from the last attempt per endpoint in the batch (the claim read
 * `failing_since`, so an unchanged endpoint costs no write).
 */
function endpointChanges(batch: Outcome[], disabling: boolean): EndpointChanges {
  const last = new Map<string, Outcome>();
  for (const o of batch)
    if (o.attempt && !o.attempt.error?.startsWith('refused')) last.set(o.delivery.endpoint_id, o);
  const changes: EndpointChanges = {
    recovered: [],
    failing: [],
    checkDisable: [],
    gone: [...new Set(batch.filter((o) => o.gone).map((o) => o.delivery.endpoint_id))],
  };
  for (const [id, o] of last) {
    if (o.success) {
      if (o.delivery.failing_since !== null) changes.recovered.push(id);
    } else {
      if (o.delivery.failing_since === null) changes.failing.push(id);
      else if (disabling) changes.checkDisable.push(id);
    }
  }
  return changes;
}

/** Writes endpoints' health; returns the endpoints disabled for failing since `cutoff`. */
async function writeEndpointChanges(
  db: Store['db'],
  { recovered, failing, checkDisable, gone }: EndpointChanges,
  now: string,
  cutoff: string,
) {
  if (recovered.length)
    await db
      .updateTable('webhook_endpoints')
      .set({ failing_since: null })
      .where('id', 'in', recovered)
      .where('failing_since', 'is not', null)
      .execute();
  if (failing.length)
    await db
      .updateTable('webhook_endpoints')
      .set({ failing_since: now })
      .where('id', 'in', failing)
      .where('failing_since', 'is', null)
      .execute();
  let disabled: string[] = [];
  if (checkDisable.length) {
    const rows = await db
      .updateTable('webhook_endpoints')
      .set({ enabled: 0, disabled_reason: 'failing', updated_at: now })
      .where('id', 'in', checkDisable)
      .where('enabled', '=', 1)
      .where('failing_since', '<=', cutoff)
      .returning('id')
      .execute();
    disabled = rows.map((r) => r.id);
  }
  if (gone.length)
    await db
      .updateTable('webhook_endpoints')
      .set({ enabled: 0, disabled_reason: 'gone', updated_at: now })
      .where('id', 'in', gone)
      .execute();
  return disabled;
}

/** Each delivery's new state, with its lease (to check, or to give back) and its success. */
function stateRows(batch: Outcome[]) {
  return batch.map((o) => {
    const won = o.success ? o.attempt : null;
    return {
      id: o.delivery.id,
      endpoint_id: o.delivery.endpoint_id,
      lease_key: o.delivery.lease_key,
      token: o.delivery.lease_token,
      release: o.release,
      status: o.status,
      attempt_count: o.attempt?.attempt ?? o.delivery.attempt_count,
      next_attempt_at: o.nextAttemptAt,
      code: o.code,
      error: o.error,
      s_at: won?.attempted_at ?? null,
      s_latency: won?.latency_ms ?? null,
      s_body: won?.response_body ?? null,
      s_node: won?.node_id ?? null,
    };
  });
}

/**
 * PostgreSQL: one statement for the attempts, the deliveries and the leases (one round trip, one
 * commit for the batch), prepared once per connection. Only the lease holder writes: each key's
 * lease row (once per batch) is deleted when its chain ended, else locked, its token checked on
 * its latest version; if the lease was lost, another node owns the key. It commits without
 * waiting for the WAL flush (most of an outcome write's time): an outcome lost to a PostgreSQL
 * crash leaves its delivery pending, sent again once its lease expires (at least once, as with a
 * node crash).
 */
function postgresOutcomes(attempts: string, states: string, now: string) {
  return sql`/* prepared webhook_outcomes */
    with sync as (select set_config('synchronous_commit', 'off', true) as off),
    a as (
      insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code,
        latency_ms, error, response_body, next_attempt_at, node_id)
      select * from json_to_recordset(${attempts}::json) as v(id text, delivery_id text,
        attempt int, attempted_at text, status_code int, latency_ms int, error text,
        response_body text, next_attempt_at text, node_id text)
    ),
    v as (
      select * from json_to_recordset(${states}::json) as v(id text, endpoint_id text,
        lease_key text, token text, release boolean, status text, attempt_count int,
        next_attempt_at text, code int, error text, s_at text, s_latency int, s_body text,
        s_node text)
      where (select off from sync) is not null
    ),
    leases as (
      select endpoint_id, lease_key, token, bool_or(release) as release from v
      group by endpoint_id, lease_key, token
    ),
    released as (
      delete from webhook_key_leases l using leases g
      where g.release and l.endpoint_id = g.endpoint_id and l.lease_key = g.lease_key
        and l.lease_token = g.token
      returning l.endpoint_id, l.lease_key, l.lease_token
    ),
    kept as (
      select l.endpoint_id, l.lease_key, l.lease_token
      from webhook_key_leases l join leases g on not g.release
        and l.endpoint_id = g.endpoint_id and l.lease_key = g.lease_key
        and l.lease_token = g.token
      for update of l
    ),
    held as (select * from released union all select * from kept)
    update webhook_deliveries d set status = v.status, attempt_count = v.attempt_count,
      next_attempt_at = v.next_attempt_at, last_status_code = v.code, last_error = v.error,
      success_attempted_at = v.s_at, success_latency_ms = v.s_latency,
      success_response_body = v.s_body, success_node_id = v.s_node, updated_at = ${now}
    from v join held h on h.endpoint_id = v.endpoint_id and h.lease_key = v.lease_key
      and h.lease_token = v.token
    where d.id = v.id`;
}

/**
 * SQLite, inside the batch's transaction: statements of fixed text whatever the batch's size
 * (each prepared once): the attempts, one update per delivery, the leases.
 */
async function sqliteOutcomes(
  trx: Store['db'],
  attempts: string,
  states: ReturnType<typeof stateRows>,
  statesJson: string,
  now: string,
) {
  await sql`
    insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code,
      latency_ms, error, response_body, next_attempt_at, node_id)
    select v.value ->> 'id', v.value ->> 'delivery_id', v.value ->> 'attempt',
      v.value ->> 'attempted_at', v.value ->> 'status_code', v.value ->> 'latency_ms',
      v.value ->> 'error', v.value ->> 'response_body', v.value ->> 'next_attempt_at',
      v.value ->> 'node_id'
    from json_each(${attempts}) v`.execute(trx);
  for (const r of states) {
    await trx.executeQuery(
      CompiledQuery.raw(SQLITE_OUTCOME, [
        r.status,
        r.attempt_count,
        r.next_attempt_at,
        r.code,
        r.error,
        r.s_at,
        r.s_latency,
        r.s_body,
        r.s_node,
        now,
        r.id,
        r.endpoint_id,
        r.lease_key,
        r.token,
      ]),
    );
  }
  await sql`
    delete from webhook_key_leases
    where (endpoint_id, lease_key, lease_token) in (
      select v.value ->> 'endpoint_id', v.value ->> 'lease_key', v.value ->> 'token'
      from json_each(${statesJson}) v where v.value ->> 'release')`.execute(trx);
}

import { sql } from 'kysely';
import type { Store } from '../storage/db.ts';
import type { ClaimedDelivery } from './worker.ts';

/** Deliveries of one ordering key claimed together and sent one after another, at most. */
export const CHAIN_MAX = 32;

/** How much a claim may take, per endpoint and in all (the worker's `endpointLimits`). */
export interface ClaimLimits {
  /** Endpoints to take nothing for (paused, or full on this node). */
  excluded: string[];
  /** Chains an endpoint may take at most, where fewer than `endpointCap`. */
  caps: Record<string, number>;
  /** Chains an endpoint not in `caps` may take at most. */
  endpointCap: number;
  /** Chains the endpoints can take in all. */
  takes: number;
}

/** A key's lease as a claim holds it. */
export interface Lease {
  endpoint_id: string;
  lease_key: string;
}

/**
 * The claim's first statement: leases keys. Heads are due deliveries with no earlier pending one
 * of their key and no live lease on their key, in the due index's order (the scan stops once it
 * has enough), capped per endpoint, each given a key lease (`token`, until `leaseUntil`) unless
 * another node took the key meanwhile (an insert that updates only an expired lease). At most
 * `slots` keys.
 */
export async function leaseKeys(
  store: Store,
  slots: number,
  limits: ClaimLimits,
  now: string,
  leaseUntil: string,
  token: string,
): Promise<Lease[]> {
  const postgres = store.dialect === 'postgres';
  const capsTable = postgres
    ? sql`unnest(${Object.keys(limits.caps)}::text[], ${Object.values(limits.caps)}::int[]) as caps(endpoint_id, free)`
    : sql`(select key as endpoint_id, value as free from json_each(${JSON.stringify(limits.caps)})) caps`;
  const { rows } = await sql<{ endpoint_id: string; lease_key: string }>`${
    postgres ? sql.raw('/* prepared webhook_claim_keys */') : sql``
  }
    with heads as (
      select h.endpoint_id, coalesce(h.ordering_key, h.id) as lease_key, h.next_attempt_at,
        h.event_seq
      from webhook_deliveries h
      where h.status = 'pending' and h.next_attempt_at <= ${now} and ${
        postgres
          ? sql`h.endpoint_id <> all(${limits.excluded}::text[])`
          : sql`h.endpoint_id not in (select value from json_each(${JSON.stringify(limits.excluded)}))`
      }
        and not exists (
          select 1 from webhook_deliveries e
          where e.endpoint_id = h.endpoint_id and e.ordering_key = h.ordering_key
            and e.event_seq < h.event_seq and e.status = 'pending')
        and not exists (
          select 1 from webhook_key_leases l
          where l.endpoint_id = h.endpoint_id and l.lease_key = coalesce(h.ordering_key, h.id)
            and l.lease_until >= ${now})
      order by h.next_attempt_at, h.event_seq
      limit ${Math.min(slots * 2, limits.takes)}
    ), chosen_heads as (
      select r.endpoint_id, r.lease_key from (
        select heads.*, row_number() over (partition by heads.endpoint_id
          order by heads.next_attempt_at, heads.event_seq) as ern
        from heads
      ) r
      left join ${capsTable} on caps.endpoint_id = r.endpoint_id
      where r.ern <= coalesce(caps.free, ${limits.endpointCap})
      order by r.next_attempt_at, r.event_seq
      limit ${slots}
    )
    insert into webhook_key_leases (endpoint_id, lease_key, lease_until, lease_token)
    select endpoint_id, lease_key, ${leaseUntil}, ${token} from chosen_heads where true
    on conflict (endpoint_id, lease_key) do update
      set lease_until = excluded.lease_until, lease_token = excluded.lease_token
      where webhook_key_leases.lease_until < ${now}
    returning endpoint_id, lease_key`.execute(store.db);
  return rows;
}

/**
 * The claim's second statement: the leased keys' chains, the first CHAIN_MAX pending deliveries
 * of each key with what their attempts need, in sequence order, from a snapshot taken after the
 * leases were committed (so it sees every outcome a previous holder of the key wrote).
 */
export async function pendingOfKeys(store: Store, leased: Lease[]) {
  const keys = leased.map((l) => [l.endpoint_id, l.lease_key]);
  const what = sql`ev.payload, e.url, e.enabled, e.secret, e.previous_secret,
    e.previous_secret_expires_at, e.failing_since, p.webhooks_enabled`;
  const joins = sql`join webhook_events ev on ev.seq = d.event_seq
    join webhook_endpoints e on e.id = d.endpoint_id
    join projects p on p.id = e.project_id`;
  const { rows } = await (store.dialect === 'postgres'
    ? sql<ClaimedDelivery>`
        select d.*, ${what}
        from unnest(${leased.map((l) => l.endpoint_id)}::text[],
          ${leased.map((l) => l.lease_key)}::text[]) as k(endpoint_id, lease_key)
        cross join lateral (
          (select m.* from webhook_deliveries m
            where m.endpoint_id = k.endpoint_id and m.ordering_key = k.lease_key
              and m.status = 'pending'
            order by m.event_seq limit ${CHAIN_MAX})
          union all
          (select m.* from webhook_deliveries m
            where m.id = k.lease_key and m.endpoint_id = k.endpoint_id
              and m.ordering_key is null and m.status = 'pending')
        ) d
        ${joins}
        order by d.event_seq`
    : // Each key's chain ends at its CHAIN_MAX-th pending delivery, found once per key (a
      // condition on each row would look it up again for every pending row of the key).
      sql<ClaimedDelivery>`
        with k as materialized (
          select k.value ->> 0 as endpoint_id, k.value ->> 1 as lease_key, coalesce((
            select x.event_seq from webhook_deliveries x
            where x.endpoint_id = k.value ->> 0 and x.ordering_key = k.value ->> 1
              and x.status = 'pending'
            order by x.event_seq limit 1 offset ${CHAIN_MAX - 1}), ${Number.MAX_SAFE_INTEGER}
          ) as last_seq
          from json_each(${JSON.stringify(keys)}) k)
        select d.*, ${what}
        from k
        join webhook_deliveries d on d.endpoint_id = k.endpoint_id
          and d.ordering_key = k.lease_key and d.status = 'pending'
          and d.event_seq <= k.last_seq
        ${joins}
        union all
        select d.*, ${what}
        from k
        join webhook_deliveries d on d.id = k.lease_key and d.endpoint_id = k.endpoint_id
          and d.ordering_key is null and d.status = 'pending'
        ${joins}
        order by event_seq`
  ).execute(store.db);
  return rows;
}

/**
 * The chains of a claim's rows (in sequence order, so each chain in its key's order), each
 * delivery with its key's lease. A chain ends before its first delivery that is not due
 * (waiting for a retry): later ones of the key wait for it.
 */
export function chainsOf(
  rows: ClaimedDelivery[],
  now: string,
  leaseUntil: string,
  token: string,
): Map<string, ClaimedDelivery[]> {
  const chains = new Map<string, ClaimedDelivery[]>();
  const stopped = new Set<string>();
  for (const row of rows) {
    const leaseKey = row.ordering_key ?? row.id;
    const key = chainKey(row.endpoint_id, leaseKey);
    if (stopped.has(key)) continue;
    if (row.next_attempt_at === null || row.next_attempt_at > now) {
      stopped.add(key);
      continue;
    }
    const claimed = { ...row, lease_key: leaseKey, lease_until: leaseUntil, lease_token: token };
    const list = chains.get(key);
    if (list) list.push(claimed);
    else chains.set(key, [claimed]);
  }
  return chains;
}

/** The key of a chain in {@link chainsOf}'s map. */
export function chainKey(endpointId: string, leaseKey: string) {
  return `${endpointId} ${leaseKey}`;
}

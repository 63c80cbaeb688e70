import type { CreateProjectBody, Product, Project, UpdateProjectBody } from '@svc/protocol';
import { PRODUCTS } from '@svc/protocol';
import type { Transaction } from 'kysely';
import type { KeyStore } from '../auth/key-store.ts';
import { type Clock, iso } from '../clock.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { json, type Store } from '../storage/db.ts';
import type { Database, ProjectsTable } from '../storage/schema.ts';

export function toProject(row: ProjectsTable): Project {
  return {
    id: row.id,
    name: row.name,
    products: json<Product[]>(row.products),
    webhooksEnabled: row.webhooks_enabled === 1,
    settings: json<Project['settings']>(row.settings),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * A settings validator per product: returns the normalised settings, or throws an ApiError
 * (`invalid_request`, or a product's own code) for bad ones. May be async (e.g. to check that
 * no other project claims the same value).
 */
export type SettingsValidator = (
  value: unknown,
  project: Project,
) => Record<string, unknown> | Promise<Record<string, unknown>>;

/**
 * Values of a product's settings that one project at a time may hold (Links' custom domains):
 * stored as claims (`project_claims`, `<product>:<value>`) in the transaction that writes the
 * settings, so two projects claiming the same value at once cannot both succeed.
 */
export interface UniqueSettings {
  /** The values the (validated) settings hold. */
  values(settings: Record<string, unknown>): string[];
  /** The refusal when another project holds `value`. */
  taken(value: string): ApiError;
}

/** Rounds of read, validate and conditional write before an update gives up (503). */
const UPDATE_ROUNDS = 8;

/** Called after a project was updated or deleted (e.g. to drop caches derived from it). */
export type ProjectListener = (projectId: string, deleted: boolean) => void;

/** Projects: create, read, update (including per-product settings), delete. */
export class ProjectService {
  private settingsValidators = new Map<string, SettingsValidator>();
  private uniqueSettings = new Map<string, UniqueSettings>();
  private listeners: ProjectListener[] = [];

  constructor(
    private store: Store,
    private keys: KeyStore,
    private clock: Clock,
  ) {}

  /**
   * Lets a product area validate (and normalise) its part of `settings` on PATCH, and declare the
   * values in it that no two projects may hold.
   */
  registerSettings(product: string, validator: SettingsValidator, unique?: UniqueSettings) {
    this.settingsValidators.set(product, validator);
    if (unique) this.uniqueSettings.set(product, unique);
  }

  /**
   * Records the claims that stored settings hold but `project_claims` lacks (a store written
   * before claims existed); a value two projects already hold stays with the first. Run at start.
   */
  async reconcileClaims(): Promise<void> {
    if (this.uniqueSettings.size === 0) return;
    for (const project of await this.list()) {
      const claims = this.claimsOf(project.settings, [...this.uniqueSettings.keys()]);
      if (claims.length === 0) continue;
      await this.store.db
        .insertInto('project_claims')
        .values(claims.map((claim) => ({ claim, project_id: project.id })))
        .onConflict((oc) => oc.column('claim').doNothing())
        .execute();
    }
  }

  /** The claims `settings` hold for `products` (those that declared unique values). */
  private claimsOf(settings: Record<string, unknown>, products: string[]): string[] {
    return products.flatMap((product) => {
      const unique = this.uniqueSettings.get(product);
      const value = settings[product] as Record<string, unknown> | undefined;
      return unique && value ? unique.values(value).map((v) => `${product}:${v}`) : [];
    });
  }

  /** Calls `listener` with the project id after each update or delete made on this node. */
  onChange(listener: ProjectListener) {
    this.listeners.push(listener);
  }

  private changed(id: string, deleted = false) {
    for (const listener of this.listeners) listener(id, deleted);
  }

  async create(body: CreateProjectBody): Promise<Project> {
    const now = iso(this.clock.now());
    const row: ProjectsTable = {
      id: newId('prj', this.clock.now()),
      name: body.name,
      products: JSON.stringify(body.products ?? [...PRODUCTS]),
      webhooks_enabled: body.webhooksEnabled ? 1 : 0,
      settings: '{}',
      created_at: now,
      updated_at: now,
    };
    await this.store.db.insertInto('projects').values(row).execute();
    return toProject(row);
  }

  async list(): Promise<Project[]> {
    const rows = await this.store.db
      .selectFrom('projects')
      .selectAll()
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toProject);
  }

  async get(id: string): Promise<Project> {
    return toProject(await this.row(id));
  }

  private async row(id: string): Promise<ProjectsTable> {
    const row = await this.store.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw new ApiError('project_not_found');
    return row;
  }

  /**
   * Applies a PATCH. Settings are merged per product over the stored ones and written only if the
   * stored settings are still those the validators saw, so two PATCHes of different products (or
   * a PATCH and `rewriteSettings`) never drop each other's part: the loser reads and validates
   * again. Fields other than settings are last writer wins.
   */
  async update(id: string, body: UpdateProjectBody): Promise<Project> {
    for (let round = 0; round < UPDATE_ROUNDS; round++) {
      const row = await this.row(id);
      const current = toProject(row);
      const settings: Record<string, unknown> = { ...current.settings };
      for (const [product, value] of Object.entries(body.settings ?? {})) {
        const validate = this.settingsValidators.get(product);
        if (!validate) {
          throw invalidField(
            `body.settings.${product}`,
            'is not supported',
            `settings.${product} is not supported yet.`,
          );
        }
        settings[product] = await validate(value, current);
      }
      const patch: Partial<ProjectsTable> = {
        updated_at: iso(this.clock.now()),
        settings: JSON.stringify(settings),
      };
      if (body.name !== undefined) patch.name = body.name;
      if (body.products !== undefined) patch.products = JSON.stringify(body.products);
      if (body.webhooksEnabled !== undefined) patch.webhooks_enabled = body.webhooksEnabled ? 1 : 0;
      const products = Object.keys(body.settings ?? {}).filter((p) => this.uniqueSettings.has(p));
      const written = await this.store.db.transaction().execute(async (trx) => {
        const result = await trx
          .updateTable('projects')
          .set(patch)
          .where('id', '=', id)
          .where('settings', '=', row.settings)
          .executeTakeFirst();
        if (result.numUpdatedRows === 0n) return false;
        if (products.length > 0) await this.writeClaims(trx, id, settings, products);
        return true;
      });
      if (!written) continue;
      if (body.products !== undefined) await this.keys.invalidateEverywhere();
      this.changed(id);
      return this.get(id);
    }
    throw new ApiError(
      'service_unavailable',
      'The project changed under every attempt to update it; retry.',
      { retryAfter: 1 },
      { 'Retry-After': '1' },
    );
  }

  /**
   * Makes the project's claims for `products` those of `settings`: drops the released ones and
   * inserts the new ones, refusing (and so rolling the update back) a value another project holds.
   */
  private async writeClaims(
    trx: Transaction<Database>,
    id: string,
    settings: Record<string, unknown>,
    products: string[],
  ) {
    const wanted = new Set(this.claimsOf(settings, products));
    const held = await trx
      .selectFrom('project_claims')
      .select('claim')
      .where('project_id', '=', id)
      .execute();
    const released = held
      .map((h) => h.claim)
      .filter((c) => !wanted.has(c) && products.some((p) => c.startsWith(`${p}:`)));
    if (released.length > 0) {
      await trx.deleteFrom('project_claims').where('claim', 'in', released).execute();
    }
    const heldSet = new Set(held.map((h) => h.claim));
    // In one order everywhere, so that two updates claiming the same values wait, not deadlock.
    for (const claim of [...wanted].sort()) {
      if (heldSet.has(claim)) continue;
      const inserted = await trx
        .insertInto('project_claims')
        .values({ claim, project_id: id })
        .onConflict((oc) => oc.column('claim').doNothing())
        .executeTakeFirst();
      if (inserted.numInsertedOrUpdatedRows === 0n) {
        const product = claim.slice(0, claim.indexOf(':'));
        throw this.uniqueSettings.get(product)!.taken(claim.slice(product.length + 1));
      }
    }
  }

  /**
   * Rewrites one product's part of every project's settings for which `rewrite` returns a new
   * value (null leaves it), without a validator: a product's own upkeep, such as sealing stored
   * secrets again under the current server secret. A project is written only if its settings
   * are unchanged since they were read, so a PATCH meanwhile wins. Resolves with the number of
   * projects rewritten.
   */
  async rewriteSettings(product: string, rewrite: (value: unknown) => unknown): Promise<number> {
    const rows = await this.store.db.selectFrom('projects').select(['id', 'settings']).execute();
    let rewritten = 0;
    for (const row of rows) {
      const settings = json<Record<string, unknown>>(row.settings);
      const next = settings[product] === undefined ? null : rewrite(settings[product]);
      if (next === null || next === undefined) continue;
      const result = await this.store.db
        .updateTable('projects')
        .set({ settings: JSON.stringify({ ...settings, [product]: next }) })
        .where('id', '=', row.id)
        .where('settings', '=', row.settings)
        .executeTakeFirst();
      rewritten += Number(result.numUpdatedRows);
    }
    return rewritten;
  }

  /** Deletes the project and, by cascade, its keys. */
  async delete(id: string): Promise<void> {
    const result = await this.store.db
      .deleteFrom('projects')
      .where('id', '=', id)
      .executeTakeFirst();
    if (result.numDeletedRows === 0n) throw new ApiError('project_not_found');
    await this.keys.invalidateEverywhere();
    this.changed(id, true);
  }
}

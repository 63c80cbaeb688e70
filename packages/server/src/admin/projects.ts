import type { CreateProjectBody, Product, Project, UpdateProjectBody } from '@svc/protocol';
import { PRODUCTS } from '@svc/protocol';
import type { KeyStore } from '../auth/key-store.ts';
import type { Clock } from '../clock.ts';
import { ApiError } from '../http/problem.ts';
import { newId } from '../ids.ts';
import { json, type Store } from '../storage/db.ts';
import type { ProjectsTable } from '../storage/schema.ts';

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

/** Rounds of read, validate and conditional write before an update gives up (503). */
const UPDATE_ROUNDS = 8;

/** Called after a project was updated or deleted (e.g. to drop caches derived from it). */
export type ProjectListener = (projectId: string, deleted: boolean) => void;

/** Projects: create, read, update (including per-product settings), delete. */
export class ProjectService {
  private settingsValidators = new Map<string, SettingsValidator>();
  private listeners: ProjectListener[] = [];

  constructor(
    private store: Store,
    private keys: KeyStore,
    private clock: Clock,
  ) {}

  /** Lets a product area validate (and normalise) its part of `settings` on PATCH. */
  registerSettings(product: string, validator: SettingsValidator) {
    this.settingsValidators.set(product, validator);
  }

  /** Calls `listener` with the project id after each update or delete made on this node. */
  onChange(listener: ProjectListener) {
    this.listeners.push(listener);
  }

  private changed(id: string, deleted = false) {
    for (const listener of this.listeners) listener(id, deleted);
  }

  async create(body: CreateProjectBody): Promise<Project> {
    const now = new Date(this.clock.now()).toISOString();
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
          throw new ApiError('invalid_request', `settings.${product} is not supported yet.`, {
            errors: [{ path: `body.settings.${product}`, message: 'is not supported' }],
          });
        }
        settings[product] = await validate(value, current);
      }
      const patch: Partial<ProjectsTable> = {
        updated_at: new Date(this.clock.now()).toISOString(),
        settings: JSON.stringify(settings),
      };
      if (body.name !== undefined) patch.name = body.name;
      if (body.products !== undefined) patch.products = JSON.stringify(body.products);
      if (body.webhooksEnabled !== undefined) patch.webhooks_enabled = body.webhooksEnabled ? 1 : 0;
      const result = await this.store.db
        .updateTable('projects')
        .set(patch)
        .where('id', '=', id)
        .where('settings', '=', row.settings)
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n) continue;
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

import { TypeCompiler } from '@sinclair/typebox/compiler';
import {
  LINK_DEFAULT_DEFERRED_WINDOW_SECONDS,
  LINK_DEFAULT_REFERRER_WINDOW_SECONDS,
  LinkSettings,
  type Product,
} from '@svc/protocol';
import type { ProjectService, UniqueSettings } from '../admin/projects.ts';
import type { Clock } from '../clock.ts';
import { ApiError, invalidField } from '../http/problem.ts';
import { parseDestination } from './destination.ts';

const checkSettings = TypeCompiler.Compile(LinkSettings);

/** A project's link settings with defaults applied (`allowedDestinations`: null for any). */
export type ResolvedLinkSettings = Required<Omit<LinkSettings, 'allowedDestinations'>> & {
  allowedDestinations: string[] | null;
};

function resolveSettings(raw: LinkSettings | undefined): ResolvedLinkSettings {
  return {
    domains: raw?.domains ?? [],
    android: raw?.android ?? [],
    ios: raw?.ios ?? [],
    allowedDestinations: raw?.allowedDestinations ?? null,
    deferredWindowSeconds: raw?.deferredWindowSeconds ?? LINK_DEFAULT_DEFERRED_WINDOW_SECONDS,
    referrerWindowSeconds: raw?.referrerWindowSeconds ?? LINK_DEFAULT_REFERRER_WINDOW_SECONDS,
  };
}

/** `AB:CD:…`, upper case with colons, whatever the operator typed. */
function normaliseFingerprint(value: string) {
  return value.replaceAll(':', '').toUpperCase().match(/../g)!.join(':');
}

/** One consistent read of every project's link settings. */
export interface Snapshot {
  loadedAtMs: number;
  projects: Map<string, { products: Product[]; settings: ResolvedLinkSettings }>;
  /** Custom link domain → owning project. The default host is never in here. */
  domains: Map<string, string>;
}

/**
 * Which project owns which link domain, and each project's link settings: read from the
 * projects table, cached in process (refreshed after `ttlMs`, and dropped at once when a project
 * changes on any node, see the plugin).
 */
export class LinkDirectory {
  private snapshot: Snapshot | null = null;
  private loading: Promise<Snapshot> | null = null;

  constructor(
    private projectService: ProjectService,
    private clock: Clock,
    /** The server's own host (from SVC_PUBLIC_URL): every project's default link domain. */
    readonly defaultHost: string,
    private ttlMs = 30_000,
  ) {}

  invalidate() {
    this.snapshot = null;
  }

  /** The cached snapshot while it is fresh, else null: lets the redirect skip a promise. */
  fresh(): Snapshot | null {
    const snapshot = this.snapshot;
    return snapshot && this.clock.now() - snapshot.loadedAtMs < this.ttlMs ? snapshot : null;
  }

  async current(): Promise<Snapshot> {
    const fresh = this.fresh();
    if (fresh) return fresh;
    // One load at a time; concurrent callers share it.
    this.loading ??= this.load().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  private async load(): Promise<Snapshot> {
    const projects: Snapshot['projects'] = new Map();
    const domains = new Map<string, string>();
    for (const project of await this.projectService.list()) {
      const settings = resolveSettings(project.settings.links as LinkSettings | undefined);
      projects.set(project.id, { products: project.products, settings });
      for (const domain of settings.domains) domains.set(domain, project.id);
    }
    this.snapshot = { loadedAtMs: this.clock.now(), projects, domains };
    return this.snapshot;
  }

  /** The link domain a request's Host names: a project's custom domain, else the default host. */
  async domainForHost(host: string): Promise<string> {
    return this.domainIn(await this.current(), host);
  }

  domainIn(snapshot: Snapshot, host: string): string {
    return snapshot.domains.has(host) ? host : this.defaultHost;
  }

  settingsIn(snapshot: Snapshot, projectId: string): ResolvedLinkSettings {
    return snapshot.projects.get(projectId)?.settings ?? resolveSettings(undefined);
  }

  /** True when `host` is a link domain (the default host or any project's custom domain). */
  async isLinkDomain(host: string): Promise<boolean> {
    return host === this.defaultHost || (await this.current()).domains.has(host);
  }

  async settings(projectId: string): Promise<ResolvedLinkSettings> {
    return this.settingsIn(await this.current(), projectId);
  }

  /**
   * The apps whose association files a link domain serves: the owning project's for a custom
   * domain; for the default host, those of every project with Links enabled.
   */
  async appsForDomain(domain: string): Promise<Pick<ResolvedLinkSettings, 'android' | 'ios'>> {
    const snapshot = await this.current();
    const owner = snapshot.domains.get(domain);
    const entries =
      owner !== undefined
        ? [snapshot.projects.get(owner)!]
        : [...snapshot.projects.values()].filter((p) => p.products.includes('links'));
    return {
      android: entries.flatMap((e) => e.settings.android),
      ios: entries.flatMap((e) => e.settings.ios),
    };
  }
}

/** A custom domain belongs to one project: the admin area refuses a second with `domain_taken`. */
export const LINK_DOMAINS: UniqueSettings = {
  values: (settings) => (settings as LinkSettings).domains ?? [],
  taken: (domain) => new ApiError('domain_taken', `${domain} belongs to another project.`),
};

/**
 * Validates and normalises `settings.links` for `PATCH /admin/projects/{id}`: the schema, URL
 * rules for store URLs, fingerprints in canonical form, and no custom domain that is the
 * server's own host (one another project holds is refused through {@link LINK_DOMAINS}).
 */
export function linkSettingsValidator(defaultHost: string) {
  return (value: unknown): Record<string, unknown> => {
    if (!checkSettings.Check(value)) {
      const errors = [...checkSettings.Errors(value)].slice(0, 10).map((e) => ({
        path: `body.settings.links${e.path.replaceAll('/', '.')}`,
        message: e.message,
      }));
      throw new ApiError(
        'invalid_request',
        errors.map((e) => `${e.path} ${e.message}`).join('; '),
        { errors },
      );
    }
    const settings: LinkSettings = structuredClone(value);
    for (const [i, app] of (settings.android ?? []).entries()) {
      app.sha256CertFingerprints = [
        ...new Set(app.sha256CertFingerprints.map(normaliseFingerprint)),
      ];
      if (app.storeUrl !== undefined)
        parseDestination(app.storeUrl, `settings.links.android[${i}].storeUrl`);
    }
    const domains = settings.domains ?? [];
    if (domains.includes(defaultHost)) {
      throw invalidField(
        `body.settings.links.domains.${domains.indexOf(defaultHost)}`,
        "is the server's own host",
        `${defaultHost} is the server's own host, every project's default link domain; list only custom domains.`,
      );
    }
    return settings as Record<string, unknown>;
  };
}

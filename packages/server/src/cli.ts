#!/usr/bin/env node
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const HELP = `svc — the Svc operator's command line (talks to the admin API)

Usage: svc <resource> <action> [options]

  projects list
  projects create --name NAME [--products realtime,links,verify,mail,stream,video_editor] [--webhooks]
  projects get|delete --project ID
  projects update --project ID [--name NAME] [--products …] [--webhooks|--no-webhooks] [--settings JSON]

  keys list --project ID
  keys create --project ID --type client|server [--name N] [--scopes realtime,links,verify]
              [--origin ORIGIN]… [--bundle-id ID]… [--ip IP_OR_CIDR]… [--rate-limit N] [--expires-at ISO]
  keys update --project ID --key KEY_ID [same options as create, except --type]
  keys revoke --project ID --key KEY_ID
  keys rotate --project ID --key KEY_ID [--grace SECONDS]
  keys import-legacy --project ID --legacy-key svc_… [--name N]

  webhooks list --project ID
  webhooks create --project ID --endpoint-url URL [--events room.started,…] [--description D] [--disable]
  webhooks get|delete|test --project ID --webhook ID
  webhooks update --project ID --webhook ID [--endpoint-url URL] [--events …] [--description D]
              [--enable|--disable]   (--enable also re-enables an endpoint disabled as gone/failing)
  webhooks rotate-secret --project ID --webhook ID [--overlap SECONDS]
  webhooks deliveries --project ID --webhook ID [--status pending|succeeded|failed|skipped]
  webhooks retry --project ID --webhook ID --delivery DELIVERY_ID

Options:
  --url URL      server base URL (env SVC_URL, default http://localhost:8080)
  --token TOKEN  admin token (env SVC_ADMIN_TOKEN, else DATA_DIR/admin-token)
  --json         print raw JSON

Secrets (new keys, webhook signing secrets) are printed once; store them safely.`;

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  project: { type: 'string' },
  key: { type: 'string' },
  name: { type: 'string' },
  products: { type: 'string' },
  webhooks: { type: 'boolean' },
  'no-webhooks': { type: 'boolean' },
  settings: { type: 'string' },
  type: { type: 'string' },
  scopes: { type: 'string' },
  origin: { type: 'string', multiple: true },
  'bundle-id': { type: 'string', multiple: true },
  ip: { type: 'string', multiple: true },
  'rate-limit': { type: 'string' },
  'expires-at': { type: 'string' },
  grace: { type: 'string' },
  'legacy-key': { type: 'string' },
  webhook: { type: 'string' },
  delivery: { type: 'string' },
  'endpoint-url': { type: 'string' },
  events: { type: 'string' },
  description: { type: 'string' },
  enable: { type: 'boolean' },
  disable: { type: 'boolean' },
  overlap: { type: 'string' },
  status: { type: 'string' },
} as const;

export class CliError extends Error {}

type Values = ReturnType<
  typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>
>['values'];

function list(value: string | undefined) {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function need(values: Values, name: keyof Values): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`--${String(name)} is required`);
  return v;
}

function int(value: string | undefined, name: string) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new CliError(`--${name} must be an integer`);
  return n;
}

function keyFields(values: Values) {
  const body: Record<string, unknown> = {};
  if (values.name !== undefined) body.name = values.name;
  if (values.scopes !== undefined) body.scopes = list(values.scopes);
  if (values.origin) body.allowedOrigins = values.origin;
  if (values['bundle-id']) body.allowedBundleIds = values['bundle-id'];
  if (values.ip) body.allowedIps = values.ip;
  if (values['rate-limit'] !== undefined)
    body.rateLimitPerMinute = int(values['rate-limit'], 'rate-limit');
  if (values['expires-at'] !== undefined) body.expiresAt = values['expires-at'];
  return body;
}

/** Maps a command line to one admin API call: [method, path, body]. */
export function toRequest(argv: string[]): {
  method: string;
  path: string;
  body?: unknown;
  values: Values;
} {
  const { values, positionals } = parseArgs({
    args: argv,
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  const [resource, action] = positionals;
  const p = () => encodeURIComponent(need(values, 'project'));
  const k = () => encodeURIComponent(need(values, 'key'));
  const w = () => encodeURIComponent(need(values, 'webhook'));
  const r = (method: string, path: string, body?: unknown) => ({ method, path, body, values });
  switch (`${resource} ${action}`) {
    case 'projects list':
      return r('GET', '/projects');
    case 'projects create': {
      const body: Record<string, unknown> = { name: need(values, 'name') };
      if (values.products) body.products = list(values.products);
      if (values.webhooks) body.webhooksEnabled = true;
      return r('POST', '/projects', body);
    }
    case 'projects get':
      return r('GET', `/projects/${p()}`);
    case 'projects delete':
      return r('DELETE', `/projects/${p()}`);
    case 'projects update': {
      const body: Record<string, unknown> = {};
      if (values.name) body.name = values.name;
      if (values.products) body.products = list(values.products);
      if (values.webhooks) body.webhooksEnabled = true;
      if (values['no-webhooks']) body.webhooksEnabled = false;
      if (values.settings) {
        try {
          body.settings = JSON.parse(values.settings);
        } catch {
          throw new CliError('--settings must be JSON');
        }
      }
      return r('PATCH', `/projects/${p()}`, body);
    }
    case 'keys list':
      return r('GET', `/projects/${p()}/keys`);
    case 'keys create':
      return r('POST', `/projects/${p()}/keys`, {
        type: need(values, 'type'),
        ...keyFields(values),
      });
    case 'keys update':
      return r('PATCH', `/projects/${p()}/keys/${k()}`, keyFields(values));
    case 'keys revoke':
      return r('DELETE', `/projects/${p()}/keys/${k()}`);
    case 'keys rotate':
      return r('POST', `/projects/${p()}/keys/${k()}/rotate`, {
        gracePeriodSeconds: int(values.grace, 'grace') ?? 0,
      });
    case 'keys import-legacy':
      return r('POST', `/projects/${p()}/keys/import-legacy`, {
        key: need(values, 'legacy-key'),
        ...(values.name ? { name: values.name } : {}),
      });
    case 'webhooks list':
      return r('GET', `/projects/${p()}/webhooks`);
    case 'webhooks create':
    case 'webhooks update': {
      const body: Record<string, unknown> = {};
      if (action === 'create') body.url = need(values, 'endpoint-url');
      else if (values['endpoint-url']) body.url = values['endpoint-url'];
      if (values.events !== undefined) body.events = list(values.events);
      if (values.description !== undefined) body.description = values.description;
      if (values.enable) body.enabled = true;
      if (values.disable) body.enabled = false;
      return action === 'create'
        ? r('POST', `/projects/${p()}/webhooks`, body)
        : r('PATCH', `/projects/${p()}/webhooks/${w()}`, body);
    }
    case 'webhooks get':
      return r('GET', `/projects/${p()}/webhooks/${w()}`);
    case 'webhooks delete':
      return r('DELETE', `/projects/${p()}/webhooks/${w()}`);
    case 'webhooks test':
      return r('POST', `/projects/${p()}/webhooks/${w()}/test`);
    case 'webhooks rotate-secret':
      return r('POST', `/projects/${p()}/webhooks/${w()}/rotate-secret`, {
        ...(values.overlap !== undefined ? { overlapSeconds: int(values.overlap, 'overlap') } : {}),
      });
    case 'webhooks deliveries':
      return r(
        'GET',
        `/projects/${p()}/webhooks/${w()}/deliveries${values.status ? `?status=${encodeURIComponent(values.status)}` : ''}`,
      );
    case 'webhooks retry':
      return r(
        'POST',
        `/projects/${p()}/webhooks/${w()}/deliveries/${encodeURIComponent(need(values, 'delivery'))}/retry`,
      );
    default:
      throw new CliError(`unknown command "${positionals.join(' ')}"; see svc --help`);
  }
}

function adminToken(values: Values, env: NodeJS.ProcessEnv): string {
  if (values.token) return values.token;
  if (env.SVC_ADMIN_TOKEN) return env.SVC_ADMIN_TOKEN;
  const file = path.join(path.resolve(env.DATA_DIR || './data'), 'admin-token');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  throw new CliError(
    'no admin token: pass --token, set SVC_ADMIN_TOKEN, or run where DATA_DIR/admin-token exists',
  );
}

/** Runs one command; returns the process exit code. */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  out = process.stdout,
  err = process.stderr,
) {
  try {
    if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
      out.write(`${HELP}\n`);
      return 0;
    }
    const { method, path: apiPath, body, values } = toRequest(argv);
    const base = (values.url ?? env.SVC_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
    const token = adminToken(values, env);
    let res: Response;
    try {
      res = await fetch(`${base}/v1/admin${apiPath}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (e as Error).message;
      err.write(
        `svc: cannot reach the server at ${base} (${reason}); is it running? Set --url or SVC_URL.\n`,
      );
      return 1;
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text;
      try {
        const problem = JSON.parse(text);
        message = `${problem.code}: ${problem.detail ?? problem.title}`;
      } catch {}
      err.write(`svc: ${res.status} ${message}\n`);
      return 1;
    }
    if (text) out.write(`${values.json ? text : JSON.stringify(JSON.parse(text), null, 2)}\n`);
    else out.write('done\n');
    return 0;
  } catch (e) {
    if (e instanceof CliError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err.write(`svc: ${(e as Error).message}\n`);
      return 2;
    }
    err.write(`svc: ${(e as Error).message}\n`);
    return 1;
  }
}

if (process.argv[1] && /cli\.[jt]s$|svc(\.mjs)?$/.test(process.argv[1])) {
  process.exitCode = await runCli(process.argv.slice(2));
}

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { CreatedApiKey, Project } from '@svc/protocol';
import type { Platform } from '../platform.ts';
import { makePrivateDir, restrictFiles } from '../storage/files.ts';

const TOKEN_FILE = 'admin-token';

/**
 * The admin token: `SVC_ADMIN_TOKEN` when set; otherwise the one kept in `DATA_DIR/admin-token`
 * (mode 0600), generated on first start. Only the embedded default may generate one.
 */
export function resolveAdminToken(env: {
  adminToken?: string;
  dataDir: string;
  databaseUrl?: string;
}): {
  token: string;
  generated: boolean;
  file?: string;
} {
  if (env.adminToken) return { token: env.adminToken, generated: false };
  const file = path.join(env.dataDir, TOKEN_FILE);
  if (fs.existsSync(file)) {
    restrictFiles(file);
    return { token: fs.readFileSync(file, 'utf8').trim(), generated: false, file };
  }
  if (env.databaseUrl) {
    throw new Error(
      'SVC_ADMIN_TOKEN must be set when DATABASE_URL is (a fleet cannot share a generated token)',
    );
  }
  makePrivateDir(env.dataDir);
  const token = `svc_admin_${randomBytes(32).toString('base64url')}`;
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  return { token, generated: true, file };
}

export interface Bootstrapped {
  project: Project;
  clientKey: CreatedApiKey;
  serverKey: CreatedApiKey;
}

/**
 * On first start with an empty store: project `default` with every product, one unrestricted
 * client key and one server key. Returns null when the store already has a project.
 */
export async function bootstrapDefaultProject(
  svc: Pick<Platform, 'store' | 'projects' | 'keys'>,
): Promise<Bootstrapped | null> {
  const any = await svc.store.db.selectFrom('projects').select('id').limit(1).executeTakeFirst();
  if (any) return null;
  const project = await svc.projects.create({ name: 'default' });
  const clientKey = await svc.keys.create(project.id, {
    type: 'client',
    name: 'default client key',
  });
  const serverKey = await svc.keys.create(project.id, {
    type: 'server',
    name: 'default server key',
  });
  return { project, clientKey, serverKey };
}

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { makePrivateDir, restrictFiles } from './storage/files.ts';

const SECRET_FILE = 'server-secret';

/**
 * The server secret that keys HMACs (verification codes, link-click fingerprints): `SVC_SECRET`
 * when set; otherwise the one kept in `DATA_DIR/server-secret` (mode 0600), generated on first
 * start. A fleet (DATABASE_URL set) must set SVC_SECRET so every node agrees.
 */
export function resolveServerSecret(config: {
  secret?: string;
  dataDir: string;
  databaseUrl?: string;
}): string {
  if (config.secret) return config.secret;
  const file = path.join(config.dataDir, SECRET_FILE);
  if (fs.existsSync(file)) {
    restrictFiles(file);
    return fs.readFileSync(file, 'utf8').trim();
  }
  if (config.databaseUrl) {
    throw new Error(
      'SVC_SECRET must be set when DATABASE_URL is (every node needs the same secret)',
    );
  }
  makePrivateDir(config.dataDir);
  const secret = randomBytes(32).toString('base64url');
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
  return secret;
}

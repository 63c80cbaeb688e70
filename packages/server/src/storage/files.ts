import fs from 'node:fs';

/**
 * Makes `dir` (and any missing parents) and restricts it to its owner (0700): the data folder
 * holds the database, the admin token and the server secret.
 */
export function makePrivateDir(dir: string) {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') {
      throw new Error(`${dir} cannot be a folder: a file is in its place (check DATA_DIR)`);
    }
    throw err;
  }
  fs.chmodSync(dir, 0o700);
}

/** Restricts each existing file of `files` to its owner (0600); missing ones are skipped. */
export function restrictFiles(...files: string[]) {
  for (const file of files) {
    try {
      fs.chmodSync(file, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/**
 * The last-known-good copies on disk (Node only; loaded with a dynamic import when
 * `cacheDir` is given, so the core runs where there is no file system): one JSON file
 * per cache key, written atomically (a temporary file in the same directory, then
 * renamed over the old one) on every fresh answer, read when loadout cannot be reached,
 * also by a new process. A file holds the key (with the API key's identity hash, never
 * the key), the ETag and the body as loadout sent it.
 */

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';

const FORMAT = 1;

export interface Stored {
  etag: string | null;
  body: string;
}

export class DiskStore {
  private made: Promise<unknown> | undefined;

  constructor(readonly directory: string) {}

  private path(key: readonly unknown[]): string {
    const digest = createHash('sha256').update(JSON.stringify(key)).digest('hex');
    return join(this.directory, `${digest.slice(0, 40)}.json`);
  }

  async write(key: readonly unknown[], etag: string | null, body: string): Promise<void> {
    // The copies hold users' instructions: readable by this user only.
    this.made ??= mkdir(this.directory, { recursive: true, mode: 0o700 });
    await this.made;
    const record = JSON.stringify({ format: FORMAT, key, etag, savedAt: Date.now() / 1000, body });
    const tmp = join(this.directory, `.tmp-${randomBytes(8).toString('hex')}.json`);
    try {
      const file = await open(tmp, 'wx', 0o600);
      try {
        await file.writeFile(record);
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(tmp, this.path(key));
    } catch (error) {
      await unlink(tmp).catch(() => {});
      throw error;
    }
  }

  async read(key: readonly unknown[]): Promise<Stored | null> {
    try {
      const record = JSON.parse(await readFile(this.path(key), 'utf8')) as Record<string, unknown>;
      const same = JSON.stringify(record.key) === JSON.stringify(key);
      if (record.format !== FORMAT || !same || typeof record.body !== 'string') return null;
      return { etag: typeof record.etag === 'string' ? record.etag : null, body: record.body };
    } catch {
      return null;
    }
  }

  async delete(key: readonly unknown[]): Promise<void> {
    await unlink(this.path(key)).catch(() => {});
  }
}

/** Names the API key in disk copies without revealing it. */
export function keyIdentity(apiKey: string): string {
  return createHash('sha256').update(`loadout-client-key\0${apiKey}`).digest('hex').slice(0, 32);
}

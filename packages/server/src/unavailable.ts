import { EventEmitter } from 'node:events';
import { iso } from './clock.ts';

/** The dependencies a node cannot answer some requests without. */
export type Dependency = 'store' | 'shared state';

/** Seconds a client is told to wait (`Retry-After`) when a dependency is unavailable. */
export const RETRY_AFTER_SECONDS = 2;

/**
 * A dependency did not answer within its deadline, refused or dropped the connection, or is
 * known to be down (then the call is refused at once, without waiting). The HTTP layer answers
 * it with 503 `service_unavailable` and `Retry-After`; it is an outage, never a bug.
 */
export class DependencyUnavailableError extends Error {
  override readonly name = 'DependencyUnavailableError';
  constructor(
    readonly dependency: Dependency,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${dependency} unavailable: ${message}`, options);
  }
}

/** The dependency whose outage `err` (or one of its causes) is, or null for any other error. */
export function unavailableDependency(err: unknown): Dependency | null {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof DependencyUnavailableError) return e.dependency;
    // SQLite's lock wait (busy_timeout) ran out: the file is held by another writer too long.
    if ((e as { code?: unknown }).code === 'SQLITE_BUSY') return 'store';
  }
  return null;
}

/**
 * Whether one dependency is up, as this node last saw it: set down by a call that timed out or
 * lost its connection, up again by the next call that succeeds. Emits `'down'` (with the error)
 * and `'up'` on each change, so areas can adapt (e.g. the key cache shortens its lifetime) and
 * the app logs each outage once rather than once per request.
 */
export class DependencyHealth extends EventEmitter<{ down: [Error]; up: [] }> {
  private isUp = true;
  private changedAtMs = Date.now();
  private error: string | null = null;

  constructor(readonly dependency: Dependency) {
    super();
  }

  get up() {
    return this.isUp;
  }

  /** When the state last changed (ms since epoch). */
  get sinceMs() {
    return this.changedAtMs;
  }

  /** The error that set it down, while it is down. */
  get lastError() {
    return this.error;
  }

  markDown(err: unknown) {
    const error = err instanceof Error ? err : new Error(String(err));
    this.error = error.message;
    if (!this.isUp) return;
    this.isUp = false;
    this.changedAtMs = Date.now();
    this.emit('down', error);
  }

  markUp() {
    if (this.isUp) return;
    this.isUp = true;
    this.error = null;
    this.changedAtMs = Date.now();
    this.emit('up');
  }

  /** The error to refuse a call with while down. */
  refusal(): DependencyUnavailableError {
    return new DependencyUnavailableError(
      this.dependency,
      `down since ${iso(this.changedAtMs)} (${this.error ?? 'unknown'})`,
    );
  }
}

/** Resolves with `promise`'s value, or with `fallback` when it takes longer than `ms`. */
export function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  return new Promise<T>((resolve) => {
    const timer = setTimeout(() => resolve(fallback), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(fallback);
      },
    );
  });
}

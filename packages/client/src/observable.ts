/** A value that changes over time: read `value`, or `subscribe` to every change. */
export interface SvcObservable<T> {
  /** The current value. */
  readonly value: T;
  /**
   * Calls `listener` with the current value at once, then with every new value (like a Kotlin
   * StateFlow collector). Returns the unsubscribe function.
   */
  subscribe(listener: (value: T) => void): () => void;
  /** Removes a listener added by `subscribe`. */
  unsubscribe(listener: (value: T) => void): void;
}

/** The writable side, kept inside the library. */
export class MutableObservable<T> implements SvcObservable<T> {
  #value: T;
  readonly #listeners = new Set<(value: T) => void>();

  constructor(initial: T) {
    this.#value = initial;
  }

  get value(): T {
    return this.#value;
  }

  /** Sets the value; listeners run only when it changes. A throwing listener is isolated. */
  set(value: T) {
    if (Object.is(value, this.#value)) return;
    this.#value = value;
    for (const listener of [...this.#listeners]) notify(listener, value);
  }

  subscribe(listener: (value: T) => void): () => void {
    this.#listeners.add(listener);
    notify(listener, this.#value);
    return () => this.unsubscribe(listener);
  }

  unsubscribe(listener: (value: T) => void) {
    this.#listeners.delete(listener);
  }
}

/** Runs an app callback; an exception in app code must not break the library's state machine. */
export function notify<A extends unknown[]>(fn: ((...args: A) => void) | undefined, ...args: A) {
  if (!fn) return;
  try {
    fn(...args);
  } catch (err) {
    queueMicrotask(() => {
      throw err;
    });
  }
}

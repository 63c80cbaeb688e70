/** The source of time for logic that tests want to control. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A time as the stores keep it: ISO 8601, UTC, milliseconds. */
export const iso = (ms: number) => new Date(ms).toISOString();

/** A clock that moves only when told: for tests. */
export class ManualClock implements Clock {
  constructor(private ms = Date.parse('2026-01-01T00:00:00.000Z')) {}
  now() {
    return this.ms;
  }
  advance(ms: number) {
    this.ms += ms;
  }
  set(ms: number) {
    this.ms = ms;
  }
}

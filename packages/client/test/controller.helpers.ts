import assert from 'node:assert/strict';
import type { SvcControllerEvent, SvcRoomControllerState } from '../src/index.ts';
import { SvcError } from '../src/index.ts';
import type { TestClient } from './helpers.ts';

/** Env for controller tests: fast quality reports and reaction batches, a small chat history. */
export const CONTROLLER_ENV: Record<string, string> = {
  SVC_REALTIME_QUALITY_INTERVAL_MS: '100',
  SVC_REALTIME_REACTION_BATCH_MS: '20',
  SVC_REALTIME_CHAT_HISTORY: '5',
  SVC_REALTIME_WAITING_TIMEOUT_MS: '60000',
  SVC_REALTIME_EMPTY_TIMEOUT_MS: '86400000',
};

/** Resolves once the client's mirrored controller state satisfies `predicate` (now or later). */
export function untilState(
  c: TestClient,
  predicate: (s: SvcRoomControllerState) => boolean,
  what = 'controller state',
  timeoutMs = 10_000,
): Promise<SvcRoomControllerState> {
  const state = c.client.controller.state;
  return new Promise((resolve, reject) => {
    let unsubscribe = () => {};
    const timer = setTimeout(() => {
      unsubscribe();
      reject(
        new Error(`timed out waiting for ${what}: ${JSON.stringify(state.value).slice(0, 600)}`),
      );
    }, timeoutMs);
    unsubscribe = state.subscribe((s) => {
      if (!predicate(s)) return;
      clearTimeout(timer);
      queueMicrotask(() => unsubscribe());
      resolve(s);
    });
  });
}

/** The controller events a client sees, with a way to wait for one. */
export interface EventLog {
  list: SvcControllerEvent[];
  /** Resolves with the first event (past or future) matching `predicate`. */
  until(
    predicate: (e: SvcControllerEvent) => boolean,
    timeoutMs?: number,
  ): Promise<SvcControllerEvent>;
  /** Events of one type, their data loosely typed for assertions. */
  of(type: string): { type: string; seq: number; data: any }[];
}

export function recordEvents(c: TestClient): EventLog {
  const list: SvcControllerEvent[] = [];
  const waiters = new Set<() => void>();
  c.client.controller.onEvent = (e) => {
    list.push(e);
    for (const w of [...waiters]) w();
  };
  return {
    list,
    of: (type) => list.filter((e) => e.type === type) as { type: string; seq: number; data: any }[],
    until(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = list.find(predicate);
          if (!found) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`timed out waiting for an event; saw ${list.map((e) => e.type).join(' ')}`),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

/** Asserts that `promise` rejects with an SvcError carrying `code`. */
export async function refused(promise: Promise<unknown>, code: string) {
  const err = await promise.then(
    () => assert.fail(`expected ${code}, but the operation succeeded`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SvcError, String(err));
  assert.equal(err.code, code, err.message);
  return err;
}

import { afterAll } from 'vitest';

/**
 * Teardown of what a helper or a test started, run when the test file ends.
 *
 * vitest runs an `afterAll` only when it is registered while the file's suites are collected: one
 * registered inside a test, a `beforeAll` or a helper called from them is accepted silently and never
 * runs (vitest 3.2; test/kit/cleanup.unit.test.ts shows it). Helpers register here instead. This module's
 * own `afterAll` is registered at import, during collection, so it always runs; it runs the teardowns
 * in reverse order of registration (a server closes before the database it uses is dropped), each even
 * when an earlier one failed, and reports every failure.
 */
const teardowns: Array<() => unknown> = [];

afterAll(async () => {
  const failures: unknown[] = [];
  while (teardowns.length > 0) {
    const teardown = teardowns.pop()!;
    try {
      await teardown();
    } catch (error) {
      failures.push(error);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} teardowns failed`);
});

/** Runs `teardown` when the test file ends, wherever it is called from (test, hook or helper). */
export function deferCleanup(teardown: () => unknown): void {
  teardowns.push(teardown);
}

/** Runs each stop, last first (a server closes before the database it uses is dropped). */
export async function stopInReverse(stops: Array<() => Promise<void>>): Promise<void> {
  while (stops.length > 0) await stops.pop()!();
}

/**
 * What `compose` starts, each start's stop pushed to `owned` as it starts, with a `stop` that runs them
 * last first. When `compose` fails, what it had started is stopped before the error is thrown.
 */
export async function startOwned<T extends object>(
  compose: (owned: Array<() => Promise<void>>) => Promise<T>,
): Promise<T & { stop: () => Promise<void> }> {
  const owned: Array<() => Promise<void>> = [];
  try {
    return Object.assign(await compose(owned), { stop: () => stopInReverse(owned) });
  } catch (error) {
    await stopInReverse(owned).catch(() => undefined);
    throw error;
  }
}

/** `given` (a kit fixture's, which its owner stops), else what `start` starts, with its `stop` pushed to `owned`. */
export async function givenOrStarted<T>(
  given: T | undefined,
  start: () => Promise<T>,
  stop: (value: T) => Promise<void>,
  owned: Array<() => Promise<void>>,
): Promise<T> {
  if (given) return given;
  const value = await start();
  owned.push(() => stop(value));
  return value;
}

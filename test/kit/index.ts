/**
 * The test kit: vitest fixtures (`test.extend`) over the kit's modules (stack, db, upstream) and its
 * harnesses. A test names what it needs (`async ({ api }) => …`) and gets it; what costs seconds to
 * start (a database, the whole service) is file-scoped: started when the file's first test asks for it,
 * shared by the file's tests, and stopped by the fixture itself after `use` returns, when the file ends
 * (nothing depends on an afterAll registered in a hook, which vitest 3.2 drops: test/kit/cleanup.ts).
 *
 * A file with options or setup of its own extends these, keeping the scope:
 *
 *   const test = kit.extend<{ api: ApiHarness }>({
 *     api: [
 *       async ({ db, upstream }, use) =>
 *         withApiHarness({ database: db, upstream, bodyLimit: '1kb' }, use, (h) => deployWithConnection(h, KEY)),
 *       { scope: 'file' },
 *     ],
 *   });
 *
 * The fixture function's first parameter must be a destructuring pattern (vitest reads it to know the
 * fixture's dependencies), hence `({}, use)` where a fixture needs none.
 */
import { test as base } from 'vitest';
import { createApiHarness, type ApiHarness, type ApiHarnessOptions } from './api.js';
import { createHarness, type Harness, type HarnessOptions } from './connections.js';
import { createFakeUpstream, type FakeUpstream, type UpstreamHandler } from './upstream.js';
import { createDatabase, type TestDatabase } from './db.js';
import { createRuntime, type RuntimeHarness, type RuntimeOptions } from './runtime.js';

export type { ApiHarness, FakeUpstream, Harness as ConnectionsHarness, RuntimeHarness, TestDatabase, UpstreamHandler };

/** Runs `body` with what `start` gives, then `stop`s it, whether `body` passed or failed. */
async function runThenStop<T>(
  start: Promise<T>,
  stop: (value: T) => Promise<void>,
  body: (value: T) => Promise<void>,
): Promise<void> {
  const value = await start;
  try {
    await body(value);
  } finally {
    await stop(value);
  }
}

/** runThenStop for a harness with a `stop` of its own, after a file's `setUp` of it. */
const setUpRunThenStop = <T extends { stop: () => Promise<void> }>(
  start: Promise<T>,
  body: (value: T) => Promise<void>,
  setUp: (value: T) => Promise<unknown> = async () => undefined,
): Promise<void> =>
  runThenStop(
    start,
    (value) => value.stop(),
    async (value) => {
      await setUp(value);
      await body(value);
    },
  );

/** A fake external API (test/kit/upstream.ts) for `body`, closed after it. */
export const withFakeUpstream = (
  handler: UpstreamHandler | undefined,
  body: (upstream: FakeUpstream) => Promise<void>,
): Promise<void> => runThenStop(createFakeUpstream(handler), (upstream) => upstream.close(), body);

/**
 * The whole API over the real stack (test/kit/api.ts) for `body`, after `setUp` (a file's
 * integrations, deployment, connections), stopped after it.
 */
export const withApiHarness = (
  options: ApiHarnessOptions,
  body: (harness: ApiHarness) => Promise<void>,
  setUp?: (harness: ApiHarness) => Promise<unknown>,
): Promise<void> => setUpRunThenStop(createApiHarness(options), body, setUp);

/** The connections area and its OAuth routes (test/kit/connections.ts) for `body`, stopped after it. */
export const withConnections = (options: HarnessOptions, body: (harness: Harness) => Promise<void>): Promise<void> =>
  runThenStop(createHarness(options), (harness) => harness.stop(), body);

/**
 * The script runtime over the real stack (test/kit/runtime.ts: workers with the runtime's activities,
 * a client with its data converter, the test connections pointing at `options.upstream`) for `body`, after
 * `setUp` (a file's handler, deployments), stopped after it.
 */
export const withRuntime = (
  options: RuntimeOptions,
  body: (runtime: RuntimeHarness) => Promise<void>,
  setUp?: (runtime: RuntimeHarness) => Promise<unknown>,
): Promise<void> => setUpRunThenStop(createRuntime(options), body, setUp);

/** A database of its own (test/kit/stack.ts) for `body`, dropped after it. */
export const withDatabase = (body: (database: TestDatabase) => Promise<void>): Promise<void> =>
  runThenStop(createDatabase(), (database) => database.drop(), body);

/* eslint-disable no-empty-pattern -- vitest requires a destructuring pattern for a fixture's dependencies */

/**
 * The kit's own fixtures, file-scoped:
 * - `db`: a database of the file's own, cloned from the migrated template, dropped when the file ends;
 * - `upstream`: the file's fake external API (404 until a test sets a handler), closed when the file ends.
 */
const kitFixtures: {
  db: [(context: object, use: (database: TestDatabase) => Promise<void>) => Promise<void>, { scope: 'file' }];
  upstream: [(context: object, use: (upstream: FakeUpstream) => Promise<void>) => Promise<void>, { scope: 'file' }];
} = {
  db: [async ({}, use: (database: TestDatabase) => Promise<void>) => withDatabase(use), { scope: 'file' }],
  upstream: [
    async ({}, use: (upstream: FakeUpstream) => Promise<void>) => withFakeUpstream(undefined, use),
    { scope: 'file' },
  ],
};

/* eslint-enable no-empty-pattern */

// Each test below extends vitest's own `test`, never another kit test: in vitest 3.2, `t.extend(...)`
// adds its fixtures to `t`'s own list as well, so two extensions of one test would see each other's
// fixtures (the first `api` defined would win in both). A test file extends one kit test, once.

/** `db` and `upstream`. */
export const test = base.extend<{ db: TestDatabase; upstream: FakeUpstream }>(kitFixtures);

/**
 * `db`, `upstream` and `api`: the whole service over `db`, its fixture integration's provider pointing
 * at `upstream`, two environments with their keys (test/kit/api.ts).
 */
export const apiTest = base.extend<{ db: TestDatabase; upstream: FakeUpstream; api: ApiHarness }>({
  ...kitFixtures,
  api: [async ({ db, upstream }, use) => withApiHarness({ database: db, upstream }, use), { scope: 'file' }],
});

/**
 * `db`, `upstream` and `connections`: the connections area over `db`, its OAuth routes on 127.0.0.1
 * (test/kit/connections.ts).
 */
export const connectionsTest = base.extend<{ db: TestDatabase; upstream: FakeUpstream; connections: Harness }>({
  ...kitFixtures,
  connections: [async ({ db }, use) => withConnections({ db: db.pool }, use), { scope: 'file' }],
});

/** What a file's `runtime` is made with: the harness's options, the upstream's handler, the file's setup. */
export interface RuntimeFixtureOptions extends Omit<RuntimeOptions, 'database' | 'upstream'> {
  /** How `upstream` answers (404 until a test sets a handler, when omitted). */
  upstream?: UpstreamHandler;
  /** The file's setup (deployments, connections), before its first test. */
  setUp?: (runtime: RuntimeHarness) => Promise<unknown>;
}

/**
 * `db`, `upstream` and `runtime`: the script runtime over `db`, its test connections' provider pointing at
 * `upstream` (test/kit/runtime.ts), made as `options` say. A file calls it once.
 */
export const runtimeTestWith = ({ upstream: handler, setUp, ...options }: RuntimeFixtureOptions) =>
  base.extend<{ db: TestDatabase; upstream: FakeUpstream; runtime: RuntimeHarness }>({
    ...kitFixtures,
    runtime: [
      async ({ db, upstream }, use) => {
        if (handler) upstream.setHandler(handler);
        await withRuntime({ ...options, database: db, upstream }, use, setUp);
      },
      { scope: 'file' },
    ],
  });

/** `db`, `upstream` and `runtime` (runtimeTestWith) with the harness's defaults. */
export const runtimeTest = runtimeTestWith({});

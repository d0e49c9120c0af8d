import { defineConfig } from 'vitest/config';
import { UNIT_TESTS } from './vitest.unit.config.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'workflows/**/*.test.ts', 'test/**/*.test.ts'],
    // The chaos suite's short sizes run here too (test/chaos/run.ts runs them at full size). The tests
    // that need no server run in vitest.unit.config.ts instead, without the stack.
    // test/fixtures/ holds projects as users bring them (a project of the de-facto format, with its own
    // tests for that product's runner): inputs of the tests, never tests of this suite.
    exclude: ['**/node_modules/**', 'test/fixtures/**', ...UNIT_TESTS],
    // Temporal and Postgres start once per run here and are shared; each test file gets its own
    // database (test/kit/db.ts) and task queue (test/kit/stack.ts).
    globalSetup: ['test/globalSetup.ts'],
    // Temporal's native worker is happiest in a process of its own, not a worker thread.
    pool: 'forks',
    // Generous: a test of several CLI runs or runs of the stack takes minutes on a loaded machine (a
    // clean-clone CI at load 15 timed out test/cli/dryrun.test.ts's 'service test' case at 60 s).
    testTimeout: 180_000,
    hookTimeout: 180_000,
    teardownTimeout: 30_000,
  },
});

/**
 * Tests that need no server: no Postgres, no Temporal, no harness (test/kit/stack.ts), so no
 * globalSetup. `npm test` runs them first, in seconds, then the rest with vitest.config.ts.
 *
 * Where a test lands, by its file name alone:
 * - a test beside the file it tests (src/, activities/, workflows/) runs here;
 * - a test under test/ runs on the real stack (vitest.config.ts), unless it is named `*.unit.test.ts`.
 * A test here that reaches for the stack fails (`inject('stack')` is undefined); it never skips.
 */
import { defineConfig } from 'vitest/config';

export const UNIT_TESTS = [
  'src/**/*.test.ts',
  'activities/**/*.test.ts',
  'workflows/**/*.test.ts',
  'test/**/*.unit.test.ts',
];

export default defineConfig({
  test: {
    include: UNIT_TESTS,
    exclude: ['**/node_modules/**'],
    testTimeout: 60_000,
  },
});

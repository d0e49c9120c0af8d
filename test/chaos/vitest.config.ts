/**
 * The chaos suite's own vitest configuration (the project's excludes test/chaos/**), used by
 * test/chaos/run.ts: the project's settings, these files, one file at a time (they kill and restart
 * processes, and they measure).
 */
import { defineConfig } from 'vitest/config';
import base from '../../vitest.config.js';

export default defineConfig({
  test: {
    ...base.test,
    include: ['test/chaos/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    fileParallelism: false,
  },
});

import { mkdirSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startStack } from '../src/devstack/index.js';
import { createPool } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';
import { bundleWorkflows } from '../src/temporal/worker.js';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: {
      temporalAddress: string;
      temporalNamespace: string;
      postgresAdminUrl: string;
      /** Database holding every migration; each test file clones it with CREATE DATABASE … TEMPLATE. */
      templateDatabase: string;
      workflowBundlePath: string;
    };
  }
}

const TEMPLATE_DATABASE = 'service_test_template';

/** Starts Temporal and Postgres once for the whole test run, and stops them when it ends. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now();
  const stack = await startStack({ ephemeral: true, database: TEMPLATE_DATABASE });
  process.stderr.write(
    `[test] Temporal: ${stack.temporal.version} at ${stack.temporal.address}\n` +
      `[test] Postgres: ${stack.postgres.version}\n`,
  );
  const pool = createPool({ url: stack.postgres.url, max: 1 });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
  const bundleDir = mkdtempSync(join(tmpdir(), 'service-workflows-'));
  // Thread marks (src/temporal/scriptThreads.ts) of this run's in-process workers only, so that a run
  // never blames a workflow for the death of another run's worker; the test forks inherit it.
  process.env['SERVICE_THREAD_MARKS_DIR'] ??= join(bundleDir, 'thread-marks');
  mkdirSync(process.env['SERVICE_THREAD_MARKS_DIR'], { recursive: true });
  // The bundle the service's workers run (src/main.ts).
  const bundle = await bundleWorkflows();
  const workflowBundlePath = join(bundleDir, 'workflows.js');
  writeFileSync(workflowBundlePath, bundle.code);
  process.stderr.write(`[test] stack ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

  project.provide('stack', {
    temporalAddress: stack.temporal.address,
    temporalNamespace: stack.temporal.namespace,
    postgresAdminUrl: stack.postgres.adminUrl,
    templateDatabase: TEMPLATE_DATABASE,
    workflowBundlePath,
  });
  return async () => {
    rmSync(bundleDir, { recursive: true, force: true });
    await stack.stop();
  };
}

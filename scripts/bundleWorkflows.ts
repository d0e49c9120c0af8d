/**
 * `npm run bundle:workflows`: bundles the workflow code into dist/workflow-bundle.js with a manifest of
 * its inputs (dist/workflow-bundle.json), which every worker start then loads instead of bundling
 * (src/temporal/workflowBundle.ts). Run it after a build or an upgrade; a worker that finds the bundle
 * missing or stale bundles on the spot and says so.
 *
 *   npm run bundle:workflows                       # build dist/workflow-bundle.js
 *   npm run bundle:workflows -- --if-stale         # only when missing or stale (CI, deploy scripts)
 *   npm run bundle:workflows -- --out /tmp/b.js --entry test/topology/fixtures/workflowsV2.ts
 */
import { relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  buildWorkflowBundle,
  DEFAULT_WORKFLOW_BUNDLE_PATH,
  manifestEntryPath,
  readPrebuiltWorkflowBundle,
  saveWorkflowBundle,
  WORKFLOWS_PATH,
} from '../src/temporal/workflowBundle.js';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    entry: { type: 'string' },
    'if-stale': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  process.stdout.write(
    'usage: npm run bundle:workflows -- [--if-stale] [--out <bundle.js>] [--entry <workflows entry .ts>]\n' +
      `  --out       where to write the bundle (default ${relative(process.cwd(), DEFAULT_WORKFLOW_BUNDLE_PATH)}); its manifest goes beside it (.json)\n` +
      `  --entry     the workflow entry to bundle (default ${relative(process.cwd(), WORKFLOWS_PATH)})\n` +
      '  --if-stale  do nothing when the bundle there matches its sources\n',
  );
  process.exit(0);
}

const out = values.out ? resolve(values.out) : DEFAULT_WORKFLOW_BUNDLE_PATH;
const entry = values.entry ? resolve(values.entry) : WORKFLOWS_PATH;
if (values['if-stale']) {
  const prebuilt = readPrebuiltWorkflowBundle(out);
  if (prebuilt.ok && manifestEntryPath(prebuilt.manifest) === entry) {
    process.stdout.write(`${out}: up to date (built ${prebuilt.manifest.builtAt})\n`);
    process.exit(0);
  }
  if (!prebuilt.ok) process.stdout.write(`${out}: ${prebuilt.reason}\n`);
}
const started = Date.now();
try {
  const bundle = await buildWorkflowBundle(entry);
  saveWorkflowBundle(bundle, out);
  process.stdout.write(
    `${out}: ${(bundle.code.length / 1024).toFixed(0)} KiB from ${bundle.manifest.files.length} modules ` +
      `in ${((Date.now() - started) / 1000).toFixed(1)} s (inputs ${bundle.manifest.inputsHash.slice(0, 12)})\n`,
  );
} catch (error) {
  process.stderr.write(`bundle:workflows failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}

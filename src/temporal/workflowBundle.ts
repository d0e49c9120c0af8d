/**
 * The workflow bundle: built once at build time (`npm run bundle:workflows`, scripts/bundleWorkflows.ts)
 * into dist/workflow-bundle.js with a manifest of its inputs, and loaded by every worker start instead of
 * bundling anew (which takes 5–40 s on a loaded machine). A bundle whose inputs changed since it was
 * built (an edit to workflows/, to a module they import, to the SDK, or to the bundle options) is never
 * used: the worker bundles on the spot, says so, and writes the fresh bundle for the next start.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { bundleWorkflowCode, type BundleOptions, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { FAILURE_CONVERTER_PATH } from '../runtime/payloadStorage.js';
import { lineLog, log, type LineLog } from '../log.js';
import { PACKAGE_ROOT } from '../packageRoot.js';

// The sources' folder also when this module runs from the build (dist/src/temporal/workflowBundle.js).
const REPO_ROOT = PACKAGE_ROOT;

/** Entry of the deterministic workflow code that the worker bundles. */
export const WORKFLOWS_PATH = join(REPO_ROOT, 'workflows', 'index.ts');

/**
 * Workflow interceptors of the bundle: workflows/failureLog.ts names a failed run's failure type on its
 * log lines (src/temporal/logger.ts), so that an ActionError logs one line, not a warning and a stack.
 */
export const WORKFLOW_INTERCEPTOR_MODULES: readonly string[] = [join(REPO_ROOT, 'workflows', 'failureLog.ts')];

/**
 * The loader of `import text from './file.ts?source'` (code that runs in a script's own realm, loaded
 * as text: workflows/realm/source.d.ts). Not a module of the bundle, so its content counts among the
 * bundle's inputs on its own.
 */
export const REALM_SOURCE_LOADER = join(REPO_ROOT, 'src', 'temporal', 'realmSourceLoader.cjs');

/** Where `npm run bundle:workflows` writes the bundle; its manifest is beside it (`.json`). */
export const DEFAULT_WORKFLOW_BUNDLE_PATH = join(REPO_ROOT, 'dist', 'workflow-bundle.js');

const MANIFEST_VERSION = 1;

/**
 * Bundles the workflow code; a Node import in workflow code fails here, at build time. Tests bundle
 * other entries (a hostile variant, a single workflow) the same way.
 */
export async function bundleWorkflows(workflowsPath = WORKFLOWS_PATH): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [...WORKFLOW_INTERCEPTOR_MODULES],
    // Workflow failures (a script's error, say) travel encoded like payloads: the codecs encrypt their
    // message and stack, as they do for activity failures (src/runtime/failureConverter.cjs).
    failureConverterPath: FAILURE_CONVERTER_PATH,
    logger: quietBundlerLogger,
    webpackConfigHook: withRealmSources,
  });
}

type WebpackConfiguration = Parameters<NonNullable<BundleOptions['webpackConfigHook']>>[0];

/**
 * `?source` imports go to the realm source loader, and only there: the SDK's TypeScript rule (swc,
 * es2017, which would add helpers of the bundle to the text) leaves them alone.
 */
function withRealmSources(config: WebpackConfiguration): WebpackConfiguration {
  const rules = config.module?.rules ?? [];
  for (const rule of rules) {
    if (rule && typeof rule === 'object' && rule.test instanceof RegExp && rule.test.test('x.ts')) {
      rule.resourceQuery = { not: [/^\?source$/] };
    }
  }
  rules.push({ resourceQuery: /^\?source$/, use: [{ loader: REALM_SOURCE_LOADER }], type: 'javascript/auto' });
  return { ...config, module: { ...config.module, rules } };
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => log.warn({ component: 'bundler' }, message),
  error: (message: string) => log.error({ component: 'bundler' }, message),
};

/** What a prebuilt bundle was made from; stored beside it as `<bundle>.json`. */
export interface WorkflowBundleManifest {
  version: number;
  /** The bundle options, paths relative to the repository: a change to them makes the bundle stale. */
  entry: string;
  interceptors: string[];
  failureConverter: string;
  /** Every module the bundle includes (from its source map), relative to the repository. */
  files: string[];
  /** SHA-256 over the options, the content of each file and the version of each package it includes. */
  inputsHash: string;
  /** SHA-256 of the bundle's code, so a truncated or replaced bundle file is never run. */
  codeHash: string;
  builtAt: string;
}

/** The absolute path of the entry a bundle was built from. */
export function manifestEntryPath(manifest: WorkflowBundleManifest): string {
  return resolve(REPO_ROOT, manifest.entry);
}

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function manifestPathOf(bundlePath: string): string {
  return bundlePath.replace(/\.js$/, '') + '.json';
}

/** The modules webpack put in the bundle: the sources of its inline source map (absolute paths). */
function bundledModules(code: string): string[] {
  const match = /\/\/# sourceMappingURL=data:application\/json;charset=utf-8;base64,([A-Za-z0-9+/=]+)\s*$/.exec(code);
  if (!match?.[1]) throw new Error('the workflow bundle has no inline source map to list its modules from');
  const map = JSON.parse(Buffer.from(match[1], 'base64').toString('utf8')) as { sources?: unknown };
  if (!Array.isArray(map.sources)) throw new Error('the workflow bundle’s source map lists no sources');
  return (
    map.sources
      .filter((source): source is string => typeof source === 'string' && isAbsolute(source))
      // A module loaded with a query (`?source`, code for a script's realm) is its file.
      .map((source) => source.replace(/\?[^/\\]*$/, ''))
      .filter((source) => !source.endsWith('-autogenerated-entrypoint.cjs'))
  );
}

/** The package folder of a file under node_modules (scoped or not), or undefined. */
function packageFolderOf(path: string): string | undefined {
  const parts = path.split(sep);
  const index = parts.lastIndexOf('node_modules');
  if (index < 0) return undefined;
  const name = parts[index + 1]?.startsWith('@')
    ? parts.slice(index + 1, index + 3)
    : parts.slice(index + 1, index + 2);
  return [...parts.slice(0, index + 1), ...name].join(sep);
}

/**
 * Hash of everything the bundle is made from. A package's modules count by its name and version (the
 * SDK ships sources that its source map names but that need not be on disk); every other module by its
 * content. Undefined when a module is gone (the bundle is then stale).
 */
function inputsHash(options: Pick<WorkflowBundleManifest, 'entry' | 'interceptors' | 'failureConverter' | 'files'>): {
  hash: string | undefined;
  missing?: string;
} {
  const hash = createHash('sha256');
  hash.update(JSON.stringify([MANIFEST_VERSION, options.entry, options.interceptors, options.failureConverter]));
  // The realm source loader shapes the text of the modules it loads.
  hash.update(`loader\0${sha256(readFileSync(REALM_SOURCE_LOADER))}\n`);
  const packages = new Set<string>();
  for (const file of [...options.files].sort()) {
    const path = resolve(REPO_ROOT, file);
    const packageFolder = packageFolderOf(path);
    if (packageFolder) {
      packages.add(packageFolder);
      continue;
    }
    if (!existsSync(path)) return { hash: undefined, missing: file };
    hash.update(`${file}\0${sha256(readFileSync(path))}\n`);
  }
  for (const folder of [...packages].sort()) {
    const manifest = join(folder, 'package.json');
    if (!existsSync(manifest)) return { hash: undefined, missing: relative(REPO_ROOT, manifest) };
    const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string; version?: string };
    hash.update(`package ${name}@${version}\n`);
  }
  return { hash: hash.digest('hex') };
}

function currentOptions(entry: string): Pick<WorkflowBundleManifest, 'entry' | 'interceptors' | 'failureConverter'> {
  return {
    entry: relative(REPO_ROOT, entry),
    interceptors: WORKFLOW_INTERCEPTOR_MODULES.map((path) => relative(REPO_ROOT, path)),
    failureConverter: relative(REPO_ROOT, FAILURE_CONVERTER_PATH),
  };
}

/** Bundles `entry` and describes what the bundle is made of. */
export async function buildWorkflowBundle(
  entry = WORKFLOWS_PATH,
): Promise<{ code: string; manifest: WorkflowBundleManifest }> {
  const { code } = await bundleWorkflows(entry);
  const options = currentOptions(entry);
  const files = bundledModules(code).map((path) => relative(REPO_ROOT, path));
  const { hash, missing } = inputsHash({ ...options, files });
  if (!hash) throw new Error(`the workflow bundle names a module that is not on disk: ${missing}`);
  const manifest: WorkflowBundleManifest = {
    version: MANIFEST_VERSION,
    ...options,
    files,
    inputsHash: hash,
    codeHash: sha256(code),
    builtAt: new Date().toISOString(),
  };
  return { code, manifest };
}

/**
 * Writes a bundle and its manifest to `bundlePath` (atomically: a worker that starts meanwhile sees
 * the old pair or the new one, never half of one).
 */
export function saveWorkflowBundle(
  bundle: { code: string; manifest: WorkflowBundleManifest },
  bundlePath = DEFAULT_WORKFLOW_BUNDLE_PATH,
): void {
  const { code, manifest } = bundle;
  mkdirSync(dirname(bundlePath), { recursive: true });
  const suffix = `.tmp-${process.pid}-${Date.now()}`;
  try {
    writeFileSync(bundlePath + suffix, code);
    writeFileSync(manifestPathOf(bundlePath) + suffix, `${JSON.stringify(manifest, null, 2)}\n`);
    // The code first: a manifest never describes a bundle that is not there yet.
    renameSync(bundlePath + suffix, bundlePath);
    renameSync(manifestPathOf(bundlePath) + suffix, manifestPathOf(bundlePath));
  } finally {
    rmSync(bundlePath + suffix, { force: true });
    rmSync(manifestPathOf(bundlePath) + suffix, { force: true });
  }
}

/**
 * The prebuilt bundle at `bundlePath` when it matches what it was built from, or why not (and the
 * entry it names, so that a stale bundle is rebuilt from the same entry).
 */
export function readPrebuiltWorkflowBundle(
  bundlePath = DEFAULT_WORKFLOW_BUNDLE_PATH,
): { ok: true; code: string; manifest: WorkflowBundleManifest } | { ok: false; reason: string; entry?: string } {
  const manifestPath = manifestPathOf(bundlePath);
  if (!existsSync(bundlePath) || !existsSync(manifestPath))
    return { ok: false, reason: `there is none at ${bundlePath}` };
  let manifest: WorkflowBundleManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as WorkflowBundleManifest;
  } catch (error) {
    return { ok: false, reason: `its manifest ${manifestPath} is unreadable (${String(error)})` };
  }
  if (manifest.version !== MANIFEST_VERSION || !Array.isArray(manifest.files) || typeof manifest.entry !== 'string') {
    return { ok: false, reason: `its manifest ${manifestPath} is of another format` };
  }
  // A bundle may come from another entry than the service's (a second worker build): its own counts.
  const entry = resolve(REPO_ROOT, manifest.entry);
  const { hash, missing } = inputsHash({ ...currentOptions(entry), files: manifest.files });
  if (!hash) return { ok: false, reason: `${missing}, which it includes, is gone`, entry };
  if (hash !== manifest.inputsHash) {
    return {
      ok: false,
      reason: `${bundlePath} is stale (the workflow code, a module it imports, the SDK or the bundle options changed)`,
      entry,
    };
  }
  const code = readFileSync(bundlePath, 'utf8');
  if (sha256(code) !== manifest.codeHash)
    return { ok: false, reason: `${bundlePath} does not match its manifest`, entry };
  return { ok: true, code, manifest };
}

/**
 * The bundle a worker runs: the prebuilt one (SERVICE_WORKFLOW_BUNDLE, else dist/workflow-bundle.js)
 * when it matches the sources; otherwise bundled now, with a log line that says why, and written back
 * so that the next start (a supervisor's restart of a worker that died) loads it. A bundle that cannot
 * be written (a read-only install) is only logged.
 */
export async function loadWorkflowBundle(
  options: { bundlePath?: string | undefined; log?: LineLog } = {},
): Promise<{ code: string }> {
  // The path comes from the settings (SERVICE_WORKFLOW_BUNDLE, parsed at start: src/service.ts).
  const bundlePath = options.bundlePath || DEFAULT_WORKFLOW_BUNDLE_PATH;
  const log = options.log ?? lineLog('worker', 'info');
  const prebuilt = readPrebuiltWorkflowBundle(bundlePath);
  if (prebuilt.ok) return { code: prebuilt.code };
  const entry = prebuilt.entry && existsSync(prebuilt.entry) ? prebuilt.entry : WORKFLOWS_PATH;
  log(`not using the prebuilt workflow bundle: ${prebuilt.reason}; bundling ${relative(REPO_ROOT, entry)} now`);
  const started = Date.now();
  const bundle = await buildWorkflowBundle(entry);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  try {
    saveWorkflowBundle(bundle, bundlePath);
    log(`bundled in ${seconds} s; wrote ${bundlePath} for the next start`);
  } catch (error) {
    log(
      `bundled in ${seconds} s; could not write ${bundlePath} (${(error as Error).message}), so the next start bundles again`,
      'warn',
    );
  }
  return { code: bundle.code };
}

/**
 * What a script may import, and where each import comes from when `service compile` bundles it
 * (docs/scripts.md "Imports"):
 *
 * - its own files: a relative import of a file inside service-integrations/ (helpers, mappers, types, zod
 *   schemas, another script's exports) is bundled in; a file outside that folder is refused;
 * - `integration-service/runtime` (and the generated models.ts, which re-exports it);
 * - the allow-list below, bundled like the script's own code and run in its realm;
 * - `import type` of anything (types are erased; the type-check still needs the types to resolve).
 *
 * Everything else is refused with `forbidden_import`: Node's built-ins (fs, http, child_process, …:
 * a script reaches the outside world only through svc, so that every request is a durable step with the
 * connection's credentials and the outbound policy) and any other package.
 *
 * The field's allow-list is url, crypto, zod, unzipper, soap, botbuilder. Kept: `zod` (the format's
 * scripts validate with it and generate schema.zod.ts), `crypto` (hashes and HMACs: request signing,
 * stable ids) and `url` (URL, URLSearchParams), plus `buffer` (Node's Buffer, which the format's scripts
 * use as a global). Left out, each because it needs what the realm does not have: `unzipper` (Node
 * streams, zlib and the file system), `soap` (its own HTTP client, around svc, the credentials and the
 * step ledger), `botbuilder` (its own network client and Node's http server).
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { Plugin } from 'esbuild';
import { RUNTIME_SPECIFIER } from '../config/generateModels.js';
import { PACKAGE_ROOT } from '../packageRoot.js';

const SCRIPT_LIB = join(PACKAGE_ROOT, 'src', 'runtime', 'scriptLib');

/** The globals of Node that scripts use without importing them (Buffer, crypto), injected where named. */
export const SCRIPT_GLOBALS_MODULE = join(SCRIPT_LIB, 'globals.ts');

/** Declarations of what a script's realm offers (console, URL, Buffer, …) for the type-check. */
export const SCRIPT_GLOBALS_TYPES = join(SCRIPT_LIB, 'globals.d.ts');

/** The modules of the allow-list that this package provides, by specifier. */
const PROVIDED: Record<string, string> = {
  crypto: join(SCRIPT_LIB, 'crypto.ts'),
  'node:crypto': join(SCRIPT_LIB, 'crypto.ts'),
  url: join(SCRIPT_LIB, 'url.ts'),
  'node:url': join(SCRIPT_LIB, 'url.ts'),
  buffer: join(SCRIPT_LIB, 'buffer.ts'),
  'node:buffer': join(SCRIPT_LIB, 'buffer.ts'),
};

const ZOD_SPECIFIERS = ['zod', 'zod/v3', 'zod/v4'] as const;

/** Every specifier a script may import besides its own files and the runtime. */
export const ALLOWED_PACKAGES: readonly string[] = [...ZOD_SPECIFIERS, ...Object.keys(PROVIDED)];

/** Where `zod` comes from for one project. */
export interface ZodSource {
  /** `project`: the project's own node_modules/zod; else this package's, in that major's API. */
  origin: 'project' | 'service';
  /** The zod major version `import … from 'zod'` gives. */
  major: 3 | 4;
  /** Files by specifier (bundle: the module; types: its declarations); empty for the project's own zod. */
  files: Partial<Record<(typeof ZOD_SPECIFIERS)[number], { bundle: string; types: string }>>;
}

function majorOf(range: unknown): number | undefined {
  const match = typeof range === 'string' ? /(\d+)/.exec(range) : null;
  return match ? Number(match[1]) : undefined;
}

/**
 * `zod` for a project: its own installed zod (any major) when it has one; otherwise this package's zod
 * in the API of the major its package.json asks for (4), else zod 3's (the format's scripts were
 * written for zod 3: `z.record(z.any())` is zod 3 only).
 */
export function zodSource(root: string): ZodSource {
  const own = join(root, 'node_modules', 'zod', 'package.json');
  if (existsSync(own)) {
    const major = majorOf((JSON.parse(readFileSync(own, 'utf8')) as { version?: string }).version) === 4 ? 4 : 3;
    return { origin: 'project', major, files: {} };
  }
  let asked: number | undefined;
  const manifest = join(root, 'package.json');
  if (existsSync(manifest)) {
    const parsed = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, Record<string, string> | undefined>;
    asked = majorOf(parsed['dependencies']?.['zod'] ?? parsed['devDependencies']?.['zod']);
  }
  const require = createRequire(join(PACKAGE_ROOT, 'package.json'));
  const zodRoot = dirname(require.resolve('zod/package.json'));
  const v3 = { bundle: join(zodRoot, 'v3', 'index.js'), types: join(zodRoot, 'v3', 'index.d.ts') };
  const v4 = { bundle: join(zodRoot, 'v4', 'index.js'), types: join(zodRoot, 'v4', 'index.d.ts') };
  const major = asked === 4 ? 4 : 3;
  return { origin: 'service', major, files: { zod: major === 4 ? v4 : v3, 'zod/v3': v3, 'zod/v4': v4 } };
}

/** TypeScript `paths` for the type-check: the runtime, the provided modules, this package's zod. */
export function typePaths(runtimeTypes: string, zod: ZodSource): Record<string, string[]> {
  const paths: Record<string, string[]> = { [RUNTIME_SPECIFIER]: [runtimeTypes] };
  for (const [specifier, file] of Object.entries(PROVIDED)) paths[specifier] = [file];
  for (const [specifier, files] of Object.entries(zod.files)) paths[specifier] = [files.types];
  return paths;
}

/** The file a relative import names, as a bundler resolves it (`./x`, `./x.js` → `./x.ts`, `./x/index.ts`). */
export function resolveProjectImport(from: string, specifier: string): string | undefined {
  const base = resolve(dirname(from), specifier);
  const stem = base.replace(/\.(?:js|ts|mjs|cjs|mts|cts)$/, '');
  const candidates = [
    base,
    `${stem}.ts`,
    `${stem}.tsx`,
    `${stem}.js`,
    `${base}.ts`,
    `${base}/index.ts`,
    `${base}/index.js`,
  ];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
}

function inside(folder: string, file: string): boolean {
  const path = relative(folder, file);
  return path !== '' && !path.startsWith('..') && !isAbsolute(path);
}

/** Whether a specifier is one a script may import (relative ones are checked where they point). */
export function isAllowedPackage(specifier: string): boolean {
  return specifier === RUNTIME_SPECIFIER || ALLOWED_PACKAGES.includes(specifier);
}

export function forbiddenImportMessage(specifier: string): string {
  return `scripts cannot import '${specifier}': only files inside service-integrations/ (relative imports), '${RUNTIME_SPECIFIER}' and the packages ${ALLOWED_PACKAGES.filter((name) => !name.startsWith('node:')).join(', ')} (docs/scripts.md "Imports"); a script reaches the outside world through svc`;
}

/**
 * The esbuild plugin of a script's bundle: the script's own files from inside `folder` only, the
 * allow-list from where it comes, the runtime left to the realm's `require`, anything else refused
 * (at the import, with its file and line). Code of the allowed packages and of this package's modules
 * resolves its own imports as usual.
 */
export function scriptModulesPlugin(options: { folder: string; zod: ZodSource }): Plugin {
  const folder = realpathSync(resolve(options.folder));
  // Where a file really is: a link inside the folder to a file outside it is outside.
  const real = (path: string): string => (existsSync(path) ? realpathSync(path) : path);
  const trusted = (importer: string): boolean =>
    importer.split(sep).includes('node_modules') || importer.startsWith(SCRIPT_LIB + sep);
  return {
    name: 'script-modules',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === 'entry-point') return undefined;
        const specifier = args.path;
        if (specifier === RUNTIME_SPECIFIER) return { path: specifier, external: true };
        if (args.importer !== '' && trusted(args.importer)) return undefined;
        if (specifier.startsWith('.') || isAbsolute(specifier)) {
          const target = resolve(args.resolveDir, specifier);
          const file = resolveProjectImport(join(args.resolveDir, 'importer'), specifier);
          if (!inside(folder, real(target)) || (file !== undefined && !inside(folder, real(file)))) {
            return {
              errors: [
                {
                  text: `scripts cannot import '${specifier}': it is outside service-integrations/ (only the project's files inside that folder are bundled into a script)`,
                },
              ],
            };
          }
          return undefined;
        }
        const provided = PROVIDED[specifier];
        if (provided !== undefined) return { path: provided };
        if ((ZOD_SPECIFIERS as readonly string[]).includes(specifier)) {
          const files = options.zod.files[specifier as (typeof ZOD_SPECIFIERS)[number]];
          return files ? { path: files.bundle } : undefined;
        }
        return { errors: [{ text: forbiddenImportMessage(specifier) }] };
      });
    },
  };
}

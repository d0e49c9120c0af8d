/**
 * What the structural tests of the hosting files share (test/compose.test.ts, test/hosting.test.ts):
 * Compose's interpolation, an image's tag, and the environment variables the service reads.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { settingsSchema } from '../../src/settings.js';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** Compose's interpolation (`${VAR}`, `${VAR:-default}`, `${VAR:?message}`) against `vars`. */
export function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(
    /\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}/g,
    (_match, name: string, operator?: string, rest?: string) => {
      const set = vars[name];
      const empty = set === undefined || (operator?.startsWith(':') === true && set === '');
      if (operator?.endsWith('?') && empty) throw new Error(`compose needs ${name}: ${rest ?? ''}`);
      if (operator?.endsWith('-') && empty) return rest ?? '';
      return set ?? '';
    },
  );
}

/** `name:tag` of an image; the tag must name one exact version (or the image be pinned by digest). */
export function tagOf(image: string): string {
  return /^[a-z0-9./-]+:([^@]+)(?:@sha256:[0-9a-f]{64})?$/.exec(image)?.[1] ?? '';
}

/** An exact release: `1.2.3`, `16.10-bookworm`, `1.29.1-tctl-1.18.4-cli-1.5.0`; never `latest` or a bare major. */
export const EXACT_TAG = /^\d+\.\d+(\.\d+)?(-[a-z0-9.-]+)?$/;

/** The non-test TypeScript files under `dir` of the repository. */
export function sourceFiles(dir: string): string[] {
  const walk = (path: string): string[] =>
    readdirSync(path).flatMap((name) => {
      const child = join(path, name);
      if (statSync(child).isDirectory()) return walk(child);
      return child.endsWith('.ts') && !child.endsWith('.test.ts') ? [child] : [];
    });
  return walk(join(REPO, dir));
}

/** Every environment variable the service reads: its settings, and `env['NAME']` reads in its code. */
export function variablesTheServiceReads(): Set<string> {
  const names = new Set(Object.keys(settingsSchema.shape));
  for (const file of [...sourceFiles('src'), ...sourceFiles('activities')]) {
    for (const match of readFileSync(file, 'utf8').matchAll(
      /env\[['"]([A-Z][A-Z0-9_]+)['"]\]|env\.([A-Z][A-Z0-9_]+)\b/g,
    )) {
      names.add(match[1] ?? match[2] ?? '');
    }
  }
  return names;
}

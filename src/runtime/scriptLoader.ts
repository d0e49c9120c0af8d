/**
 * Deployed bundles as a run evaluates them: fetched by hash from the environment's own bundles
 * (ScriptStore) and instrumented with loop protection (src/runtime/instrument.ts). Bundles are
 * immutable by hash, so a few instrumented ones are kept per process, keyed by environment too: a
 * run gets only what was deployed to its own environment. Used by the `loadScript` step
 * (activities/runtime.ts) and by the API, which hands a small bundle to the action it starts
 * (src/temporal/syncControl.ts).
 */
import { ServiceError } from '../errors.js';
import type { LoadedScript } from './definitions.js';
import { budgetFunctionName, instrumentScript } from './instrument.js';
import type { ScriptStore } from './scriptStore.js';

const LOADED_SCRIPTS_KEPT = 50;

const providerNamed = new WeakMap<LoadedScript, boolean>();

/**
 * Whether a bundle may read `svc.provider` (the word `provider` on its own: `providerConfigKey` does
 * not count). Only such a bundle costs its run a lookup of the integration's provider. Read once per
 * loaded bundle (the loader keeps it), not at every run.
 */
export function namesProvider(script: LoadedScript): boolean {
  let named = providerNamed.get(script);
  if (named === undefined) {
    named = /\bprovider\b/.test(script.code);
    providerNamed.set(script, named);
  }
  return named;
}

export interface ScriptLoader {
  /**
   * The bundle with this hash deployed to the environment, instrumented; `script_not_found` when it
   * was not deployed there, `invalid_script` (final) when it does not parse.
   */
  load(hash: string, environmentId: string): Promise<LoadedScript>;
}

export function createScriptLoader(scripts: Pick<ScriptStore, 'get'>): ScriptLoader {
  const loaded = new Map<string, LoadedScript>();
  return {
    async load(hash, environmentId) {
      const key = `${environmentId}\n${hash}`;
      const cached = loaded.get(key);
      if (cached) return cached;
      const code = await scripts.get(hash, environmentId);
      const budget = budgetFunctionName(code);
      let instrumented: string;
      try {
        instrumented = instrumentScript(code, budget);
      } catch (error) {
        throw new ServiceError(
          'invalid_script',
          `the bundle ${hash.slice(0, 12)} does not parse: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      const script = { hash, code: instrumented, budget };
      loaded.set(key, script);
      if (loaded.size > LOADED_SCRIPTS_KEPT) loaded.delete(loaded.keys().next().value!);
      return script;
    },
  };
}

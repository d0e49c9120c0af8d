/**
 * service.yaml → typed configuration. `compileConfig` is pure (text in, config and problems out);
 * `loadConfigFile` reads a file and throws a {@link ConfigError} listing every problem.
 */
import { readFile } from 'node:fs/promises';
import { ConfigError } from './problems.js';
import type { ServiceConfig } from './types.js';
import { compileConfig } from './validate.js';

export { compileConfig, type ConfigResult } from './validate.js';
export { generateModels } from './generateModels.js';
export { MAX_ALIAS_VALUES } from './load.js';
export { ConfigError, formatProblems, PROBLEM_CODES, type ConfigProblem, type ProblemCode } from './problems.js';
export type * from './types.js';
export { actionOutputType, DEFAULT_RUNS, inputTypeOf, MIN_RUNS_MS } from './types.js';

/** Reads and compiles a service.yaml; throws ConfigError (code `invalid_config`) when it has errors. */
export async function loadConfigFile(file: string): Promise<ServiceConfig> {
  const text = await readFile(file, 'utf8');
  const result = compileConfig(text);
  if (result.config === null) throw new ConfigError(file, result.problems);
  return result.config;
}

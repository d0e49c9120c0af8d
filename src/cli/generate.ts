/** `service generate`: validate service.yaml, write models.ts, create a stub for every script that has none. */
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import { generateModels, type ServiceConfig } from '../config/index.js';
import { actionStub, syncStub } from './templates.js';
import { projectPaths, readProjectConfig, scriptPath, writeIfChanged, type ProjectProblem } from './project.js';

export interface GenerateResult {
  ok: boolean;
  config: ServiceConfig | null;
  problems: ProjectProblem[];
  /** Config problems printed like a compiler (source line and caret). */
  report: string;
  modelsWritten: boolean;
  /** Stub scripts created, relative to the root. */
  stubsCreated: string[];
}

/** With `write: false` only validates (what `service validate` does). */
export async function generateProject(options: { root: string; write?: boolean }): Promise<GenerateResult> {
  const paths = projectPaths(options.root);
  const { config, problems, report } = await readProjectConfig(paths);
  if (config === null) return { ok: false, config, problems, report, modelsWritten: false, stubsCreated: [] };
  if (options.write === false) return { ok: true, config, problems, report, modelsWritten: false, stubsCreated: [] };

  const modelsWritten = await writeIfChanged(paths.modelsFile, generateModels(config));
  const stubsCreated: string[] = [];
  for (const integration of config.integrations) {
    for (const sync of integration.syncs) {
      const file = scriptPath(paths, integration.id, 'sync', sync.name);
      if (!existsSync(file)) {
        await writeIfChanged(file, syncStub(sync));
        stubsCreated.push(relative(paths.root, file));
      }
    }
    for (const action of integration.actions) {
      const file = scriptPath(paths, integration.id, 'action', action.name);
      if (!existsSync(file)) {
        await writeIfChanged(file, actionStub(action));
        stubsCreated.push(relative(paths.root, file));
      }
    }
  }
  return { ok: true, config, problems, report, modelsWritten, stubsCreated };
}

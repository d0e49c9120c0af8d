/** `service init`: scaffolds service-integrations/ with an example integration that compiles as it is. */
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import { generateProject, type GenerateResult } from './generate.js';
import { FOLDER, projectPaths, scriptPath, writeIfChanged } from './project.js';
import {
  EXAMPLE_ACTION,
  EXAMPLE_SERVICE_YAML,
  EXAMPLE_SYNC,
  EXAMPLE_TEST_DIR,
  EXAMPLE_TEST_FIXTURE,
  EXAMPLE_TEST_SNAPSHOT,
  GITIGNORE,
  TSCONFIG,
} from './templates.js';

export type InitResult =
  { ok: false; reason: 'exists'; file: string } | { ok: true; created: string[]; generated: GenerateResult };

export async function initProject(options: { root: string }): Promise<InitResult> {
  const paths = projectPaths(options.root);
  if (existsSync(paths.configFile))
    return { ok: false, reason: 'exists', file: relative(paths.root, paths.configFile) };
  const files: [string, string][] = [
    [paths.configFile, EXAMPLE_SERVICE_YAML],
    [scriptPath(paths, 'github', 'sync', 'issues'), EXAMPLE_SYNC],
    [scriptPath(paths, 'github', 'action', 'create-issue'), EXAMPLE_ACTION],
    [`${paths.folder}/tsconfig.json`, TSCONFIG],
    [`${paths.folder}/.gitignore`, GITIGNORE],
    // An example for `service test`: a recorded answer and the snapshot of what the action returns.
    [`${paths.folder}/${EXAMPLE_TEST_DIR}/fixture.json`, EXAMPLE_TEST_FIXTURE],
    [`${paths.folder}/${EXAMPLE_TEST_DIR}/snapshot.json`, EXAMPLE_TEST_SNAPSHOT],
  ];
  const created: string[] = [];
  for (const [file, content] of files) {
    // Never overwrite what the user has (a tsconfig.json of their own, say).
    if (existsSync(file)) continue;
    await writeIfChanged(file, content);
    created.push(relative(paths.root, file));
  }
  const generated = await generateProject(options);
  if (generated.modelsWritten) created.push(`${FOLDER}/models.ts`);
  return { ok: true, created, generated };
}

/**
 * What the tests of the CLI's local commands (dryrun, test, replay) share: the CLI run in-process in a
 * project folder, against the test API and the harness's Temporal with the prebuilt workflow bundle.
 */
import type { ApiHarness } from '../kit/api.js';
import { localTemporalEnv, runCliCaptured, type CliOutcome } from '../helpers/cli.js';

export async function runLocalCli(
  h: ApiHarness,
  root: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<CliOutcome> {
  return runCliCaptured(args, {
    cwd: root,
    env: { SERVICE_URL: h.baseUrl, SERVICE_SECRET_KEY: h.envA.secretKey, ...localTemporalEnv(), ...env },
  });
}

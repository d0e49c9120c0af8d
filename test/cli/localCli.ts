/**
 * What the tests of the CLI's local commands (dryrun, test, replay) share: the CLI run in-process in a
 * project folder, against the test API and the harness's Temporal with the prebuilt workflow bundle.
 */
import { runCli } from '../../src/cli/main.js';
import type { ApiHarness } from '../api/helpers/harness.js';
import { stack } from '../helpers/stack.js';

export async function runLocalCli(
  h: ApiHarness,
  root: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  const code = await runCli(args, {
    out: (text) => (out += text),
    err: (text) => (err += text),
    cwd: root,
    env: {
      SERVICE_URL: h.baseUrl,
      SERVICE_SECRET_KEY: h.envA.secretKey,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: temporalNamespace,
      SERVICE_WORKFLOW_BUNDLE: workflowBundlePath,
      ...env,
    },
  });
  return { code, out, err };
}

/**
 * The `service` command run in this process, as the CLI tests run it: its exit code and what it printed.
 */
import type { CliIo } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/main.js';
import { stack } from '../kit/stack.js';

/** What one run of the command answered. */
export interface CliOutcome {
  code: number;
  out: string;
  err: string;
}

/** Runs the `service` command with `io`'s folder and environment, capturing what it prints. */
export async function runCliCaptured(args: string[], io: Omit<CliIo, 'out' | 'err'>): Promise<CliOutcome> {
  let out = '';
  let err = '';
  const code = await runCli(args, { ...io, out: (text) => (out += text), err: (text) => (err += text) });
  return { code, out, err };
}

/** The environment of a local command (dryrun, test, replay): the harness's Temporal and prebuilt workflow bundle. */
export function localTemporalEnv(): Record<string, string> {
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  return {
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_NAMESPACE: temporalNamespace,
    SERVICE_WORKFLOW_BUNDLE: workflowBundlePath,
  };
}

/**
 * Replays workflow histories with the bundle the tests run (the current workflow code) and expects
 * every one to replay without an error: the check that recorded histories stay compatible.
 */
import type { DataConverter } from '@temporalio/common';
import type proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { expect } from 'vitest';
import type { Pool } from '../../src/db/pool.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { stack } from '../kit/stack.js';

export type History = proto.temporal.api.history.v1.IHistory;

/**
 * `db`: where the data converter finds payloads stored outside the histories; `dataConverter`: the
 * one the histories were recorded with, when it encrypts (a service's: its client's options).
 */
export async function expectReplays(
  db: Pool,
  histories: { workflowId: string; history: History }[],
  dataConverter: DataConverter = createDataConverter({ db }),
): Promise<void> {
  const results = Worker.runReplayHistories(
    { workflowBundle: { codePath: stack().workflowBundlePath }, dataConverter },
    histories,
  );
  let replayed = 0;
  for await (const result of results) {
    expect(result.error, `${result.workflowId} ${result.runId ?? ''}`).toBeUndefined();
    replayed++;
  }
  expect(replayed).toBe(histories.length);
}

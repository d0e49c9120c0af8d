/**
 * A sync entity a newer build wrote reaches a worker of this build (a rolling upgrade, docs/operations.md
 * "Upgrades"): run with this build's rules, its history would hold steps the newer build cannot replay
 * (a review showed TMPRL1100 for version 6 runs executed by version 5 code). This build fails the
 * workflow task instead, before any step, and the execution stays open for a newer worker: no request
 * sent, nothing saved. (An action cannot do the same: a runAction that throws fails, workflowFailureErrorTypes.)
 */
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow/codec-helpers.js';
import { describe, expect, it } from 'vitest';
import { SYNC_ENTITY_VERSION } from '../../src/runtime/definitions.js';
import { syncWorkflowId } from '../../src/temporal/connection.js';
import type { ManageSyncInput } from '../../workflows/manageSync.js';
import { eventually } from '../helpers/eventually.js';
import type { History } from '../helpers/replay.js';
import { syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { startFakeUpstream } from '../kit/upstream.js';

describe('work started by a newer build', () => {
  it('a sync entity of a newer version fails its workflow task and waits, untouched', async () => {
    const h = await useRuntime();
    let requests = 0;
    const api = await startFakeUpstream((_request, response) => {
      requests++;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"items":[]}');
    });
    h.connections.setBaseUrl(api.url);
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {
        const answer = await svc.get({ endpoint: '/items' });
        await svc.batchSave(answer.data.items, 'Item');
      }`),
    );
    const definition = syncDefinition({ syncName: 'newer', models: ['Item'], scriptHash });
    const workflowId = syncWorkflowId({ ...definition, connectionId: 'newer' });
    const input: ManageSyncInput = { definition, connectionId: 'newer', version: SYNC_ENTITY_VERSION + 1 };
    const handle = await h.client.workflow.start('manageSync', { taskQueue: h.taskQueue, workflowId, args: [input] });

    const failed = await eventually(
      async () => {
        const history: History = await handle.fetchHistory();
        const failure = history.events?.find((event) => event.workflowTaskFailedEventAttributes)
          ?.workflowTaskFailedEventAttributes?.failure;
        return failure ? { history, failure } : undefined;
      },
      60_000,
      'a failed workflow task',
    );
    // The failure's message is encoded (src/runtime/failureConverter.cjs): decoded as a client does.
    const decoded = await decodeOptionalFailureToOptionalError(h.client.options.loadedDataConverter, failed.failure);
    expect(decoded?.message).toContain(`knows sync entity versions up to ${SYNC_ENTITY_VERSION}`);
    const events = failed.history.events ?? [];
    // Nothing ran: no step, no activity, no child, and the execution is still open for a newer worker.
    expect(events.filter((event) => event.markerRecordedEventAttributes)).toEqual([]);
    expect(events.filter((event) => event.activityTaskScheduledEventAttributes)).toEqual([]);
    expect(events.filter((event) => event.startChildWorkflowExecutionInitiatedEventAttributes)).toEqual([]);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await handle.terminate('test over');
    expect(requests).toBe(0);
    const { rows } = await h.pool.query('SELECT 1 FROM sync_runs WHERE connection_id = $1', ['newer']);
    expect(rows).toEqual([]);
  }, 120_000);
});

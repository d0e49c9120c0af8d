/**
 * The run workflows (`runSync`, `runAction`) replay their recorded histories without non-determinism:
 * those recorded before the svc operations were declared in one table (workflows/svcOperations.ts),
 * kept in fixtures/runHistories, and those the current code records here. The scripts call every svc
 * operation that writes to the history: requests of each method (one caught 404), the three paginate
 * styles, batchSave, batchDelete, metadata reads and writes, getConnection, environment variables,
 * log flushes, a durable timer, triggerAction (a child run), an ActionError, a run that fails, and a
 * full sync with track deletes after a cache clear. An action run that triggered an action, its
 * history edited to the inputs older code recorded (no `ledgerCut`), replays too.
 *
 * RECORD_RUN_HISTORIES=1 writes the histories this run records into the fixtures (done once, with the
 * code before the operation table).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { WorkflowFailedError } from '@temporalio/client';
import { decodeArrayFromPayloads, encodeToPayloads } from '@temporalio/common/lib/internal-non-workflow/index.js';
import { loadDataConverter } from '@temporalio/common/lib/internal-non-workflow/data-converter-helpers.js';
import { describe, expect } from 'vitest';
import type { RunActionInput, RunSyncInput } from '../../src/runtime/definitions.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { rootActionId, syncRunId } from '../../src/temporal/runAuthority.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { runtimeTestWith } from '../kit/index.js';
import { actionDefinition, executeSync, syncDefinition } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json } from '../kit/upstream.js';

const { temporal } = proto;

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'runHistories');
const RECORD = process.env['RECORD_RUN_HISTORIES'] === '1';

const everyOperation = bundle(`async function (svc) {
  const metadata = await svc.getMetadata();
  await svc.updateMetadata({ seen: 1 });
  await svc.setMetadata({ ...metadata, seen: 2 });
  const connection = await svc.getConnection();
  const variables = await svc.getEnvironmentVariables();
  await svc.log('connection ' + connection.connection_id + ', ' + variables.length + ' variables');
  console.log('a console line');
  const first = await svc.get({ endpoint: '/items', params: { page: 1 }, headers: { 'x-a': 'b' } });
  await svc.post({ endpoint: '/items', data: { title: 'new' } });
  await svc.put({ endpoint: '/items/1', data: { title: 'put' } });
  await svc.patch({ endpoint: '/items/1', data: { title: 'patch' } });
  await svc.delete({ endpoint: '/items/2' });
  try {
    await svc.get({ endpoint: '/missing' });
  } catch (error) {
    await svc.log('missing: ' + error.response.status, { level: 'warn' });
  }
  await svc.batchSave(first.data.items, 'Item');
  for await (const page of svc.paginate({ endpoint: '/cursor', paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items' } })) {
    await svc.batchSave(page, 'Item');
  }
  for await (const page of svc.paginate({ endpoint: '/link', paginate: { type: 'link', responsePath: 'items', limit: 2, limitNameInRequest: 'per_page' } })) {
    await svc.batchSave(page, 'Item');
  }
  for await (const page of svc.paginate({ endpoint: '/offset', paginate: { type: 'offset', offsetNameInRequest: 'offset', limit: 2, limitNameInRequest: 'limit', responsePath: 'items' } })) {
    await svc.batchSave(page, 'Item');
  }
  await new Promise((resolve) => setTimeout(resolve, 5));
  for (let i = 0; i < 120; i++) await svc.log('line ' + i);
  await svc.batchDelete([{ id: 'c1' }], 'Item');
  const echoed = await svc.triggerAction('echo', { hello: 'world' });
  await svc.log('echoed ' + JSON.stringify(echoed));
  try {
    await svc.triggerAction('refuse', {});
  } catch (error) {
    await svc.log('refused: ' + JSON.stringify(error.payload));
  }
}`);

const echo = bundle(`async function (svc, input) {
  const { data } = await svc.get({ endpoint: '/items', params: { page: 2 } });
  return { input, count: data.items.length };
}`);

const parent = bundle(`async function (svc, input) {
  const echoed = await svc.triggerAction('echo', { from: 'parent' });
  return { echoed };
}`);

const refuse = bundle(`async function () {
  throw new ActionError({ message: 'no', reason: 'locked' });
}`);

const failing = bundle(`async function (svc) {
  await svc.batchSave([{ id: 'f1' }], 'Item');
  await svc.get({ endpoint: '/missing' });
}`);

const fullSync = bundle(`async function (svc) {
  const { data } = await svc.get({ endpoint: '/items', params: { page: 1 } });
  await svc.batchSave(data.items, 'Item');
}`);

/** The runtime, its fake API answering each request style and paging of the scripts above. */
const it = runtimeTestWith({
  upstream: (request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const page = Number(url.searchParams.get('page') ?? '1');
    if (url.pathname.startsWith('/items/')) return json(response, 200, { ok: request.method });
    switch (url.pathname) {
      case '/items':
        if (request.method !== 'GET') return json(response, 200, { ok: request.method });
        return json(response, 200, { items: [{ id: `i${page}a` }, { id: `i${page}b` }] });
      case '/cursor': {
        const cursor = url.searchParams.get('cursor');
        if (cursor === null) return json(response, 200, { items: [{ id: 'c1' }], next: 'two' });
        return json(response, 200, { items: [{ id: 'c2' }], next: '' });
      }
      case '/link': {
        const second = url.searchParams.get('page') === '2';
        const headers: Record<string, string> = second
          ? {}
          : { link: `<http://${request.headers.host}/link?page=2>; rel="next"` };
        return json(response, 200, { items: [{ id: second ? 'l2' : 'l1' }] }, headers);
      }
      case '/offset': {
        const offset = Number(url.searchParams.get('offset'));
        return json(response, 200, { items: offset === 0 ? [{ id: 'o1' }, { id: 'o2' }] : [{ id: 'o3' }] });
      }
      default:
        return json(response, 404, { error: 'not found' });
    }
  },
});

describe('run workflows: history compatibility', () => {
  async function childIds(history: History): Promise<string[]> {
    return (history.events ?? [])
      .map((event) => event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId)
      .filter((id): id is string => typeof id === 'string');
  }

  it('histories recorded before the operation table, and those recorded now, replay on the current code', async ({
    runtime: h,
  }) => {
    h.actions.set('echo', actionDefinition('echo', await h.scripts.put(echo)));
    h.actions.set('refuse', actionDefinition('refuse', await h.scripts.put(refuse)));
    const recorded: { workflowId: string; history: History }[] = [];
    const keep = async (workflowId: string): Promise<History> => {
      const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
      recorded.push({ workflowId, history });
      return history;
    };

    const every: RunSyncInput = {
      definition: syncDefinition({
        scriptHash: await h.scripts.put(everyOperation),
        syncName: 'every',
        models: ['Item'],
      }),
      connectionId: 'replay-every',
      mode: 'incremental',
    };
    const { workflowId: everyId, result } = await executeSync(h, every);
    expect(result.models['Item']?.added).toBeGreaterThan(0);
    for (const child of await childIds(await keep(everyId))) await keep(child);

    const failed: RunSyncInput = {
      definition: syncDefinition({ scriptHash: await h.scripts.put(failing), syncName: 'failing', models: ['Item'] }),
      connectionId: 'replay-failing',
      mode: 'incremental',
    };
    const failedId = syncRunId({ ...failed.definition, connectionId: failed.connectionId }, randomUUID());
    const failure = await h.client.workflow
      .execute('runSync', { taskQueue: h.taskQueue, workflowId: failedId, args: [failed] })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    await keep(failedId);

    const full: RunSyncInput = {
      definition: syncDefinition({
        scriptHash: await h.scripts.put(fullSync),
        syncName: 'full',
        syncType: 'full',
        trackDeletes: true,
        models: ['Item'],
      }),
      connectionId: 'replay-full',
      mode: 'full_refresh_and_clear_cache',
    };
    const { workflowId: fullId } = await executeSync(h, full);
    await keep(fullId);

    const actionInput: RunActionInput = {
      definition: actionDefinition('echo', h.actions.get('echo')!.scriptHash),
      connectionId: 'replay-action',
      input: { direct: true },
    };
    const actionId = rootActionId({ ...actionInput.definition, connectionId: actionInput.connectionId }, randomUUID());
    await h.client.workflow.execute('runAction', {
      taskQueue: actionTaskQueue(h.taskQueue),
      workflowId: actionId,
      args: [actionInput],
    });
    await keep(actionId);

    expect(recorded.length).toBeGreaterThanOrEqual(6);
    if (RECORD) {
      rmSync(FIXTURES, { recursive: true, force: true });
      mkdirSync(FIXTURES, { recursive: true });
      recorded.forEach(({ workflowId, history }, index) => {
        const type = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? 'run';
        const name = `${String(index).padStart(2, '0')}-${type}.json`;
        // The history in Temporal's binary encoding (what the server sends), base64; the workflow id
        // is not in the history and replay needs it.
        const encoded = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64');
        writeFileSync(join(FIXTURES, name), `${JSON.stringify({ workflowId, history: encoded }, null, 2)}\n`);
      });
    }
    await expectReplays(h.pool, recorded);

    const fixtures = readdirSync(FIXTURES)
      .filter((file) => file.endsWith('.json'))
      .map((file) => {
        const saved = JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as { workflowId: string; history: string };
        return {
          workflowId: saved.workflowId,
          history: temporal.api.history.v1.History.decode(Buffer.from(saved.history, 'base64')),
        };
      });
    expect(fixtures.length).toBeGreaterThanOrEqual(6);
    await expectReplays(h.pool, fixtures);
  }, 300_000);

  // Before d25c6b5 an action's child run was started without `ledgerCut` (svc.triggerAction's input,
  // and the API's for the parent): a parent run recorded then must replay on the code that adds it.
  it('an action run that triggered an action, recorded without ledgerCut in the inputs, replays on the current code', async ({
    runtime: h,
  }) => {
    h.actions.set('echo', actionDefinition('echo', await h.scripts.put(echo)));
    const input: RunActionInput = {
      definition: actionDefinition('parent', await h.scripts.put(parent)),
      connectionId: 'replay-parent',
      input: {},
      ledgerCut: true,
    };
    const workflowId = rootActionId({ ...input.definition, connectionId: input.connectionId }, randomUUID());
    const output = await h.client.workflow.execute('runAction', {
      taskQueue: actionTaskQueue(h.taskQueue),
      workflowId,
      args: [input],
    });
    expect(output).toMatchObject({ echoed: { input: { from: 'parent' }, count: 2 } });
    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();

    const converter = loadDataConverter(createDataConverter({ db: h.pool }));
    /** The history with `ledgerCut` taken out of the inputs of the events `pick` gives. */
    const withoutLedgerCut = async (
      pick: (
        event: proto.temporal.api.history.v1.IHistoryEvent,
      ) => { input?: proto.temporal.api.common.v1.IPayloads | null } | null | undefined,
    ): Promise<{ history: History; dropped: number }> => {
      const edited = temporal.api.history.v1.History.decode(temporal.api.history.v1.History.encode(history).finish());
      let dropped = 0;
      for (const event of edited.events) {
        const attributes = pick(event);
        if (!attributes?.input?.payloads) continue;
        const [first, ...rest] = await decodeArrayFromPayloads(converter, attributes.input.payloads);
        const { ledgerCut, ...older } = first as RunActionInput;
        expect(ledgerCut).toBe(true);
        attributes.input.payloads = (await encodeToPayloads(converter, older, ...rest)) ?? [];
        dropped++;
      }
      return { history: edited, dropped };
    };
    const child = await withoutLedgerCut((event) => event.startChildWorkflowExecutionInitiatedEventAttributes);
    expect(child.dropped).toBe(1);
    const parentAndChild = await withoutLedgerCut(
      (event) =>
        event.startChildWorkflowExecutionInitiatedEventAttributes ?? event.workflowExecutionStartedEventAttributes,
    );
    expect(parentAndChild.dropped).toBe(2);
    await expectReplays(h.pool, [
      { workflowId, history: child.history },
      { workflowId, history: parentAndChild.history },
    ]);
  }, 120_000);
});

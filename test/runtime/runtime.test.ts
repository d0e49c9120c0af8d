import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { rootActionId, syncRunId } from '../../src/temporal/runAuthority.js';
import { createPostgresLogStore } from '../../src/runtime/logStore.js';
import type { RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import {
  actionDefinition,
  serviceControl,
  stepSummaries,
  syncDefinition,
  useRuntime,
  type RuntimeHarness,
} from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const ISSUES = Array.from({ length: 25 }, (_, i) => ({ id: `i${i}`, title: `issue ${i}` }));

const linkSync = bundle(`async function sync(svc) {
  let pages = 0;
  for await (const page of svc.paginate({ endpoint: '/issues', params: { state: 'open' }, paginate: { type: 'link', responsePath: 'items', limit: 10, limitNameInRequest: 'per_page' } })) {
    pages++;
    await svc.batchSave(page.map((issue) => ({ id: issue.id, title: issue.title.toUpperCase() })), 'Issue');
  }
  await svc.log('fetched ' + pages + ' pages at ' + new Date(Date.now()).toISOString());
  const env = await svc.getEnvironmentVariables();
  await svc.updateMetadata({ region: env[0].value, last: svc.lastSyncDate ? 'incremental' : 'first' });
}`);

describe('runtime: sync and action runs on the real Temporal server', () => {
  let h: RuntimeHarness;
  let api: Awaited<ReturnType<typeof startFakeUpstream>>;

  beforeAll(async () => {
    h = await useRuntime();
    api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      if (request.headers.authorization !== 'Bearer secret-key') return json(response, 401, { error: 'no key' });
      if (url.pathname === '/issues') {
        const page = Number(url.searchParams.get('page') ?? '0');
        const per = Number(url.searchParams.get('per_page'));
        const items = ISSUES.slice(page * per, page * per + per);
        const next =
          (page + 1) * per < ISSUES.length ? `<${apiUrl}/issues?per_page=${per}&page=${page + 1}>; rel="next"` : '';
        return json(response, 200, { items }, next ? { link: next } : {});
      }
      if (url.pathname === '/echo')
        return json(response, 201, { got: JSON.parse(String(requestBody.get(request) ?? '{}')) });
      json(response, 404, { error: 'not found' });
    });
    apiUrl = api.url;
  });
  let apiUrl = '';
  const requestBody = new WeakMap<object, string>();

  it('runs a sync: paginates through svc, saves each record once, logs, reports per-model counts', async () => {
    h.connections.setBaseUrl(api.url);
    const scriptHash = await h.scripts.put(linkSync);
    const input: RunSyncInput = { definition: syncDefinition({ scriptHash }), connectionId: 'c1', mode: 'incremental' };
    const workflowId = syncRunId({ ...input.definition, connectionId: 'c1' }, randomUUID());
    const result = await h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
    });
    expect(result.models['Issue']).toEqual({ added: 25, updated: 0, deleted: 0, unchanged: 0 });
    expect(result.recordCounts).toEqual({ Issue: 25 });
    const stored = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM records');
    expect(Number(stored.rows[0]!.n)).toBe(25);
    expect(api.hits.filter((hit) => hit.startsWith('GET /issues'))).toEqual([
      'GET /issues?state=open&per_page=10',
      'GET /issues?per_page=10&page=1',
      'GET /issues?per_page=10&page=2',
    ]);
    expect(h.connections.metadata.get('c1')).toEqual({ region: 'eu', last: 'first' });

    const logs = await createPostgresLogStore({ db: h.pool }).search({
      environmentId: 'test',
      connectionId: 'c1',
      text: 'PAGES',
    });
    expect(logs).toHaveLength(1);
    expect(logs[0]!.message).toMatch(/^fetched 3 pages at 20\d\d-/);
    expect(logs[0]!.runId).toBe(workflowId);

    // Each svc operation is a named step in the history (the Web UI shows these summaries).
    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
    expect(stepSummaries(history)).toEqual(
      expect.arrayContaining([
        'GET /issues?state=open&per_page=10',
        'batchSave Issue ×10',
        'batchSave Issue ×5',
        'getEnvironmentVariables',
      ]),
    );
  });

  it('runs an action through syncControl: output returned, ActionError becomes error_type and payload', async () => {
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const helper = await h.scripts.put(
      bundle(
        `async function (svc, input) { return { doubled: input.n * 2, conn: (await svc.getConnection()).connection_id }; }`,
      ),
    );
    h.actions.set('double', actionDefinition('double', helper));
    const main = await h.scripts.put(
      bundle(`async function (svc, input) {
        if (input.fail) throw new ActionError({ message: 'issue is locked', issue: input.n });
        const res = await svc.post({ endpoint: '/echo', data: { n: input.n } });
        const inner = await svc.triggerAction('double', { n: input.n });
        await svc.setMetadata({ only: true });
        return { status: res.status, inner, meta: await svc.getMetadata() };
      }`),
    );
    const definition = actionDefinition('main', main);
    const ok = await control.runAction({ definition, connectionId: 'c2', input: { n: 21 } });
    expect(ok).toEqual({ ok: true, output: { status: 201, inner: { doubled: 42, conn: 'c2' }, meta: { only: true } } });
    const failed = await control.runAction({ definition, connectionId: 'c2', input: { n: 7, fail: true } });
    expect(failed).toEqual({
      ok: false,
      body: { error_type: 'action_script_failure', payload: { message: 'issue is locked', issue: 7 } },
    });
  });

  it('fails clearly: batchSave from an action, a missing base URL, a 404, a thrown error, a bad bundle', async () => {
    // As the service runs actions: a small bundle goes with the input, a bad one fails the run as before.
    const control = serviceControl(h);
    const run = async (source: string) =>
      control.runAction({
        definition: actionDefinition('a', await h.scripts.put(source)),
        connectionId: 'c3',
        input: {},
      });
    await expect(
      run(bundle(`async function (svc) { await svc.batchSave([{ id: 1 }], 'Issue'); }`)),
    ).rejects.toMatchObject({
      code: 'invalid_operation',
      message: expect.stringMatching(/batchSave is only available in sync scripts/),
    });
    h.connections.setBaseUrl('');
    await expect(
      run(bundle(`async function (svc) { return svc.get({ endpoint: '/issues' }); }`)),
    ).rejects.toMatchObject({
      code: 'missing_base_url',
    });
    h.connections.setBaseUrl(api.url);
    await expect(
      run(
        bundle(
          `async function (svc) { try { await svc.get({ endpoint: '/nope', retries: 3 }); } catch (e) { return { status: e.response.status, data: e.response.data, code: e.code }; } }`,
        ),
      ),
    ).resolves.toEqual({ ok: true, output: { status: 404, data: { error: 'not found' }, code: 'http_status_error' } });
    // A 404 is final: retries are for 5xx, 429 and connection errors only.
    expect(api.hits.filter((hit) => hit === 'GET /nope')).toHaveLength(1);
    await expect(run(bundle(`async function () { null.x; }`))).rejects.toMatchObject({
      code: 'script_error',
      message: expect.stringMatching(/script a failed: TypeError/),
    });
    await expect(run('module.exports.default = 42;')).rejects.toMatchObject({ code: 'invalid_script' });
    await expect(run('this is not javascript')).rejects.toMatchObject({ code: 'invalid_script' });
    await expect(run(bundle(`async function () { require('fs'); }`))).rejects.toMatchObject({ code: 'invalid_script' });
    await expect(
      run(bundle(`async function () { return [typeof process, typeof fetch, Math.random() === Math.random()]; }`)),
    ).resolves.toEqual({ ok: true, output: ['undefined', 'undefined', false] });
  });
  it('hands an action started by a client its small bundle: no loadScript step; a large or mismatched one is loaded', async () => {
    const control = serviceControl(h);
    const steps = async (workflowId: string) =>
      stepSummaries(await h.client.workflow.getHandle(workflowId).fetchHistory()).map((step) => step.split(' ')[0]);
    const small = await h.scripts.put(bundle(`async function (svc, input) { return { got: input.n }; }`));
    const idOf = (name: string) => rootActionId({ ...actionDefinition(name, ''), connectionId: 'c4' }, randomUUID());
    const smallId = idOf('small');
    await expect(
      control.runAction(
        { definition: actionDefinition('small', small), connectionId: 'c4', input: { n: 1 } },
        { workflowId: smallId },
      ),
    ).resolves.toEqual({ ok: true, output: { got: 1 } });
    expect(await steps(smallId)).not.toContain('loadScript');
    // Over ACTION_SCRIPT_INLINE_BYTES: loaded by the run, as before.
    const large = await h.scripts.put(
      bundle(
        `async function (svc, input) { const pad = ${JSON.stringify('x'.repeat(40_000))}; return { got: input.n, pad: pad.length }; }`,
      ),
    );
    const largeId = idOf('large');
    await expect(
      control.runAction(
        { definition: actionDefinition('large', large), connectionId: 'c4', input: { n: 2 } },
        { workflowId: largeId },
      ),
    ).resolves.toEqual({ ok: true, output: { got: 2, pad: 40_000 } });
    expect(await steps(largeId)).toContain('loadScript');
    // A bundle in the input that is not the definition's, or given to a nested run, is not evaluated.
    const plain = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const other = { hash: 'f'.repeat(64), code: 'module.exports.default = async () => "injected";', budget: '__b' };
    for (const extra of [{ script: other }, { script: { ...other, hash: small }, depth: 1 }]) {
      await expect(
        plain.runAction({
          definition: actionDefinition('small', small),
          connectionId: 'c4',
          input: { n: 3 },
          ...extra,
        }),
      ).resolves.toEqual({ ok: true, output: { got: 3 } });
    }
  });
});

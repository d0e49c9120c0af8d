/**
 * Issue 17, "readable steps": with payloads encrypted as the service encrypts them, the Web UI and
 * `temporal workflow show` (which read the history without the service's key) name each step by
 * method and path, with what may carry a secret redacted, while inputs and results stay ciphertext.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import type { RunSyncInput } from '../../src/runtime/definitions.js';
import { stack } from '../kit/stack.js';
import { executeSync, stepSummaries, syncDefinition, useRuntime } from '../kit/runtime.js';
import { connectTemporal } from '../../src/temporal/connection.js';
import { deferCleanup } from '../kit/cleanup.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const SECRET_IN_QUERY = 'sk_live_query_secret_0123456789';
const SECRET_IN_PATH = 'tok_path_secret_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const BODY_MARKER = 'confidential-issue-title-42';
const APPID = '9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const SLACK = 'aB3dE6gH9jK2mN5pQ8sT1vW4';
const PAT = 'ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ';
const IN_ACTION_NAME = 'customer-ssn-078051120-card-4111111111111111';

describe('step names in the history', () => {
  it('are readable and redacted while every payload stays encrypted', async () => {
    const h = await useRuntime({ encryptor: new Encryptor([randomBytes(32)]) });
    const api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const page = Number(url.searchParams.get('page') ?? '1');
      json(response, 200, {
        items: [{ id: `i${page}`, title: `${BODY_MARKER} ${page}` }],
        next: page < 3 ? page + 1 : null,
      });
    });
    h.connections.setBaseUrl(api.url);
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {
        for (let page = 1; page <= 3; page++) {
          const res = await svc.get({ endpoint: '/issues', params: { page, api_key: '${SECRET_IN_QUERY}' } });
          await svc.batchSave(res.data.items, 'Issue');
        }
        await svc.get({ endpoint: '/hooks/${SECRET_IN_PATH}/ping?state=open&access_token=${SECRET_IN_QUERY}' });
      }`),
    );
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: 'readable', models: ['Issue'], scriptHash }),
      connectionId: 'readable-1',
      mode: 'incremental',
    };
    const { workflowId, result } = await executeSync(h, input);
    expect(result.models['Issue']?.added).toBe(3);
    expect(api.hits).toContain(`GET /hooks/${SECRET_IN_PATH}/ping?state=open&access_token=${SECRET_IN_QUERY}`);

    // Read as the Web UI does: a client with Temporal's default converter, no codec, no key.
    const { temporalAddress, temporalNamespace } = stack();
    const connection = await connectTemporal({ address: temporalAddress });
    deferCleanup(() => connection.close());
    const plain = new Client({ connection, namespace: temporalNamespace });
    const history = await plain.workflow.getHandle(workflowId).fetchHistory();
    const events = history.events ?? [];
    const summaries = events
      .map((event) => event.userMetadata?.summary)
      .filter((payload) => payload?.data instanceof Uint8Array)
      .map((payload) => {
        expect(Buffer.from(payload!.metadata!['encoding']!).toString()).toBe('json/plain');
        return JSON.parse(Buffer.from(payload!.data!).toString('utf8')) as string;
      });
    expect(summaries).toEqual(
      expect.arrayContaining([
        'GET /issues?page=1&api_key=…',
        'GET /issues?page=3&api_key=…',
        'batchSave Issue ×1',
        'GET /hooks/…/ping?state=open&access_token=…',
      ]),
    );

    // Inputs and results: ciphertext only. Neither the secrets nor the API's data appear anywhere in
    // the history outside the summaries.
    // (A local activity's marker: `data` is Core's own bookkeeping, `result` the step's result.)
    const results = events
      .filter((event) => event.markerRecordedEventAttributes?.markerName === 'core_local_activity')
      .map((event) => event.markerRecordedEventAttributes!.details?.['result']?.payloads?.[0]);
    expect(results.length).toBeGreaterThanOrEqual(7);
    for (const result of results)
      expect(Buffer.from(result!.metadata!['encoding']!).toString()).toBe('binary/encrypted');
    const started = events[0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    expect(Buffer.from(started.metadata!['encoding']!).toString()).toBe('binary/encrypted');
    const raw = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
    expect(raw.includes('GET /issues?page=1')).toBe(true);
    for (const secret of [SECRET_IN_QUERY, SECRET_IN_PATH, BODY_MARKER]) {
      expect(raw.includes(secret)).toBe(false);
      expect(raw.includes(Buffer.from(secret).toString('base64').slice(0, 16))).toBe(false);
    }
  }, 120_000);

  it('carry no credential a script puts in a query, a path or an action name', async () => {
    // FINDING (fixed in src/runtime/stepSummary.ts): this test failed before the fix.
    const h = await useRuntime({ encryptor: new Encryptor([randomBytes(32)]) });
    const api = await startFakeUpstream((_request, response) => json(response, 200, { ok: true }));
    h.connections.setBaseUrl(api.url);
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {
        await svc.get({ endpoint: '/data/2.5/weather', params: { q: 'London', appid: '${APPID}' } });
        await svc.post({ endpoint: '/services/T0AB12CD3/B0EF45GH6/${SLACK}', data: { text: 'hi' } });
        await svc.get({ endpoint: '/user?${PAT}' });
        for (const name of ['${PAT}', '${IN_ACTION_NAME}', 'x'.repeat(100000) + '${APPID}']) {
          try { await svc.triggerAction(name, {}); } catch (error) { if (error.code !== 'action_not_found') throw error; }
        }
      }`),
    );
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: 'secret-summary', models: ['Issue'], scriptHash }),
      connectionId: 'secret-summary-1',
      mode: 'incremental',
    };
    const { workflowId } = await executeSync(h, input);
    expect(api.hits).toContain(`GET /user?${PAT}`);

    // Read as the Web UI does: Temporal's default converter, no codec, no key.
    const { temporalAddress, temporalNamespace } = stack();
    const connection = await connectTemporal({ address: temporalAddress });
    deferCleanup(() => connection.close());
    const history = await new Client({ connection, namespace: temporalNamespace }).workflow
      .getHandle(workflowId)
      .fetchHistory();
    const summaries = stepSummaries(history);
    expect(summaries).toEqual(
      expect.arrayContaining([
        'GET /data/2.5/weather?q=London&appid=…',
        'POST /services/T0AB12CD3/B0EF45GH6/…',
        'GET /user?…',
        'triggerAction …',
      ]),
    );
    for (const summary of summaries) expect(summary.length).toBeLessThanOrEqual(200);
    const raw = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
    for (const secret of [APPID, SLACK, PAT, IN_ACTION_NAME, 'x'.repeat(300)]) expect(raw.includes(secret)).toBe(false);
  }, 180_000);
});

/**
 * A sync entity under a flood of signals (issue 29, finding 5): Temporal refuses a 10,001st signal to
 * one workflow execution, and a paused entity used to continue as new only after a run, so a flood
 * wedged it for good (every later signal, and so POST /sync/start, answered 500). Now a waiting entity
 * continues as new once its history is long (workflows/manageSync.ts ENTITY_HISTORY_EVENTS) and a
 * signal Temporal still refuses is a 429 `sync_busy`. The floods are real-sized: past 10,000 signals.
 */
import { createHmac } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { mapLimit } from '../../src/mapLimit.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { connectionOf, deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';

// Past Temporal's default limit of signals per execution (history.maximumSignalsPerExecution).
const FLOOD = 10_200;

let h: ApiHarness;

beforeAll(async () => {
  // The per-key rate limit would turn most of the flood away before it reached Temporal.
  h = await startApiHarness({
    rateLimit: { perSecond: 1_000_000 },
    settings: { WEBHOOK_RATE_LIMIT_PER_SECOND: '1000000' },
  });
  h.fake.setHandler((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ issues: [{ id: '1', title: 'one' }] }));
  });
  await deployWithConnection(h, 'key-c1');
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'c2',
    credentials: { type: 'API_KEY', apiKey: 'key-c2' },
  });
  await h.api.integrations.update(INTEGRATION, { webhook: { secret: SECRET } });
}, 120_000);

const SECRET = 'flood-secret-123';

const ref = (connectionId = 'c1') => ({
  environmentId: h.envA.id,
  integrationId: INTEGRATION,
  connectionId,
  syncName: 'issues',
});

/** POSTs `path` with the sync selection, `count` times, 16 at once; the statuses answered, counted. */
async function flood(path: string, count: number): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  const body = JSON.stringify({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
  await mapLimit(
    Array.from({ length: count }, (_, index) => index),
    16,
    async () => {
      const response = await fetch(`${h.baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.envA.secretKey}`, 'content-type': 'application/json' },
        body,
      });
      if (response.status === 429) expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
      await response.arrayBuffer();
      statuses[response.status] = (statuses[response.status] ?? 0) + 1;
    },
  );
  return statuses;
}

describe('a sync entity under a flood of signals', () => {
  it(`${FLOOD} pauses to a paused sync: every answer a 200 or a 429, then POST /sync/start works and the sync runs`, async () => {
    const selection = { provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] };
    // auto_start is false: the entity exists, paused, once it is paused (or started) the first time.
    await h.api.syncs.pause(selection);
    const started = Date.now();
    const statuses = await flood('/sync/pause', FLOOD);
    console.log(
      `[flood] ${FLOOD} pauses in ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(statuses)}`,
    );
    expect(Object.keys(statuses).filter((status) => Number(status) >= 500)).toEqual([]);
    expect(Object.keys(statuses).every((status) => status === '200' || status === '429')).toBe(true);

    await h.api.syncs.start(selection);
    const status = await eventually<SyncStatus>(
      async () => {
        const current = await h.deps.syncs.status(ref());
        return current.latestResult && !current.paused ? current : undefined;
      },
      120_000,
      'the resumed sync to run',
    );
    expect(status.latestError).toBeNull();
    expect(status.recordCount).toEqual({ Issue: 1 });
    // The entity continued as new while it waited: its current execution is short.
    const history = await h.temporal.workflow.getHandle(`sync:${h.envA.id}:${INTEGRATION}:c1:issues`).fetchHistory();
    expect(history.events?.length ?? 0).toBeLessThan(2_500);
  }, 600_000);

  it(`${FLOOD} small signed webhooks to a paused sync: every answer a 200 or a 429, then POST /sync/start works and the sync runs them`, async () => {
    const statuses: Record<string, number> = {};
    const started = Date.now();
    await mapLimit(
      Array.from({ length: FLOOD }, (_, index) => index),
      16,
      async (index) => {
        const body = JSON.stringify({ type: 'issue.updated', issue: { id: `hook-${index}`, title: `hook ${index}` } });
        const timestamp = String(Math.floor(Date.now() / 1000));
        const response = await fetch(`${h.baseUrl}/webhook/${h.envA.name}/${INTEGRATION}?connection_id=c2`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-signature-256': `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex')}`,
            'x-signature-timestamp': timestamp,
          },
          body,
        });
        const answer = (await response.json()) as { error?: { code: string } };
        if (response.status === 429) expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
        const key = `${response.status} ${answer.error?.code ?? ''}`.trim();
        statuses[key] = (statuses[key] ?? 0) + 1;
      },
    );
    console.log(
      `[flood] ${FLOOD} webhooks in ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(statuses)}`,
    );
    expect(Object.keys(statuses).every((key) => key === '200' || key.startsWith('429 '))).toBe(true);
    // The sync's queue holds 100; the rest were refused, not lost in a wedged entity.
    expect(statuses['200']).toBe(100);

    await h.api.syncs.start({ provider_config_key: INTEGRATION, connection_id: 'c2', syncs: ['issues'] });
    const page = await eventually(
      async () => {
        const result = await h.api.records.list({ ...connectionOf('c2'), model: 'Issue', limit: 200 });
        return result.records.filter((record) => String(record['id']).startsWith('hook-')).length === 100
          ? result
          : undefined;
      },
      300_000,
      'the queued webhooks to run',
    );
    expect(page.records.length).toBeGreaterThanOrEqual(100);
    expect((await h.deps.syncs.status(ref('c2'))).paused).toBe(false);
  }, 900_000);
});

/**
 * What the step ledger keeps of an open execution (workflows/svc.ts LEDGER_KEPT_BYTES). Since e72c525 a
 * row is forgotten only once Temporal surely holds its step's result; each request's row holds its
 * whole encrypted answer, a claim-checked one too (its marker holds only a reference, so the task cut
 * never fired for big answers): a run fetching big pages kept every one of them to its end (the
 * hostile review of e72c525). Here a sync run and an action fetch PAGES answers of PAGE_BYTES each and
 * then wait on the fake API while the test reads what the ledger holds. The cut is an ordinary
 * activity (`forgetSteps`: it runs once Temporal holds the task that scheduled it), asks no
 * `patched()` mid-run (its marker can land in another workflow task live than on replay), and the
 * history it leaves replays on the current code.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';
import { expectReplays, type History } from '../helpers/replay.js';

const PAGES = 44;
const PAGE_BYTES = 512 * 1024;
// Random text: nothing on the way can make the pages smaller than they are.
const PAGE = randomBytes((PAGE_BYTES * 3) / 4).toString('base64');

const FETCH = `
  let total = 0;
  for (let i = 0; i < ${PAGES}; i++) {
    const page = await svc.get({ endpoint: '/big/' + i });
    total += page.data.length;
  }
  await svc.get({ endpoint: '/gate' });`;
const SYNC = bundle(`async function (svc) {${FETCH}
  await svc.batchSave([{ id: 'pages', total }], 'Total');
}`);
const ACTION = bundle(`async function (svc) {${FETCH}
  return { id: 'pages', total };
}`);

const YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      pages:
        description: Fetches big pages
        output: Total
        endpoint: GET /totals
        sync_type: full
        runs: every 1h
        auto_start: false
    actions:
      pages-action:
        description: Fetches big pages
        output: Total
        endpoint: POST /pages
models:
  Total:
    id: string
    total: number
`;

let h: ApiHarness;
const fetched = new Map<string, number>();
let gateArrived = 0;
let openGate: () => void = () => undefined;

beforeAll(async () => {
  h = await startApiHarness();
  h.fake.setHandler((request, response) => {
    const path = new URL(request.url ?? '/', h.fake.url).pathname;
    const page = /\/big\/(\d+)$/.exec(path)?.[1];
    if (page !== undefined) fetched.set(page, (fetched.get(page) ?? 0) + 1);
    if (path.endsWith('/gate')) {
      gateArrived++;
      void new Promise<void>((resolve) => (openGate = resolve)).then(() =>
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
      );
      return;
    }
    response.writeHead(200, { 'content-type': 'text/plain' }).end(PAGE);
  });
  await deployWithConnection(h, 'ledger-space-key', 'c1', {
    yaml: YAML,
    scripts: [
      { kind: 'sync', name: 'pages', code: SYNC },
      { kind: 'action', name: 'pages-action', code: ACTION },
    ],
  });
}, 180_000);

const measured = new Set<string>();

/** Waits for the run at the gate, reads what the ledger holds for it, and lets the run go on. */
async function ledgerAtGate(gate: number): Promise<{ rows: number; bytes: number }> {
  await eventually(async () => (gateArrived >= gate ? true : undefined), 300_000, 'the run to reach the gate');
  // An earlier run's execution may still hold rows (a sync entity's until its next run): not this run's.
  const { rows } = await h.pool.query<{ run_id: string; rows: string; bytes: string | null }>(
    'SELECT run_id, count(*) AS rows, sum(octet_length(outcome)) AS bytes FROM script_steps WHERE step >= 0 GROUP BY run_id',
  );
  openGate();
  const fresh = rows.filter((row) => !measured.has(row.run_id));
  for (const row of rows) measured.add(row.run_id);
  expect(fresh.length, 'executions holding rows at the gate').toBeLessThanOrEqual(1);
  return { rows: Number(fresh[0]?.rows ?? 0), bytes: Number(fresh[0]?.bytes ?? 0) };
}

/** The run's history: its cuts are ordinary `forgetSteps` activities, no patch marker, and it replays. */
async function expectCutsIn(workflowId: string, runId: string | undefined): Promise<void> {
  const history: History = await h.temporal.workflow.getHandle(workflowId, runId).fetchHistory();
  const events = history.events ?? [];
  const cuts = events.filter(
    (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'forgetSteps',
  ).length;
  const markers = events.map((event) => event.markerRecordedEventAttributes?.markerName);
  expect({ cuts: cuts >= 4, patchMarkers: markers.filter((name) => name === 'core_patch').length }).toEqual({
    cuts: true,
    patchMarkers: 0,
  });
  await expectReplays(h.pool, [{ workflowId, history }], h.temporal.options.dataConverter);
}

function expectEachPageOnce(): void {
  for (let i = 0; i < PAGES; i++) expect(fetched.get(String(i)), `page ${i}`).toBe(1);
  fetched.clear();
}

describe('the step ledger of an open execution whose requests answer big pages', () => {
  it('keeps a bounded part of them in a sync run, which fetches each page once and saves the right total', async () => {
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['pages'] });
    const kept = await ledgerAtGate(1);
    console.log(`[ledgerSpace] sync: ${kept.rows} rows, ${(kept.bytes / 1024 / 1024).toFixed(1)} MiB kept at the gate`);
    const run = await eventually(
      async () => {
        const { runs } = await h.api.call<{ runs: { status: string }[] }>('GET', '/sync/runs', {
          query: { provider_config_key: INTEGRATION, connection_id: 'c1' },
        });
        return runs[0] && runs[0].status !== 'running' ? runs[0] : undefined;
      },
      300_000,
      'the run to finish',
    );
    expect(run.status).toBe('success');
    const { records } = await h.api.call<{ records: { id: string; total: number }[] }>('GET', '/records', {
      query: { model: 'Total' },
      headers: { 'connection-id': 'c1', 'provider-config-key': INTEGRATION },
    });
    expect(records.map((record) => [record.id, record.total])).toEqual([['pages', PAGES * PAGE.length]]);
    expectEachPageOnce();
    const { rows } = await h.pool.query<{ run_id: string }>(`SELECT run_id FROM sync_runs WHERE connection_id = 'c1'`);
    expect(rows).toHaveLength(1);
    const [workflowId, execution] = rows[0]!.run_id.split(':run:');
    await expectCutsIn(workflowId!, execution);
    // 44 pages of 512 KiB were fetched (22 MiB of answers): the ledger keeps at most the last ~8 MiB
    // of weight (answers count twice) and the rows of the task that is not recorded yet.
    expect(kept.rows).toBeLessThan(PAGES / 2);
    expect(kept.bytes).toBeLessThan(12 * 1024 * 1024);
  }, 600_000);

  it('keeps a bounded part of them in an action, whose output is right', async () => {
    const answer = h.api.raw('POST', '/pages', {
      headers: { 'connection-id': 'c1', 'provider-config-key': INTEGRATION },
      body: {},
    });
    const kept = await ledgerAtGate(2);
    console.log(
      `[ledgerSpace] action: ${kept.rows} rows, ${(kept.bytes / 1024 / 1024).toFixed(1)} MiB kept at the gate`,
    );
    const response = await answer;
    expect(response.status).toBe(200);
    expect(response.json).toEqual({ id: 'pages', total: PAGES * PAGE.length });
    expectEachPageOnce();
    const action = await eventually(async () => {
      for await (const found of h.temporal.workflow.list({ query: `WorkflowType = 'runAction'` })) return found;
      return undefined;
    }, 60_000);
    await expectCutsIn(action.workflowId, action.runId);
    expect(kept.rows).toBeLessThan(PAGES / 2);
    expect(kept.bytes).toBeLessThan(12 * 1024 * 1024);
  }, 600_000);
});

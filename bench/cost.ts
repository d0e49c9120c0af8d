/**
 * What a run costs on Temporal (issue 31, item 2). `npx tsx bench/cost.ts [--runs N] [--connections C]
 * [--max-minutes M]`
 *
 * The service as `npm start` composes it (API and worker in this process, src/service.ts) on an
 * ephemeral dev stack, two environments, one integration whose scripts fetch one page of 10 records
 * from a fake API on loopback and save them. Then N runs of each kind:
 *
 * - scheduled: an incremental sync every 30 s (the shortest `runs`) on C connections;
 * - scheduled, outbound webhook configured: the same in an environment whose webhook URL is a receiver
 *   on loopback (so each run also delivers its "sync finished" webhook);
 * - failed: a sync every 30 s whose script throws after its request;
 * - triggered: `POST /sync/trigger` on a sync that runs every 24 h, one trigger at a time;
 * - inbound webhook: `POST /webhook/:env/:integration` for a sync subscribed to its type, one at a time.
 *
 * Then it reads the histories of those runs back from Temporal: a run is one execution of its sync's
 * entity workflow and every execution started from it (children, recursively), and it prints per run
 * the executions, history events and billable actions by Temporal Cloud's published rules
 * (src/temporal/billableActions.ts; docs/operations.md "What a run costs"), with the actions by kind,
 * and each kind's history bytes: the protobuf size of its events, as Temporal stores and sends a
 * history, with the event types that hold most of them. The first run of each entity (started by the
 * deploy, not by its kind's cause) is left out. No query is sent to any workflow (a query is an action
 * too). Loopback only; bounded by --max-minutes.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import proto from '@temporalio/proto';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createClient } from '../src/client/index.js';
import { Encryptor } from '../src/connections/encryption.js';
import { loadProviderCatalog } from '../src/connections/providers/catalog.js';
import { startTemporal } from '../src/devstack/temporal.js';
import { log } from '../src/log.js';
import { configureOutboundPolicy, OutboundPolicy } from '../src/runtime/outbound.js';
import { createService } from '../src/service.js';
import { loadSettings } from '../src/settings.js';
import { ACTION_KINDS, billableActions, type ActionKind } from '../src/temporal/billableActions.js';
import { useBenchDatabase } from './lib/database.js';

type History = proto.temporal.api.history.v1.IHistory;

const { values: flags } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    connections: { type: 'string', default: '5' },
    'max-minutes': { type: 'string', default: '15' },
  },
});
const positive = (name: string, value: string | undefined): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${String(value)}`);
  return n;
};
const RUNS = positive('runs', flags.runs);
const CONNECTIONS = positive('connections', flags.connections);
const DEADLINE = Date.now() + positive('max-minutes', flags['max-minutes']) * 60_000;
const INTEGRATION = 'cost-api';
const WEBHOOK_TYPE = 'item.created';

const YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      items:
        description: One page of items every 30 s
        output: Item
        endpoint: GET /items
        sync_type: incremental
        runs: 30s
      broken:
        description: Fetches a page and throws
        output: Item
        endpoint: GET /broken
        sync_type: incremental
        runs: 30s
      ondemand:
        description: Runs every day, and when triggered
        output: Item
        endpoint: GET /ondemand
        sync_type: incremental
        runs: 24h
      hooked:
        description: Runs every day, and for each webhook
        output: Item
        endpoint: GET /hooked
        sync_type: incremental
        runs: 24h
        webhook_subscriptions: [${WEBHOOK_TYPE}]
models:
  Item:
    id: string
    n: number
`;
const script = (body: string) => `"use strict";\nmodule.exports.default = async function (svc) { ${body} };\n`;
const PAGE = `const res = await svc.get({ endpoint: '/items' });`;
const SCRIPTS = {
  items: script(`${PAGE} await svc.batchSave(res.data.items, 'Item');`),
  broken: script(`${PAGE} throw new Error('the page was not what the script expected');`),
  ondemand: script(`${PAGE} await svc.batchSave(res.data.items, 'Item');`),
  hooked: script(`if (svc.webhook) { await svc.batchSave([svc.webhook.payload], 'Item'); return; } ${PAGE}`),
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (message: string) => console.log(`[cost ${new Date().toISOString().slice(11, 19)}] ${message}`);

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > DEADLINE) throw new Error(`--max-minutes reached while waiting for ${what}`);
    await sleep(500);
  }
}

/** One kind of run and where its runs are. */
interface Kind {
  name: string;
  environmentId: string;
  sync: keyof typeof SCRIPTS;
  connections: string[];
}

interface RunCost {
  executions: number;
  events: number;
  actions: number;
  byKind: Record<ActionKind, number>;
  exempt: number;
  types: string[];
  /** The histories' size as Temporal stores and sends them (protobuf), and by event type. */
  bytes: number;
  bytesByEvent: Record<string, number>;
}

const EVENT_TYPE_NAMES = proto.temporal.api.enums.v1.EventType as unknown as Record<number, string>;

function historyBytes(histories: History[]): { bytes: number; bytesByEvent: Record<string, number> } {
  const bytesByEvent: Record<string, number> = {};
  let bytes = 0;
  for (const h of histories) {
    bytes += proto.temporal.api.history.v1.History.encode(h).finish().length;
    for (const event of h.events ?? []) {
      const name = (EVENT_TYPE_NAMES[Number(event.eventType)] ?? String(event.eventType)).replace(/^EVENT_TYPE_/, '');
      bytesByEvent[name] =
        (bytesByEvent[name] ?? 0) + proto.temporal.api.history.v1.HistoryEvent.encode(event).finish().length;
    }
  }
  return { bytes, bytesByEvent };
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  log.level = 'silent';
  const database = await useBenchDatabase({ poolSize: 10 });
  const temporalServer = await startTemporal({});
  const stops: (() => Promise<unknown>)[] = [() => database.close(), () => temporalServer.stop()];
  try {
    const fake = createServer((_req, res) => {
      const items = Array.from({ length: 10 }, (_, i) => ({ id: `item-${i}`, n: Date.now() }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items }));
    });
    const fakeHost = await listen(fake);
    stops.unshift(() => new Promise((resolve) => fake.close(resolve)));
    let webhooksReceived = 0;
    const receiver = createServer((req: IncomingMessage, res) => {
      req.resume();
      req.on('end', () => {
        webhooksReceived++;
        res.writeHead(204).end();
      });
    });
    const receiverHost = await listen(receiver);
    stops.unshift(() => new Promise((resolve) => receiver.close(resolve)));

    // The fake API and the webhook receiver only (docs/operations.md "Outbound requests").
    const allowed = `${fakeHost},${receiverHost}`;
    configureOutboundPolicy(new OutboundPolicy(allowed));
    const service = await createService(
      loadSettings({
        TEMPORAL_ADDRESS: temporalServer.address,
        TEMPORAL_NAMESPACE: temporalServer.namespace,
        TEMPORAL_TASK_QUEUE: 'bench-cost',
        PORT: '0',
        RATE_LIMIT_PER_SECOND: '1000000',
        SERVICE_OUTBOUND_ALLOW: allowed,
      }),
      {
        db: database.pool,
        encryptor: new Encryptor([randomBytes(32)]),
        catalog: loadProviderCatalog({
          extra: {
            [INTEGRATION]: {
              display_name: 'Cost',
              auth_mode: 'API_KEY',
              api_key: { in: 'header', name: 'Authorization', format: 'Bearer ${apiKey}' },
              base_url: `http://${fakeHost}`,
            },
          },
        }),
        log: () => undefined,
        backgroundJobs: false,
      },
    );
    stops.unshift(() => service.stop());
    await service.start();
    const baseUrl = service.apiUrl ?? '';
    say(`Temporal ${temporalServer.version}; ${database.version}`);

    const connectionIds = Array.from({ length: CONNECTIONS }, (_, i) => `conn-${i}`);
    const environments: Record<'plain' | 'webhooks', string> = { plain: '', webhooks: '' };
    for (const name of ['plain', 'webhooks'] as const) {
      const { environment, secretKey } = await service.parts.connections.environments.create({ name: `cost-${name}` });
      // The integration has no webhook secret: its inbound webhooks are taken unsigned.
      await service.parts.connections.environments.updateSettings(environment.id, { allowUnsignedWebhooks: true });
      environments[name] = environment.id;
      const api = createClient({ baseUrl, secretKey });
      await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
      if (name === 'webhooks') await api.webhooks.setSettings({ url: `http://${receiverHost}/hooks` });
      for (const id of connectionIds) {
        await api.connections.import({
          provider_config_key: INTEGRATION,
          connection_id: id,
          credentials: { type: 'API_KEY', apiKey: `key-${id}` },
        });
      }
      await api.deploy.apply({
        yaml: YAML,
        scripts: Object.entries(SCRIPTS).map(([sync, code]) => ({
          integration: INTEGRATION,
          kind: 'sync' as const,
          name: sync,
          code,
        })),
      });
      if (name === 'plain') {
        // Triggers and inbound webhooks, one at a time, once the sync's first (deploy-started) run is done.
        const first = connectionIds[0]!;
        const runsOf = async (sync: string) =>
          Number(
            (
              await database.pool.query<{ n: string }>(
                'SELECT count(*) AS n FROM sync_runs WHERE environment_id = $1 AND sync_name = $2 AND connection_id = $3',
                [environment.id, sync, first],
              )
            ).rows[0]!.n,
          );
        void (async () => {
          for (const [sync, cause] of [
            [
              'ondemand',
              () => api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: first, syncs: ['ondemand'] }),
            ],
            [
              'hooked',
              () =>
                fetch(`${baseUrl}/webhook/${environment.name}/${INTEGRATION}?connection_id=${first}`, {
                  method: 'POST',
                  headers: { 'content-type': 'application/json' },
                  body: JSON.stringify({ type: WEBHOOK_TYPE, payload: { id: `hook-${Date.now()}`, n: 1 } }),
                }).then((response) => {
                  if (!response.ok) throw new Error(`POST /webhook answered ${response.status}`);
                }),
            ],
          ] as const) {
            for (let i = 1; i <= RUNS; i++) {
              await until(`run ${i} of ${sync}`, async () => ((await runsOf(sync)) >= i ? true : undefined));
              await cause();
            }
          }
        })().catch((error: unknown) => console.error('triggers failed:', error));
      }
    }

    const kinds: Kind[] = [
      { name: 'scheduled', environmentId: environments.plain, sync: 'items', connections: connectionIds },
      {
        name: 'scheduled, outbound webhook configured',
        environmentId: environments.webhooks,
        sync: 'items',
        connections: connectionIds,
      },
      { name: 'failed (script throws)', environmentId: environments.plain, sync: 'broken', connections: connectionIds },
      {
        name: 'triggered (POST /sync/trigger)',
        environmentId: environments.plain,
        sync: 'ondemand',
        connections: [connectionIds[0]!],
      },
      { name: 'inbound webhook', environmentId: environments.plain, sync: 'hooked', connections: [connectionIds[0]!] },
    ];

    // The service's own client: its data converter reads the (encrypted) memos of a listing.
    const client = service.temporal;
    const history = (workflowId: string, runId: string) => client.workflow.getHandle(workflowId, runId).fetchHistory();

    /** The closed executions of an entity that ran a run, oldest first, without the first one. */
    async function runExecutions(workflowId: string): Promise<{ runId: string; history: History }[]> {
      const executions: { runId: string; start: number }[] = [];
      for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
        if (execution.status.name !== 'RUNNING') {
          executions.push({ runId: execution.runId, start: execution.startTime.getTime() });
        }
      }
      executions.sort((a, b) => a.start - b.start);
      const found: { runId: string; history: History }[] = [];
      for (const { runId } of executions.slice(1)) found.push({ runId, history: await history(workflowId, runId) });
      return found;
    }

    /** One run: the entity's execution and every execution started from it, when all are closed. */
    async function costOf(entity: History): Promise<RunCost | undefined> {
      const histories: History[] = [entity];
      const types: string[] = [];
      for (let i = 0; i < histories.length; i++) {
        const events = histories[i]!.events ?? [];
        types.push(events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? '?');
        for (const event of events) {
          const child = event.childWorkflowExecutionStartedEventAttributes?.workflowExecution;
          if (!child?.workflowId || !child.runId) continue;
          const childHistory = await history(child.workflowId, child.runId);
          const last = childHistory.events?.at(-1);
          const closed =
            last?.workflowExecutionCompletedEventAttributes ??
            last?.workflowExecutionFailedEventAttributes ??
            last?.workflowExecutionTerminatedEventAttributes ??
            last?.workflowExecutionTimedOutEventAttributes ??
            last?.workflowExecutionCanceledEventAttributes;
          if (!closed) return undefined;
          histories.push(childHistory);
        }
      }
      const byKind = Object.fromEntries(ACTION_KINDS.map((kind) => [kind, 0])) as Record<ActionKind, number>;
      let actions = 0;
      let exempt = 0;
      for (const h of histories) {
        const counted = billableActions(h.events ?? []);
        actions += counted.total;
        exempt += counted.exemptChangeVersionUpserts;
        for (const kind of ACTION_KINDS) byKind[kind] += counted.byKind[kind];
      }
      const events = histories.reduce((sum, h) => sum + (h.events?.length ?? 0), 0);
      return { executions: histories.length, events, actions, byKind, exempt, types, ...historyBytes(histories) };
    }

    const results: { kind: Kind; costs: RunCost[] }[] = [];
    for (const kind of kinds) {
      const costs = await until(`${RUNS} runs of kind "${kind.name}"`, async () => {
        const found: RunCost[] = [];
        for (const connectionId of kind.connections) {
          const workflowId = `sync:${kind.environmentId}:${INTEGRATION}:${connectionId}:${kind.sync}`;
          for (const execution of await runExecutions(workflowId)) {
            const cost = await costOf(execution.history);
            if (cost) found.push(cost);
          }
        }
        return found.length >= RUNS ? found.slice(0, RUNS) : undefined;
      });
      say(`${kind.name}: ${costs.length} runs read`);
      results.push({ kind, costs });
    }

    const mean = (values: number[]) => Math.round((values.reduce((a, b) => a + b, 0) / values.length) * 10) / 10;
    const range = (values: number[]) => {
      const [low, high] = [Math.min(...values), Math.max(...values)];
      return low === high ? `${low}` : `${mean(values)} (${low}–${high})`;
    };
    console.log(`\nper run (${RUNS} runs of each kind; outbound webhooks received: ${webhooksReceived})`);
    console.log(
      `${'kind of run'.padEnd(40)} ${'actions'.padStart(12)} ${'executions'.padStart(11)} ${'events'.padStart(12)}  workflow types`,
    );
    for (const { kind, costs } of results) {
      console.log(
        `${kind.name.padEnd(40)} ${range(costs.map((c) => c.actions)).padStart(12)} ${range(costs.map((c) => c.executions)).padStart(11)} ` +
          `${range(costs.map((c) => c.events)).padStart(12)}  ${[...new Set(costs.flatMap((c) => c.types))].join(', ')}`,
      );
    }
    console.log('\nactions per run by kind (means)');
    console.log(
      `${'kind of run'.padEnd(40)} ${ACTION_KINDS.map((k) => k.padStart(10)).join(' ')}  TemporalChangeVersion upserts (exempt)`,
    );
    for (const { kind, costs } of results) {
      console.log(
        `${kind.name.padEnd(40)} ${ACTION_KINDS.map((k) => String(mean(costs.map((c) => c.byKind[k]))).padStart(Math.max(10, k.length))).join(' ')}  ${mean(costs.map((c) => c.exempt))}`,
      );
    }
    console.log(
      '\nhistory bytes per run (protobuf, as stored and sent; means), and the event types that hold most of them',
    );
    for (const { kind, costs } of results) {
      const byEvent: Record<string, number> = {};
      for (const cost of costs)
        for (const [name, n] of Object.entries(cost.bytesByEvent)) byEvent[name] = (byEvent[name] ?? 0) + n;
      const top = Object.entries(byEvent)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 4)
        .map(([name, n]) => `${name} ${Math.round(n / costs.length)}`)
        .join(', ');
      console.log(`${kind.name.padEnd(40)} ${String(Math.round(mean(costs.map((c) => c.bytes)))).padStart(8)}  ${top}`);
    }
  } finally {
    for (const stop of stops) await stop().catch((error: unknown) => console.error(error));
  }
}

await main();

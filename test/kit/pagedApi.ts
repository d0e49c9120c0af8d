/**
 * A paginated fake API and the integration that syncs it, for the tests that kill service processes
 * mid-sync (test/topology/topology.test.ts, test/standby.test.ts): each connection (its API key) has
 * its own TOTAL records in pages of PAGE; every page request is counted, and a connection's pages can
 * be held at a gate. What they check after a kill: every page fetched, each at most twice, every record
 * stored once.
 */
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import type { createClient } from '../../src/client/index.js';
import { eventually } from '../helpers/eventually.js';
import { apiKeyProvider, cursorPage, json, startFakeUpstream, type FakeUpstream } from './upstream.js';
import { cursorSync } from './scripts.js';

export const PAGE = 100;
export const PAGES = 40;
export const TOTAL = PAGE * PAGES;
export const INTEGRATION = 'fake-api';

const YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      records:
        description: Records of the fake API
        output: Item
        endpoint: GET /items
        sync_type: full
        runs: 1h
        auto_start: false
models:
  Item:
    id: string
    n: number
`;

const SYNC = cursorSync(PAGE, 'Item', ['id', 'n']);

/** The fake API: each connection (its API key) has its own records; pages can be held at a gate. */
export class FakeApi {
  readonly hits = new Map<string, Map<number, number>>();
  /** Time of each request, per connection, in arrival order. */
  readonly times = new Map<string, number[]>();
  /** Connections whose requests wait, from this page on, until `open()`. */
  private gates = new Map<string, { from: number; opened: Promise<void>; open: () => void }>();
  delayMs = 40;
  private upstream!: FakeUpstream;
  url = '';

  async start(): Promise<void> {
    this.upstream = await startFakeUpstream((request, response) => this.handle(request, response));
    this.url = this.upstream.url;
  }

  hold(connection: string, fromPage: number): void {
    let open!: () => void;
    const opened = new Promise<void>((resolveGate) => (open = resolveGate));
    this.gates.set(connection, { from: fromPage, opened, open });
  }

  open(connection: string): void {
    this.gates.get(connection)?.open();
    this.gates.delete(connection);
  }

  pagesSeen(connection: string): number {
    return this.hits.get(connection)?.size ?? 0;
  }

  requests(connection: string): number {
    return [...(this.hits.get(connection)?.values() ?? [])].reduce((sum, n) => sum + n, 0);
  }

  /** A providers file naming this API as the integration's provider (SERVICE_PROVIDERS_FILE). */
  writeProvidersFile(dir: string): string {
    const file = join(dir, 'providers.yaml');
    writeFileSync(file, stringify({ [INTEGRATION]: apiKeyProvider(this.url) }));
    return file;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const connection = (request.headers.authorization ?? '').replace(/^Bearer /, '');
    const { start, answer } = cursorPage(request, TOTAL, (n) => ({ id: `${connection}-r${n}`, n }));
    const pages = this.hits.get(connection) ?? new Map<number, number>();
    this.hits.set(connection, pages);
    pages.set(start, (pages.get(start) ?? 0) + 1);
    const times = this.times.get(connection) ?? [];
    this.times.set(connection, times);
    times.push(Date.now());
    const gate = this.gates.get(connection);
    if (gate && start / PAGE >= gate.from) await gate.opened;
    await new Promise((resolveDelay) => setTimeout(resolveDelay, this.delayMs));
    json(response, 200, answer);
  }

  async stop(): Promise<void> {
    for (const connection of [...this.gates.keys()]) this.open(connection);
    await this.upstream.close();
  }
}

export interface Run {
  status: string;
  models: Record<string, { added: number; updated: number; deleted: number }>;
}

type Api = ReturnType<typeof createClient>;

/** The integration over the fake API deployed to `api`'s environment, with a connection per API key of `connections`. */
export async function deployPagedApi(api: Api, connections: readonly string[]): Promise<void> {
  await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
  await api.deploy.apply({
    yaml: YAML,
    scripts: [{ integration: INTEGRATION, kind: 'sync', name: 'records', code: SYNC }],
  });
  for (const connection of connections)
    await api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: connection,
      credentials: { type: 'API_KEY', apiKey: connection },
    });
}

export async function trigger(api: Api, connection: string): Promise<void> {
  await api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: connection, syncs: ['records'] });
}

/** The connection's newest run, once it has finished. */
export async function finishedRun(api: Api, connection: string, timeoutMs = 240_000): Promise<Run> {
  return eventually(
    async () => {
      const { runs } = await api.call<{ runs: Run[] }>('GET', '/sync/runs', {
        query: { provider_config_key: INTEGRATION, connection_id: connection },
      });
      return runs[0];
    },
    timeoutMs,
    `the run of ${connection} to finish`,
  );
}

/**
 * Every page fetched, each at most twice, at most `repeatBound` of them twice; every record stored
 * once. Returns the number of pages fetched twice.
 */
export async function expectExact(
  fake: FakeApi,
  pool: Pool,
  connection: string,
  run: Run,
  repeatBound: number,
): Promise<number> {
  const pages = fake.hits.get(connection)!;
  const repeated = [...pages.values()].filter((n) => n > 1).length;
  expect(run.status, `the run of ${connection}: ${JSON.stringify(run)}`).toBe('success');
  expect(run.models['Item']).toEqual({ added: TOTAL, updated: 0, deleted: 0, unchanged: 0 });
  expect(pages.size).toBe(PAGES);
  expect([...pages.values()].every((n) => n >= 1 && n <= 2)).toBe(true);
  expect(repeated).toBeLessThanOrEqual(repeatBound);
  const stored = await pool.query<{ n: string; ids: string }>(
    'SELECT count(*) AS n, count(DISTINCT id) AS ids FROM records WHERE id LIKE $1',
    [`${connection}-r%`],
  );
  expect(stored.rows[0]).toEqual({ n: String(TOTAL), ids: String(TOTAL) });
  return repeated;
}

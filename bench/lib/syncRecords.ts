/**
 * The records the sync benchmarks page through and save (bench/sync.ts, bench/stepProfile.ts,
 * bench/storeSteps.ts), and the raw upsert their throughput is compared with.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Pool } from '../../src/db/pool.js';
import { prng } from './stats.js';

const random = prng(17);
const FILLER = Array.from(
  { length: 4096 },
  () => 'abcdefghijklmnopqrstuvwxyz0123456789 '[Math.floor(random() * 37)],
).join('');

/**
 * Record number `n`: ~80 bytes of JSON; with `bytes` above 100, a `body` of varied text brings it to
 * about that size. The same for the same arguments on every run.
 */
export function syntheticRecord(n: number, bytes = 0): Record<string, unknown> {
  const record = {
    id: `r${n}`,
    title: `record number ${n}`,
    state: n % 3 === 0 ? 'closed' : 'open',
    n,
    tags: ['a', 'b'],
  };
  if (bytes <= 100) return record;
  const pad = bytes - JSON.stringify(record).length - 10;
  const at = (n * 7919) % (FILLER.length - pad);
  return { ...record, body: FILLER.slice(at, at + pad) };
}

/** The raw comparator's table: the same records keyed by (connection, id), no store bookkeeping. */
export const RAW_TABLE_SQL =
  'CREATE TABLE raw_records (connection_id text, id text, data jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (connection_id, id))';

/** One batch into raw_records: one INSERT … ON CONFLICT, from one process. */
export async function rawUpsert(pool: Pool, connectionId: string, batch: unknown[]): Promise<void> {
  await pool.query(
    `INSERT INTO raw_records (connection_id, id, data)
     SELECT $2, r->>'id', r FROM jsonb_array_elements($1::jsonb) AS r
     ON CONFLICT (connection_id, id) DO UPDATE SET data = excluded.data, updated_at = now()`,
    [JSON.stringify(batch), connectionId],
  );
}

/**
 * The fake API: `GET /records?total=&cursor=&limit=` answers `{ items, next }`, items made by
 * `makeRecord`, `next` the cursor of the following page or null after the last.
 */
export function recordsApi(makeRecord: (n: number) => unknown) {
  return (request: IncomingMessage, response: ServerResponse): void => {
    const url = new URL(request.url ?? '/', 'http://x');
    const start = Number(url.searchParams.get('cursor') ?? '0');
    const limit = Number(url.searchParams.get('limit'));
    const total = Number(url.searchParams.get('total'));
    const items = Array.from({ length: Math.max(0, Math.min(limit, total - start)) }, (_, i) => makeRecord(start + i));
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ items, next: start + limit < total ? String(start + limit) : null }));
  };
}

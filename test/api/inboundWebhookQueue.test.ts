/**
 * Inbound webhooks that wait for their sync (issue 29, finding 4), with real sizes: 100 webhooks of
 * 4 MB to a paused sync used to grow the worker's memory by their sum (every payload lived in the
 * entity workflow's state) and it stayed after the connection was deleted; a flood had no bound in
 * bytes and no rate limit. Now a payload above a few KiB waits in Postgres (src/webhooks/inboundQueue.ts)
 * and the run loads it; what waits is bounded per sync (entries and bytes) and per environment (bytes),
 * each a 429 `webhook_queue_full`; POST /webhook is rate limited per environment and integration (429
 * `rate_limited` with Retry-After); deleting the connection removes what waited.
 *
 * The worker runs in a process of its own (SERVICE_ROLE=worker), so that its memory is its own.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import { mapLimit } from '../../src/mapLimit.js';
import { productionEnv, startService, type ServiceProcess } from '../helpers/serviceProcess.js';
import { deployRequest, INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { connectionOf, startApiHarness, type ApiHarness } from '../kit/api.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';

const MB = 1_000_000;
const SECRET = 'queue-secret-123';
const BIG = 4 * MB;

let h: ApiHarness;
let worker: ServiceProcess;

/** The resident memory of a process, in bytes (Linux). */
function rssOf(pid: number): number {
  const line = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!line) throw new Error(`no VmRSS for process ${pid}`);
  return Number(line[1]) * 1024;
}

beforeAll(async () => {
  const key = randomBytes(32);
  h = await startApiHarness({
    // The worker is the other process's; the API's per-key limit is not what this file measures.
    overrides: { workers: false, encryptor: new Encryptor([key]) },
    rateLimit: { perSecond: 100_000 },
    settings: {
      WEBHOOK_QUEUE_SYNC_BYTES: String(420 * 1024 * 1024),
      WEBHOOK_QUEUE_ENVIRONMENT_BYTES: String(440 * 1024 * 1024),
      WEBHOOK_RATE_LIMIT_PER_SECOND: '20',
    },
  });
  // Before the deploy, whose apply runs on the worker.
  worker = startService(
    productionEnv(h.dbUrl, {
      SERVICE_ROLE: 'worker',
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      SERVICE_ENCRYPTION_KEY: key.toString('base64'),
      SERVICE_LOG_LEVEL: 'warn',
      ...(process.env['SERVICE_THREAD_MARKS_DIR']
        ? { SERVICE_THREAD_MARKS_DIR: process.env['SERVICE_THREAD_MARKS_DIR'] }
        : {}),
    }),
  );
  await worker.waitFor(/^ready\./m, 240_000, 'the worker process');
  h.fake.setHandler((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ issues: [] }));
  });
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  const request = deployRequest();
  await h.deploy(h.envA.id, {
    ...request,
    // The title tells how much of the payload the script saw; no request, so no provider is needed.
    scripts: request.scripts.map((script) =>
      script.name === 'issues'
        ? {
            ...script,
            code: bundle(`async function (svc) {
              if (!svc.webhook) return;
              const p = svc.webhook.payload;
              await svc.batchSave([{ id: p.issue.id, title: p.issue.title + ' ' + p.filler.length }], 'Issue');
            }`),
          }
        : script,
    ),
  });
  for (const connection of ['c1', 'c2', 'c3', 'c4']) {
    await h.api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: connection,
      credentials: { type: 'API_KEY', apiKey: `key-${connection}` },
    });
  }
  await h.api.integrations.update(INTEGRATION, { webhook: { secret: SECRET } });
}, 300_000);

/** A signed webhook of type issue.updated for connection `connection`, `size` bytes of JSON. */
function signedWebhook(
  connection: string,
  id: string,
  size: number,
): { body: string; headers: Record<string, string> } {
  const head = { type: 'issue.updated', issue: { id, title: `webhook ${id}` } };
  const filler = Math.max(0, size - JSON.stringify({ ...head, filler: '' }).length);
  const body = JSON.stringify({ ...head, filler: 'x'.repeat(filler) });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex');
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-signature-256': `sha256=${signature}`,
      'x-signature-timestamp': timestamp,
      'x-connection': connection,
    },
  };
}

/** Sends one webhook; a sender that is told to slow down (rate_limited) waits Retry-After and sends again. */
async function send(connection: string, id: string, size: number): Promise<{ status: number; code?: string }> {
  for (;;) {
    const { body, headers } = signedWebhook(connection, id, size);
    const response = await fetch(`${h.baseUrl}/webhook/${h.envA.name}/${INTEGRATION}?connection_id=${connection}`, {
      method: 'POST',
      headers,
      body,
    });
    const answer = (await response.json()) as { error?: { code: string } };
    if (response.status === 429) {
      const retryAfter = Number(response.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      if (answer.error?.code === 'rate_limited') {
        await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
        continue;
      }
    }
    return { status: response.status, ...(answer.error ? { code: answer.error.code } : {}) };
  }
}

const issuesOf = (connection: string) => ({
  environmentId: h.envA.id,
  integrationId: INTEGRATION,
  connectionId: connection,
  syncName: 'issues',
});

describe('inbound webhooks waiting for a paused sync', () => {
  it('100 webhooks of 4 MB: the worker does not hold them (RSS grows by far less than their 400 MB), the run gets each whole', async () => {
    const before = rssOf(worker.pid);
    const answers = await mapLimit(
      Array.from({ length: 100 }, (_, n) => n),
      4,
      (n) => send('c1', `big-${n}`, BIG),
    );
    expect(answers.filter((answer) => answer.status !== 200)).toEqual([]);
    // The sync is paused (auto_start false): every webhook waits.
    const status = await h.deps.syncs.status(issuesOf('c1'));
    expect(status.paused).toBe(true);
    // Let the worker settle (every signal handled), then measure.
    await eventually(
      async () => ((await h.deps.syncs.status(issuesOf('c1'))).executions === 0 ? true : undefined),
      60_000,
      'the entity to answer',
    );
    await new Promise((resolve) => setTimeout(resolve, 5000));
    const after = rssOf(worker.pid);
    const grown = after - before;
    console.log(
      `[webhook queue] worker RSS ${(before / MB).toFixed(0)} MB → ${(after / MB).toFixed(0)} MB (+${(grown / MB).toFixed(0)} MB) for 100 × 4 MB queued`,
    );
    expect(grown).toBeLessThan(100 * MB);
    const usage = await h.service.parts.inboundQueue.usage(h.envA.id);
    expect(usage.entries).toBe(100);
    expect(usage.bytes).toBeGreaterThanOrEqual(100 * BIG);

    // The 101st waits for nothing: the sync's queue is full (entries), whatever its size.
    expect(await send('c1', 'one-too-many', 100)).toEqual({ status: 429, code: 'webhook_queue_full' });

    // Started, the sync runs the webhooks it queued, each with its whole payload.
    await h.api.syncs.start({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
    const page = await eventually(
      async () => {
        const result = await h.api.records.list({ ...connectionOf('c1'), model: 'Issue' });
        return result.records.length >= 2 ? result : undefined;
      },
      180_000,
      'the first webhook runs',
    );
    for (const record of page.records) {
      const id = String(record['id']);
      const head = JSON.stringify({ type: 'issue.updated', issue: { id, title: `webhook ${id}` }, filler: '' });
      expect(record['title']).toBe(`webhook ${id} ${BIG - head.length}`);
    }
    await eventually(
      async () => ((await h.service.parts.inboundQueue.usage(h.envA.id)).entries < 98 ? true : undefined),
      60_000,
      'handled webhooks to leave the queue',
    );
  }, 900_000);

  it('deleting the connection removes what waited; the environment’s bytes are bounded across its syncs', async () => {
    await h.api.connections.delete(connectionOf('c1'));
    expect(await h.service.parts.inboundQueue.usage(h.envA.id)).toEqual({ bytes: 0, entries: 0, bodies: 0 });

    // c2's and c3's syncs are paused: 4 MB webhooks to each in turn wait until the environment's
    // 440 MiB are reached, before either sync reaches its own bound (100 webhooks, 420 MiB).
    const bound = 440 * 1024 * 1024;
    let accepted = 0;
    let refused: { status: number; code?: string } | undefined;
    for (let n = 0; refused === undefined && n < 200; n++) {
      const answer = await send(n % 2 === 0 ? 'c2' : 'c3', `fill-${n}`, BIG);
      if (answer.status === 200) accepted++;
      else refused = answer;
    }
    expect(refused).toEqual({ status: 429, code: 'webhook_queue_full' });
    expect(accepted).toBe(Math.floor(bound / BIG));
    expect((await h.service.parts.inboundQueue.usage(h.envA.id)).bytes).toBeLessThanOrEqual(bound);

    await h.api.connections.delete(connectionOf('c2'));
    await h.api.connections.delete(connectionOf('c3'));
    expect(await h.service.parts.inboundQueue.usage(h.envA.id)).toEqual({ bytes: 0, entries: 0, bodies: 0 });
  }, 600_000);

  it('rate limits each environment and integration: a flood is answered 429 with Retry-After, never queued', async () => {
    const statuses: Record<string, number> = {};
    await mapLimit(
      Array.from({ length: 200 }, (_, n) => n),
      16,
      async (n) => {
        const { body, headers } = signedWebhook('c4', `flood-${n}`, 200);
        const response = await fetch(`${h.baseUrl}/webhook/${h.envA.name}/${INTEGRATION}?connection_id=c4`, {
          method: 'POST',
          headers,
          body,
        });
        const answer = (await response.json()) as { error?: { code: string } };
        if (response.status === 429) expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
        const key = `${response.status} ${answer.error?.code ?? ''}`.trim();
        statuses[key] = (statuses[key] ?? 0) + 1;
      },
    );
    console.log(`[webhook queue] 200 webhooks at once: ${JSON.stringify(statuses)}`);
    expect(statuses['429 rate_limited']).toBeGreaterThan(0);
    expect(Object.keys(statuses).every((key) => key === '200' || key.startsWith('429 '))).toBe(true);
  }, 300_000);
});

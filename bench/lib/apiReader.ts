/**
 * The application of bench/api.ts: a process of its own that reads pages of GET /records through the
 * service's Node client (src/client), as an application would, so that the API server's event loop
 * (in the benchmark's process) is not also the client's. Forked with IPC: each message is a block of
 * pages to read `concurrency` at a time; the answer is each page's latency, the block's wall time and
 * this process's CPU time. BENCH_API_URL, BENCH_SECRET_KEY and BENCH_INTEGRATION say where and as whom.
 */
import { createClient } from '../../src/client/index.js';
import { nowMs } from './stats.js';

export interface ReadBlock {
  /** Another server to read from (bench/api.ts's bare reference); the API's BENCH_API_URL when absent. */
  baseUrl?: string;
  pages: { connection: string; cursor: string }[];
  concurrency: number;
  limit: number;
}

export interface BlockResult {
  latencies: number[];
  ms: number;
  cpuMs: number;
}

const clients = new Map<string, ReturnType<typeof createClient>>();
const clientOf = (baseUrl: string) => {
  let client = clients.get(baseUrl);
  if (!client) {
    client = createClient({ baseUrl, secretKey: process.env['BENCH_SECRET_KEY'] ?? '' });
    clients.set(baseUrl, client);
  }
  return client;
};
const integration = process.env['BENCH_INTEGRATION'] ?? '';
const cpuMs = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

process.on('message', (message: ReadBlock) => {
  void (async () => {
    const api = clientOf(message.baseUrl ?? process.env['BENCH_API_URL'] ?? '');
    const latencies: number[] = [];
    let next = 0;
    const cpu = cpuMs();
    const started = nowMs();
    await Promise.all(
      Array.from({ length: message.concurrency }, async () => {
        while (next < message.pages.length) {
          const page = message.pages[next++]!;
          const t = nowMs();
          const result = await api.records.list({
            connectionId: page.connection,
            providerConfigKey: integration,
            model: 'Issue',
            cursor: page.cursor,
            limit: message.limit,
          });
          if (result.records.length !== message.limit) throw new Error(`API page of ${result.records.length} records`);
          latencies.push(nowMs() - t);
        }
      }),
    );
    const answer: BlockResult = { latencies, ms: nowMs() - started, cpuMs: cpuMs() - cpu };
    process.send?.(answer);
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
});

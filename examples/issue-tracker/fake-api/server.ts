/**
 * A small fake issue tracker for the example integration and the walk-through (docs/walkthrough.md).
 * In memory, on 127.0.0.1 only, no dependencies:
 *
 *   npx tsx examples/issue-tracker/fake-api/server.ts --port 4010 [--api-key demo-key]
 *
 * Every request must carry `X-Api-Key: <key>` (401 otherwise). Routes:
 *
 *   GET    /issues?per_page=&page=&updated_since=   issues by id, page-numbered; the next page's URL is in
 *                                                   a `Link: <…>; rel="next"` header (GitHub's style)
 *   GET    /issues/deleted?since=                    { ids } of issues deleted at or after `since`
 *   POST   /issues            { title, body? }       201 the new issue; 422 when the title is missing
 *   PATCH  /issues/:id        { title?, state? }     the changed issue (its updated_at moves)
 *   DELETE /issues/:id                               204; the id is listed by /issues/deleted from then on
 *   GET    /labels?limit=&cursor=                    { data, next_cursor } (cursor pagination)
 *   DELETE /labels/:id                               204; the label is simply gone (a full sync notices)
 *
 * Every answer carries `X-Server-Time`, the server's clock, which the sync keeps as its cursor so that
 * the next run asks for what changed since then by the server's own clock.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

interface Issue {
  id: number;
  title: string;
  body: string;
  state: 'open' | 'closed';
  labels: string[];
  created_at: string;
  updated_at: string;
}

interface Label {
  id: string;
  name: string;
  color: string;
}

export interface FakeTracker {
  url: string;
  close(): Promise<void>;
}

/** Starts the fake tracker on 127.0.0.1:`port` (0: any free port) with a few issues and labels. */
export async function startFakeTracker(options: { port: number; apiKey: string }): Promise<FakeTracker> {
  const seededAt = new Date().toISOString();
  const issues = new Map<number, Issue>();
  const seed: [string, string[]][] = [
    ['Login page is slow', ['bug']],
    ['Add dark mode', ['feature']],
    ['Crash when the title is empty', ['bug']],
    ['Export issues as CSV', ['feature']],
    ['Typo on the pricing page', ['wontfix']],
  ];
  seed.forEach(([title, labels], index) => {
    const id = index + 1;
    issues.set(id, { id, title, body: '', state: 'open', labels, created_at: seededAt, updated_at: seededAt });
  });
  let nextId = issues.size + 1;
  const deletions: { id: number; at: string }[] = [];
  const labels = new Map<string, Label>(
    [
      { id: 'bug', name: 'Bug', color: 'd73a4a' },
      { id: 'feature', name: 'Feature', color: 'a2eeef' },
      { id: 'wontfix', name: "Won't fix", color: 'ffffff' },
    ].map((label) => [label.id, label]),
  );

  // Strictly increasing timestamps, so "changed since" never misses a change made in the same millisecond.
  let lastTime = 0;
  const now = (): string => {
    lastTime = Math.max(Date.now(), lastTime + 1);
    return new Date(lastTime).toISOString();
  };

  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      try {
        handle(request, response, Buffer.concat(chunks).toString('utf8'));
      } catch (error) {
        send(response, 500, { error: (error as Error).message });
      }
    });
  });

  function send(response: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
    response.writeHead(status, {
      'x-server-time': new Date(Math.max(Date.now(), lastTime)).toISOString(),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    });
    response.end(body === undefined ? undefined : JSON.stringify(body));
  }

  function readJson(body: string): Record<string, unknown> | undefined {
    try {
      const parsed: unknown = JSON.parse(body === '' ? '{}' : body);
      return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
        ? (parsed as Record<string, unknown>)
        : undefined;
    } catch {
      return undefined;
    }
  }

  function handle(request: IncomingMessage, response: ServerResponse, body: string): void {
    const url = new URL(request.url ?? '/', `http://${request.headers.host ?? '127.0.0.1'}`);
    const method = request.method ?? 'GET';
    if (request.headers['x-api-key'] !== options.apiKey) {
      send(response, 401, { error: 'missing or wrong X-Api-Key header' });
      return;
    }
    const issueMatch = /^\/issues\/(\d+)$/.exec(url.pathname);
    const labelMatch = /^\/labels\/([^/]+)$/.exec(url.pathname);

    if (method === 'GET' && url.pathname === '/issues') {
      const perPage = Math.min(Math.max(Number(url.searchParams.get('per_page') ?? 30) || 30, 1), 100);
      const page = Math.max(Number(url.searchParams.get('page') ?? 1) || 1, 1);
      const since = url.searchParams.get('updated_since');
      const matching = [...issues.values()]
        .filter((issue) => since === null || issue.updated_at >= since)
        .sort((a, b) => a.id - b.id);
      const items = matching.slice((page - 1) * perPage, page * perPage);
      const headers: Record<string, string> = {};
      if (page * perPage < matching.length) {
        const next = new URL(url);
        next.searchParams.set('page', String(page + 1));
        next.searchParams.set('per_page', String(perPage));
        headers['link'] = `<${next.toString()}>; rel="next"`;
      }
      send(response, 200, items, headers);
    } else if (method === 'GET' && url.pathname === '/issues/deleted') {
      const since = url.searchParams.get('since') ?? '';
      send(response, 200, { ids: deletions.filter((d) => d.at >= since).map((d) => d.id) });
    } else if (method === 'POST' && url.pathname === '/issues') {
      const input = readJson(body);
      if (typeof input?.['title'] !== 'string' || input['title'].trim() === '') {
        send(response, 422, { error: 'title is required' });
        return;
      }
      const at = now();
      const issue: Issue = {
        id: nextId++,
        title: input['title'],
        body: typeof input['body'] === 'string' ? input['body'] : '',
        state: 'open',
        labels: [],
        created_at: at,
        updated_at: at,
      };
      issues.set(issue.id, issue);
      send(response, 201, issue);
    } else if (method === 'PATCH' && issueMatch) {
      const issue = issues.get(Number(issueMatch[1]));
      const input = readJson(body);
      if (!issue) return send(response, 404, { error: `no issue ${issueMatch[1]}` });
      if (!input) return send(response, 400, { error: 'the body must be a JSON object' });
      if (typeof input['title'] === 'string') issue.title = input['title'];
      if (input['state'] === 'open' || input['state'] === 'closed') issue.state = input['state'];
      issue.updated_at = now();
      send(response, 200, issue);
    } else if (method === 'DELETE' && issueMatch) {
      const id = Number(issueMatch[1]);
      if (!issues.delete(id)) return send(response, 404, { error: `no issue ${id}` });
      deletions.push({ id, at: now() });
      send(response, 204);
    } else if (method === 'GET' && url.pathname === '/labels') {
      const limit = Math.min(Math.max(Number(url.searchParams.get('limit') ?? 2) || 2, 1), 100);
      const all = [...labels.values()].sort((a, b) => a.id.localeCompare(b.id));
      const cursor = url.searchParams.get('cursor');
      const start = cursor === null ? 0 : all.findIndex((label) => label.id > cursor);
      const data = start < 0 ? [] : all.slice(start, start + limit);
      const more = start >= 0 && start + limit < all.length;
      send(response, 200, { data, next_cursor: more ? (data.at(-1)?.id ?? null) : null });
    } else if (method === 'DELETE' && labelMatch) {
      const id = decodeURIComponent(labelMatch[1] ?? '');
      if (!labels.delete(id)) return send(response, 404, { error: `no label ${id}` });
      send(response, 204);
    } else {
      send(response, 404, { error: `no route ${method} ${url.pathname}` });
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { port: { type: 'string', default: '4010' }, 'api-key': { type: 'string', default: 'demo-key' } },
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    console.error(`error: --port must be a port number, not '${values.port}'`);
    process.exit(2);
  }
  const tracker = await startFakeTracker({ port, apiKey: values['api-key'] }).catch((error: unknown) => {
    console.error(`error: cannot listen on 127.0.0.1:${port}: ${(error as Error).message}`);
    process.exit(1);
  });
  console.log(`fake issue tracker listening on ${tracker.url} (X-Api-Key: ${values['api-key']}); Ctrl-C stops it`);
  const stop = (): void => void tracker.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

// Run as a program (not when imported).
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1])) await main();

/** Bundles built by `service compile` (compileProject) run on the runtime: the bundle format contract. */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { compileProject } from '../../src/cli/compile.js';
import type { RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, syncDefinition, useRuntime } from '../kit/runtime.js';
import { deferCleanup } from '../kit/cleanup.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

// The project is written out by the test (its scripts import the generated models.ts, which only exists
// after `compile`, so they cannot be linted in place).
const PROJECT: Record<string, string> = {
  'service.yaml': `# A small project compiled by test/runtime/compiled.test.ts with \`compileProject\`, then run by the runtime.
integrations:
  fake-api:
    syncs:
      items:
        description: Every item, fetched whole at each run; items gone from the API are flagged deleted.
        output: Item
        endpoint: GET /items
        sync_type: full
        track_deletes: true
    actions:
      lookup:
        description: Looks one item up; an unknown id fails with an ActionError.
        input: LookupInput
        output: Item
        endpoint: POST /lookup
models:
  Item:
    id: string
    name: string
  LookupInput:
    id: string
`,
  'tsconfig.json': `{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022"],
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "strict": true,
    "noEmit": true,
    "skipLibCheck": true,
    "isolatedModules": true,
    "types": []
  },
  "include": ["**/*.ts"],
  "exclude": ["build"]
}
`,
  'fake-api/syncs/items.ts': `import type { Item, ServiceSync } from '../../models';

export default async function fetchItems(svc: ServiceSync): Promise<void> {
  let pages = 0;
  for await (const page of svc.paginate<Item>({
    endpoint: '/items',
    paginate: { type: 'offset', offsetNameInRequest: 'offset', limit: 2, limitNameInRequest: 'limit', responsePath: 'items' },
  })) {
    pages++;
    await svc.batchSave(page, 'Item');
  }
  await svc.log(\`saved \${pages} pages\`);
}
`,
  'fake-api/actions/lookup.ts': `import { ActionError, type Item, type LookupInput, type ServiceAction } from '../../models';

export default async function lookup(svc: ServiceAction, input: LookupInput): Promise<Item> {
  const response = await svc.get<{ items: Item[] }>({ endpoint: '/items', params: { offset: 0, limit: 100 } });
  const found = response.data.items.find((item) => item.id === input.id);
  if (!found) throw new ActionError({ message: 'no such item', id: input.id });
  return found;
}
`,
};

function writeProject(root: string): void {
  for (const [file, content] of Object.entries(PROJECT)) {
    const path = join(root, 'service-integrations', file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
}

describe('compiled bundles', () => {
  it('a compiled sync (paginate, batchSave, track_deletes) and a compiled action (output, ActionError) run', async () => {
    const root = mkdtempSync(join(tmpdir(), 'runtime-compiled-'));
    deferCleanup(() => rmSync(root, { recursive: true, force: true }));
    writeProject(root);
    const compiled = await compileProject({ root });
    expect(compiled.problems.filter((problem) => problem.severity === 'error')).toEqual([]);
    const built = (kind: string, name: string) => {
      const script = compiled.manifest?.scripts.find((s) => s.kind === kind && s.name === name);
      if (!script) throw new Error(`compile produced no ${kind} ${name}`);
      return readFileSync(join(root, 'service-integrations', 'build', script.file), 'utf8');
    };

    const h = await useRuntime();
    let items = [1, 2, 3, 4, 5].map((n) => ({ id: `i${n}`, name: `item ${n}` }));
    const api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const offset = Number(url.searchParams.get('offset'));
      json(response, 200, { items: items.slice(offset, offset + Number(url.searchParams.get('limit'))) });
    });
    h.connections.setBaseUrl(api.url);

    const syncHash = await h.scripts.put(built('sync', 'items'));
    const run = (connectionId: string) =>
      h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: h.taskQueue,
        workflowId: syncRunId(
          { ...syncDefinition({ syncName: 'items', scriptHash: syncHash }), connectionId },
          `${Date.now()}`,
        ),
        args: [
          {
            definition: syncDefinition({
              syncName: 'items',
              syncType: 'full',
              trackDeletes: true,
              models: ['Item'],
              scriptHash: syncHash,
            }),
            connectionId,
            mode: 'incremental',
          },
        ],
      });
    expect((await run('c')).models['Item']).toEqual({ added: 5, updated: 0, deleted: 0, unchanged: 0 });
    items = items.slice(0, 4);
    const second = await run('c');
    expect(second.models['Item']).toEqual({ added: 0, updated: 0, deleted: 1, unchanged: 4 });
    expect(second.recordCounts).toEqual({ Item: 4 });

    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const lookup = actionDefinition('lookup', await h.scripts.put(built('action', 'lookup')));
    expect(await control.runAction({ definition: lookup, connectionId: 'c', input: { id: 'i2' } })).toEqual({
      ok: true,
      output: { id: 'i2', name: 'item 2' },
    });
    expect(await control.runAction({ definition: lookup, connectionId: 'c', input: { id: 'zz' } })).toEqual({
      ok: false,
      body: { error_type: 'action_script_failure', payload: { message: 'no such item', id: 'zz' } },
    });
  }, 120_000);
});

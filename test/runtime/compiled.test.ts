/** Bundles built by `service compile` (compileProject) run on the runtime: the bundle format contract. */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compileProject } from '../../src/cli/compile.js';
import type { RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, json, startFakeApi, syncDefinition, useRuntime } from './helpers.js';

// The project is written out by the test (its scripts import the generated models.ts, which only exists
// after `compile`, so they cannot be linted in place).
const PROJECT: Record<string, string> = {
  'service.yaml':
    '# A small project compiled by test/runtime/compiled.test.ts with `compileProject`, then run by the runtime.\nintegrations:\n  fake-api:\n    syncs:\n      items:\n        description: Every item, fetched whole at each run; items gone from the API are flagged deleted.\n        output: Item\n        endpoint: GET /items\n        sync_type: full\n        track_deletes: true\n    actions:\n      lookup:\n        description: Looks one item up; an unknown id fails with an ActionError.\n        input: LookupInput\n        output: Item\n        endpoint: POST /lookup\nmodels:\n  Item:\n    id: string\n    name: string\n  LookupInput:\n    id: string\n',
  'tsconfig.json':
    '{\n  "compilerOptions": {\n    "target": "ES2022",\n    "lib": ["ES2022"],\n    "module": "ESNext",\n    "moduleResolution": "Bundler",\n    "strict": true,\n    "noEmit": true,\n    "skipLibCheck": true,\n    "isolatedModules": true,\n    "types": []\n  },\n  "include": ["**/*.ts"],\n  "exclude": ["build"]\n}\n',
  'fake-api/syncs/items.ts':
    "import type { Item, ServiceSync } from '../../models';\n\nexport default async function fetchItems(svc: ServiceSync): Promise<void> {\n  let pages = 0;\n  for await (const page of svc.paginate<Item>({\n    endpoint: '/items',\n    paginate: { type: 'offset', offsetNameInRequest: 'offset', limit: 2, limitNameInRequest: 'limit', responsePath: 'items' },\n  })) {\n    pages++;\n    await svc.batchSave(page, 'Item');\n  }\n  await svc.log(`saved ${pages} pages`);\n}\n",
  'fake-api/actions/lookup.ts':
    "import { ActionError, type Item, type LookupInput, type ServiceAction } from '../../models';\n\nexport default async function lookup(svc: ServiceAction, input: LookupInput): Promise<Item> {\n  const response = await svc.get<{ items: Item[] }>({ endpoint: '/items', params: { offset: 0, limit: 100 } });\n  const found = response.data.items.find((item) => item.id === input.id);\n  if (!found) throw new ActionError({ message: 'no such item', id: input.id });\n  return found;\n}\n",
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
    afterAll(() => rmSync(root, { recursive: true, force: true }));
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
    const api = await startFakeApi((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const offset = Number(url.searchParams.get('offset'));
      json(response, 200, { items: items.slice(offset, offset + Number(url.searchParams.get('limit'))) });
    });
    h.connections.setBaseUrl(api.url);

    const syncHash = await h.scripts.put(built('sync', 'items'));
    const run = (connectionId: string) =>
      h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: h.taskQueue,
        workflowId: `compiled-${connectionId}-${Date.now()}`,
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

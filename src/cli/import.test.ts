/**
 * `service import` on projects in temporary folders: the fixture project of test/fixtures (written
 * for the de-facto product), the older layout with scripts beside nango.yaml, a target that is not
 * empty, and constructs it cannot convert. test/cli/import.test.ts deploys and runs the result.
 */
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { importProject } from './import.js';
import { runCli } from './main.js';

const FIXTURE = fileURLToPath(new URL('../../test/fixtures/nango-integrations', import.meta.url));

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-import-'));
  dirs.push(dir);
  return dir;
}

function write(root: string, path: string, content: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), content);
}

/** Every file below `folder`, relative, sorted. */
function listAll(folder: string): string[] {
  return readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(folder.length + 1))
    .sort();
}

const read = (root: string, path: string): string => readFileSync(join(root, path), 'utf8');

async function cli(cwd: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, { out: (t) => (out += t), err: (t) => (err += t), cwd, env: {} });
  return { code, out, err };
}

/** The fixture project in a folder of its own, with the .env a real one has (never committed here). */
function fixtureCopy(): { dir: string; source: string } {
  const dir = temp();
  const source = join(dir, 'nango-integrations');
  cpSync(FIXTURE, source, { recursive: true });
  write(source, '.env', 'NANGO_SECRET_KEY_DEV=not-a-real-key\n');
  return { dir, source };
}

describe('service import', () => {
  it('converts the fixture project: config edits, type renames, the layout, and it compiles', async () => {
    const { dir } = fixtureCopy();
    const app = join(dir, 'app');
    mkdirSync(app);
    const result = await cli(app, 'import', '..');
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    expect(result.out).toContain("nango.yaml:19: tracker/syncs/agents: added 'sync_type: full'");
    expect(result.out).toContain("nango.yaml:17: tracker/syncs/tickets: removed 'version'");
    expect(result.out).toContain('service-integrations/tracker/syncs/tickets.ts: NangoSync → ServiceSync');
    expect(result.out).toContain('service-integrations/tracker/actions/close-tickets.ts: NangoAction → ServiceAction');
    expect(result.out).toContain(
      "not copied (built, local or the de-facto product's own): .nango, models.ts, package.json",
    );
    expect(result.out).toContain('not copied: .env (secrets stay out of the project');
    expect(result.out).toContain('4 script(s) compile.');

    const yaml = read(app, 'service-integrations/service.yaml');
    const original = read(dir, 'nango-integrations/nango.yaml');
    expect(yaml).not.toContain('version:');
    expect(
      yaml.replace("                sync_type: full # added by service import: the de-facto format's default\n", ''),
    ).toBe(original.replace(/^ +version: .*\n/gm, ''));
    expect(read(app, 'service-integrations/tracker/syncs/tickets.ts')).toContain('fetchData(nango: ServiceSync)');
    expect(read(app, 'service-integrations/tracker/tests/tracker-tickets.test.ts')).toBe(
      read(dir, 'nango-integrations/tracker/tests/tracker-tickets.test.ts'),
    );
    expect(existsSync(join(app, 'service-integrations/tracker/mocks/tickets/Ticket/batchSave.json'))).toBe(true);
    expect(existsSync(join(app, 'service-integrations/.env'))).toBe(false);
    expect(existsSync(join(app, 'service-integrations/.nango'))).toBe(false);
    expect(read(app, 'service-integrations/models.ts')).toContain('export interface Ticket {');
    expect(existsSync(join(app, 'service-integrations/build/manifest.json'))).toBe(true);
    // The source is left as it was.
    expect(read(dir, 'nango-integrations/tracker/syncs/tickets.ts')).toContain('nango: NangoSync');
  });

  it('finds nango-integrations/ inside the folder given, and refuses a non-empty target unless --force, listing what it replaced', async () => {
    const { dir } = fixtureCopy();
    write(dir, 'service-integrations/service.yaml', 'integrations: {}\n');
    const refused = await cli(dir, 'import', '.');
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('service-integrations/ in ');
    expect(refused.err).toContain('is not empty; import writes only into an empty folder');
    expect(read(dir, 'service-integrations/service.yaml')).toBe('integrations: {}\n');
    expect(existsSync(join(dir, 'service-integrations/tracker'))).toBe(false);

    const forced = await cli(dir, 'import', '.', '--force');
    expect(forced.code).toBe(0);
    expect(forced.out).toContain(
      'Replaced (they existed in service-integrations/ and --force was given):\n  service-integrations/service.yaml\n',
    );

    const none = await cli(dir, 'import', join(dir, 'nowhere'));
    expect(none.code).toBe(1);
    expect(none.err).toContain('no nango.yaml in');
    expect((await cli(dir, 'import')).code).toBe(2);
    expect((await cli(dir, 'import', '--help')).out).toContain('Usage: service import <folder>');
  });

  it('moves scripts of the older layout (beside nango.yaml) into <integration>/syncs/, their imports rewritten, shared files along', async () => {
    const dir = temp();
    const source = join(dir, 'nango-integrations');
    write(
      source,
      'nango.yaml',
      'integrations:\n  crm:\n    syncs:\n      contacts:\n        description: d\n        output: Contact\n        endpoint: GET /contacts\n        sync_type: full\nmodels:\n  Contact:\n    id: string\n',
    );
    write(
      source,
      'contacts.ts',
      "import type { NangoSync, Contact } from './models';\nimport { toContact } from './shared/mapper.js';\n\nexport default async function fetchData(nango: NangoSync): Promise<void> {\n  await nango.batchSave<Contact>([toContact('1')], 'Contact');\n}\n",
    );
    write(
      source,
      'shared/mapper.ts',
      "import type { Contact } from '../models';\nexport const toContact = (id: string): Contact => ({ id });\n",
    );
    write(source, 'shared/unused.ts', 'export const unused = 1;\n');
    const result = await importProject({ from: source, root: dir, compile: false });
    expect(result.problems).toEqual([]);
    expect(result.changes).toContain(
      'moved contacts.ts → service-integrations/crm/syncs/contacts.ts (the layout scripts have here)',
    );
    expect(read(dir, 'service-integrations/crm/syncs/contacts.ts')).toBe(
      "import type { ServiceSync, Contact } from '../../models';\nimport { toContact } from '../../shared/mapper.js';\n\nexport default async function fetchData(nango: ServiceSync): Promise<void> {\n  await nango.batchSave<Contact>([toContact('1')], 'Contact');\n}\n",
    );
    expect(read(dir, 'service-integrations/shared/mapper.ts')).toBe(read(source, 'shared/mapper.ts'));
    expect(existsSync(join(dir, 'service-integrations/shared/unused.ts'))).toBe(false);
    expect(result.scripts.map((s) => `${s.integration}/${s.kind}/${s.name}`)).toEqual(['crm/sync/contacts']);
  });

  it('writes nothing outside service-integrations/ whatever nango.yaml names, and follows no link out of the project', async () => {
    const dir = temp();
    const source = join(dir, 'nango-integrations');
    write(
      source,
      'nango.yaml',
      [
        'integrations:',
        '  crm:',
        '    syncs:',
        "      '../../../../escaped':",
        '        description: d',
        '        output: Contact',
        '        endpoint: GET /contacts',
        '        sync_type: full',
        "  '../outside':",
        '    syncs: {}',
        'models:',
        '  Contact:',
        '    id: string',
        '',
      ].join('\n'),
    );
    write(dir, 'escaped.ts', 'export default async function f(): Promise<void> {}\n');
    write(dir, 'outside/secret.ts', 'export const secret = 1;\n');
    write(dir, 'private.txt', "not the project's\n");
    write(source, 'common/shared.ts', 'export const shared = 1;\n');
    symlinkSync(join(dir, 'private.txt'), join(source, 'crm-link.txt'));
    mkdirSync(join(source, 'crm', 'syncs'), { recursive: true });
    symlinkSync(join(dir, 'private.txt'), join(source, 'crm', 'private.txt'));
    write(source, '.nango/schema.ts', 'export interface Contact { id: string }\n');
    write(source, 'crm/types.ts', "import type { Contact } from '../.nango/schema.js';\nexport type Row = Contact;\n");
    symlinkSync(join(source, 'common'), join(source, 'crm', 'common'));
    const root = join(dir, 'app');
    const result = await importProject({ from: source, root, compile: false });
    const written = listAll(join(root, 'service-integrations'));
    expect(written).toEqual(['.gitignore', 'crm/common/shared.ts', 'crm/types.ts', 'service.yaml', 'tsconfig.json']);
    expect(read(root, 'service-integrations/crm/types.ts')).toContain("from '../models.js'");
    expect(result.notes).toContain(`not copied: crm/private.txt, a symbolic link to something outside ${source}`);
    expect(result.problems.map((p) => `${p.line}:${p.column} ${p.code}`)).toEqual([
      '4:7 invalid_name',
      '9:3 invalid_name',
    ]);
  });

  it('lists every construct it could not convert with file:line:column, and exits 1', async () => {
    const dir = temp();
    const source = join(dir, 'nango-integrations');
    write(
      source,
      'nango.yaml',
      [
        'integrations:',
        '  crm:',
        '    syncs:',
        '      contacts:',
        '        output: Contact',
        '        endpoint: GET /contacts',
        '        sync_type: full',
        '      deals:',
        '        description: d',
        '        output: Contact',
        '        endpoint: GET /deals',
        '        sync_type: full',
        'models:',
        '  Contact:',
        '    id: string',
        '',
      ].join('\n'),
    );
    write(
      source,
      'crm/syncs/contacts.ts',
      "import type { NangoSync, NangoProxyThing } from '../../models';\nexport default async function f(nango: NangoSync): Promise<NangoProxyThing | void> {}\n",
    );
    const result = await cli(dir, 'import', source);
    expect(result.code).toBe(1);
    expect(result.err).toContain('Not converted (3):');
    expect(result.err).toContain(
      "service-integrations/service.yaml:4:7 error missing_field missing required field 'description': add 'description: <what the sync does>'",
    );
    expect(result.err).toContain(
      "service-integrations/crm/syncs/deals.ts:0:0 error script_not_found nango.yaml declares sync 'deals' of 'crm', but there is no script for it",
    );
    expect(result.err).toContain(
      "service-integrations/crm/syncs/contacts.ts:1:26 error import_not_converted 'NangoProxyThing' is not exported by the generated models.ts",
    );
    // What could be converted was written all the same.
    expect(read(dir, 'service-integrations/crm/syncs/contacts.ts')).toContain('nango: ServiceSync');
  });
});

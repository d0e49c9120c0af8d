/**
 * `service test` runs the recorded runs of the field's format (`<integration>/mocks/`, as that product's
 * `dryrun --save-responses` writes them) on the service's runtime, and passes a run only when it stores
 * exactly the recorded records or answers the recorded output. Both forms of request recordings: the
 * newer one file per request, named by the SHA-1 of the request's identity (computed here as the
 * format documents it, not with the service's code), and the older one body per endpoint, which
 * recorded the first page of a walk only.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localTemporalEnv, runCliCaptured, type CliOutcome } from '../helpers/cli.js';

const SERVICE_YAML = `integrations:
  crm:
    syncs:
      contacts:
        description: Contacts, a cursor walk.
        output: Contact
        endpoint: GET /contacts
        sync_type: full
      users:
        description: Users, recorded in the older form (one page).
        output: User
        endpoint: GET /users
        sync_type: full
    actions:
      create-note:
        description: Adds a note to a contact.
        input: NoteInput
        output: Note
        endpoint: POST /notes
models:
  Contact:
    id: string
    name: string
  User:
    id: string
    email: string
  NoteInput:
    contactId: string
    text: string
  Note:
    id: string
    contactId: string
`;

const SCRIPTS: Record<string, string> = {
  'crm/syncs/contacts.ts': `import type { ServiceSync } from '../../models';
import { toContact } from '../mappers/to-contact.js';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    const metadata = await nango.getMetadata<{ region: string }>();
    for await (const page of nango.paginate({
        endpoint: '/contacts',
        params: { region: metadata.region },
        paginate: { type: 'cursor', cursor_name_in_request: 'after', cursor_path_in_response: 'next', response_path: 'items', limit_name_in_request: 'limit', limit: 2 }
    })) {
        await nango.batchSave(page.map(toContact), 'Contact');
    }
}
`,
  'crm/mappers/to-contact.ts': `import type { Contact } from '../../models';
export const toContact = (raw: { id: number; first: string; last: string }): Contact => ({ id: String(raw.id), name: raw.first + ' ' + raw.last });
`,
  'crm/syncs/users.ts': `import type { ServiceSync } from '../../models';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    for await (const users of nango.paginate<{ id: string; email: string }>({
        endpoint: '/users',
        paginate: { type: 'cursor', cursor_name_in_request: 'cursor', cursor_path_in_response: 'meta.next', response_path: 'users' }
    })) {
        await nango.batchSave(users, 'User');
    }
}
`,
  'crm/actions/create-note.ts': `import type { ServiceAction, Note, NoteInput } from '../../models';

export default async function runAction(nango: ServiceAction, input: NoteInput): Promise<Note> {
    const response = await nango.post({ endpoint: '/notes', data: { contact: input.contactId, body: input.text } });
    return { id: String(response.data.id), contactId: input.contactId };
}
`,
};

/** The file name of a request's answer in the newer form: SHA-1 of its identity, as the format computes it. */
function identityHash(request: {
  method: string;
  endpoint: string;
  params: [string, unknown][];
  data?: string;
}): string {
  return createHash('sha1')
    .update(
      JSON.stringify({
        method: request.method,
        endpoint: request.endpoint,
        params: request.params,
        headers: [],
        data: request.data,
      }),
    )
    .digest('hex');
}

function recordings(contacts: unknown[]): Record<string, unknown> {
  const perRequest = (params: [string, unknown][], response: unknown): [string, unknown] => [
    `crm/mocks/nango/get/proxy/contacts/contacts/${identityHash({ method: 'get', endpoint: 'contacts', params })}.json`,
    {
      method: 'get',
      endpoint: 'contacts',
      requestIdentity: { method: 'get', endpoint: 'contacts', params, headers: [] },
      response,
      headers: {},
      status: 200,
    },
  ];
  const noteBody = JSON.stringify({ contact: 'c1', body: 'call back' });
  return Object.fromEntries<unknown>([
    ['crm/mocks/nango/getMetadata.json', { region: 'eu' }],
    perRequest(
      [
        ['limit', 2],
        ['region', 'eu'],
      ],
      {
        items: [
          { id: 1, first: 'Ada', last: 'Lovelace' },
          { id: 2, first: 'Alan', last: 'Turing' },
        ],
        next: 'c2',
      },
    ),
    perRequest(
      [
        ['after', 'c2'],
        ['limit', 2],
        ['region', 'eu'],
      ],
      { items: [{ id: 3, first: 'Grace', last: 'Hopper' }] },
    ),
    ['crm/mocks/contacts/Contact/batchSave.json', contacts],
    // The older form: the endpoint's body (the walk's first page; its next cursor was not followed then).
    [
      'crm/mocks/nango/get/proxy/users/users.json',
      { users: [{ id: 'u1', email: 'u1@example.com' }], meta: { next: 'u2' } },
    ],
    ['crm/mocks/users/User/batchSave.json', [{ id: 'u1', email: 'u1@example.com' }]],
    [
      `crm/mocks/nango/post/proxy/notes/create-note/${identityHash({ method: 'post', endpoint: 'notes', params: [], data: noteBody })}.json`,
      {
        requestIdentity: { method: 'post', endpoint: 'notes', params: [], headers: [], data: noteBody },
        response: { id: 77 },
        status: 201,
      },
    ],
    ['crm/mocks/create-note/input.json', { contactId: 'c1', text: 'call back' }],
    ['crm/mocks/create-note/output.json', { id: '77', contactId: 'c1' }],
  ]);
}

const CONTACTS = [
  { id: '1', name: 'Ada Lovelace' },
  { id: '2', name: 'Alan Turing' },
  { id: '3', name: 'Grace Hopper' },
];

function write(root: string, files: Record<string, unknown>): void {
  for (const [file, content] of Object.entries(files)) {
    const path = join(root, 'service-integrations', file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
}

const serviceTest = (root: string): Promise<CliOutcome> =>
  runCliCaptured(['test'], { cwd: root, env: localTemporalEnv() });

describe("service test: the recorded runs of the field's format", () => {
  const root = mkdtempSync(join(tmpdir(), 'format-recordings-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('each recorded run passes when it stores the recorded records or answers the recorded output', async () => {
    write(root, { 'service.yaml': SERVICE_YAML, ...SCRIPTS, ...recordings(CONTACTS) });
    const result = await serviceTest(root);
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    expect(result.out).toContain('✓ service-integrations/crm/mocks/contacts\n');
    expect(result.out).toContain('✓ service-integrations/crm/mocks/users\n');
    expect(result.out).toContain('✓ service-integrations/crm/mocks/create-note\n');
    expect(result.out).toContain('3 passed, 0 failed');
  }, 240_000);

  it('a run that stores other records, or asks for a request the recording lacks, fails and says where', async () => {
    write(root, recordings([CONTACTS[0], { id: '2', name: 'Alan M. Turing' }, CONTACTS[2]]));
    write(root, {
      'crm/actions/create-note.ts': SCRIPTS['crm/actions/create-note.ts']!.replace(
        'body: input.text',
        "body: input.text + '!'",
      ),
    });
    const result = await serviceTest(root);
    expect(result.code).toBe(1);
    expect(result.err).toContain(
      '✗ service-integrations/crm/mocks/contacts: batchSave Contact: 3 records where the recording has 3; the first difference is record 1',
    );
    expect(result.err).toMatch(
      /✗ service-integrations\/crm\/mocks\/create-note: the run failed: fixture_missing: .*POST \/notes/,
    );
    expect(result.out).toContain('1 passed, 2 failed');
  }, 240_000);
});

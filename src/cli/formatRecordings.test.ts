/**
 * How a local run's request finds its answer among the recordings of the field's format
 * (recordedBackend): by the SHA-1 of the request's identity, as the format names the files. The format's
 * recorder took the query from the URL it sent, so a number in the script's `params` was recorded as the
 * text the URL carried (`"25"`); older recorders kept the value as the script gave it (`25`). Both must
 * answer the same request. Some recorders wrote a script's requests under its default variant's folder,
 * `<script>/base/`. Fixtures are made up here, hashed as the format documents its identity.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { recordedBackend } from './formatRecordings.js';

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** An integration folder whose script `list-pets` has one recorded GET /pets, its query as given. */
function recording(params: [string, unknown][], response: unknown, variant?: string): string {
  const folder = mkdtempSync(join(tmpdir(), 'recorded-backend-'));
  folders.push(folder);
  const identity = { method: 'get', endpoint: 'pets', params, headers: [], data: undefined };
  const hash = createHash('sha1').update(JSON.stringify(identity)).digest('hex');
  const dir = join(
    folder,
    'mocks',
    'nango',
    'get',
    'proxy',
    'pets',
    'list-pets',
    ...(variant === undefined ? [] : [variant]),
  );
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `${hash}.json`),
    JSON.stringify({ requestIdentity: identity, response, headers: {}, status: 200 }),
  );
  return folder;
}

// async: the backend refuses a request it has no answer to by throwing, which the activity turns into its failure.
const ask = async (folder: string, params: Record<string, string | number>) =>
  recordedBackend({ integrationFolder: folder, integration: 'petstore', script: 'list-pets' }).httpRequest({
    method: 'GET',
    config: { endpoint: '/pets', params },
  });

describe('recordedBackend: a request and its recorded answer', () => {
  it('a number in the query answers from a recording that kept it as the text of the URL', async () => {
    const folder = recording(
      [
        ['kind', 'cat'],
        ['per_page', '25'],
      ],
      { pets: ['Tom'] },
    );
    const answer = await ask(folder, { per_page: 25, kind: 'cat' });
    expect(answer.data).toEqual({ pets: ['Tom'] });
  });

  it('a number in the query still answers from a recording that kept the number', async () => {
    const folder = recording([['per_page', 25]], { pets: ['Felix'] });
    expect((await ask(folder, { per_page: 25 })).data).toEqual({ pets: ['Felix'] });
  });

  it('the text of a number answers from a recording that kept the number', async () => {
    const folder = recording([['per_page', 25]], { pets: ['Garfield'] });
    expect((await ask(folder, { per_page: '25' })).data).toEqual({ pets: ['Garfield'] });
  });

  it('another value is still no answer', async () => {
    const folder = recording([['per_page', '25']], { pets: [] });
    await expect(ask(folder, { per_page: 26 })).rejects.toThrow(/the recording has no answer to GET \/pets/);
  });

  it("a request answers from its script's default variant's folder (`<script>/base/`), where some recorders wrote", async () => {
    const folder = recording([['kind', 'dog']], { pets: ['Rex'] }, 'base');
    expect((await ask(folder, { kind: 'dog' })).data).toEqual({ pets: ['Rex'] });
    await expect(ask(folder, { kind: 'cat' })).rejects.toThrow(/the recording has no answer to GET \/pets/);
  });

  it("another variant's folder is not the script's", async () => {
    const folder = recording([['kind', 'dog']], { pets: ['Rex'] }, 'large-kennels');
    await expect(ask(folder, { kind: 'dog' })).rejects.toThrow(/the recording has no answer to GET \/pets/);
  });
});

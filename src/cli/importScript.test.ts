import { describe, expect, it } from 'vitest';
import { renamedHelperType, rewriteScript, type ScriptRewriteInput } from './importScript.js';

const EXPORTS = new Set(['ServiceSync', 'ServiceAction', 'ActionError', 'Contact', 'NangoActionError']);

function rewrite(source: string, where: Partial<ScriptRewriteInput> = {}) {
  return rewriteScript({
    source,
    from: '/src/crm/syncs/contacts.ts',
    to: '/dst/service-integrations/crm/syncs/contacts.ts',
    sourceModels: '/src/models',
    targetModels: '/dst/service-integrations/models',
    sourceRoot: '/src',
    targetRoot: '/dst/service-integrations',
    modelsExports: EXPORTS,
    ...where,
  });
}

describe('renamedHelperType', () => {
  it('keeps what models.ts exports (a model named Nango… included) and maps Nango<X> to an exported Service<X>', () => {
    expect(renamedHelperType('Contact', EXPORTS)).toBe('Contact');
    expect(renamedHelperType('NangoActionError', EXPORTS)).toBe('NangoActionError');
    expect(renamedHelperType('NangoSync', EXPORTS)).toBe('ServiceSync');
    expect(renamedHelperType('NangoProxy', EXPORTS)).toBeNull();
    expect(renamedHelperType('Unknown', EXPORTS)).toBeNull();
  });
});

describe('rewriteScript', () => {
  it('renames the helper types imported from the models file wherever they are used, and nothing else', () => {
    const source = `import type { NangoSync, Contact } from '../../models';
import { helper } from '../helpers/helper.js';

const label = { NangoSync: 'a property keeps its name' };
export default async function fetchData(nango: NangoSync): Promise<void> {
    const typed: NangoSync = nango;
    await typed.batchSave<Contact>([], 'Contact');
    helper(label.NangoSync);
}
`;
    const result = rewrite(source, {
      from: '/dst/service-integrations/crm/syncs/contacts.ts',
      sourceRoot: '/dst/service-integrations',
      sourceModels: '/dst/service-integrations/models',
    });
    expect(result.text).toBe(
      source.replaceAll(': NangoSync', ': ServiceSync').replace('{ NangoSync, Contact }', '{ ServiceSync, Contact }'),
    );
    expect(result.renames).toEqual(['NangoSync → ServiceSync']);
    expect(result.problems).toEqual([]);
    expect(result.movedImports).toBe(0);
  });

  it('renames only the imported name of an aliased import, keeps a model named Nango…, and reports a type models.ts lacks', () => {
    const source = `import type { NangoAction as Action, NangoActionError, NangoProxyConfig } from '../../models.js';
export default async function run(nango: Action): Promise<NangoActionError> {
    return { type: 'generic_error', message: String(nango) };
}
`;
    const result = rewrite(source);
    expect(result.text).toBe(source.replace('NangoAction as Action', 'ServiceAction as Action'));
    expect(result.problems).toEqual([
      {
        line: 1,
        column: 56,
        message:
          "'NangoProxyConfig' is not exported by the generated models.ts of this service (neither as 'NangoProxyConfig' nor as 'ServiceProxyConfig')",
      },
    ]);
  });

  it('rewrites the relative imports of a script that moves so they reach the same files', () => {
    const source = `import type { NangoSync } from './models';
import { toContact } from './crm/mappers/to-contact.js';
import type { Raw } from './types';
export default async function fetchData(nango: NangoSync): Promise<void> {
    await nango.log(String(toContact({} as Raw)));
}
`;
    const result = rewrite(source, { from: '/src/contacts.ts' });
    expect(result.text).toBe(`import type { ServiceSync } from '../../models';
import { toContact } from '../mappers/to-contact.js';
import type { Raw } from '../../types';
export default async function fetchData(nango: ServiceSync): Promise<void> {
    await nango.log(String(toContact({} as Raw)));
}
`);
    expect(result.movedImports).toBe(3);
  });

  it("points an import of the format's other generated models file, .nango/schema, at models.ts", () => {
    const source = `import type { Contact } from './../../.nango/schema.js';\nexport type Row = Contact;\n`;
    const result = rewrite(source);
    expect(result.text).toBe(`import type { Contact } from '../../models.js';\nexport type Row = Contact;\n`);
    expect(result.problems).toEqual([]);
  });

  it('reports an import that leaves the project folder', () => {
    const result = rewrite(
      `import { shared } from '../../../shared/util';\nexport default async function f(): Promise<void> { shared(); }\n`,
    );
    expect(result.problems).toEqual([
      {
        line: 1,
        column: 24,
        message:
          "imports '../../../shared/util', outside the project folder: copy what it needs into the integration's folder",
      },
    ]);
  });
});

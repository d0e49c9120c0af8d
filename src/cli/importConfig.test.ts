import { describe, expect, it } from 'vitest';
import { compileConfig } from '../config/index.js';
import { convertConfigText } from './importConfig.js';

const NANGO_YAML = `# the team's integrations
integrations:
    crm:
        syncs:
            contacts:
                runs: every half hour
                description: Contacts
                output: Contact
                endpoint: GET /contacts
                version: 1.0.2 # bumped by the deploy script
                webhook-subscriptions:
                    - contact.created
            companies:
                description: |
                    Companies, every day.
                output: Company
                endpoint: /companies
                version: 2
        actions:
            create-contact:
                description: Creates a contact
                output: Contact
                endpoint: POST /contacts
                version: 3
models:
    Contact:
        id: string
    Company:
        id: string
        version: string
`;

describe('convertConfigText', () => {
  it('adds sync_type, removes version and renames webhook-subscriptions, touching nothing else', () => {
    const { text, edits } = convertConfigText(NANGO_YAML);
    expect(text).toBe(`# the team's integrations
integrations:
    crm:
        syncs:
            contacts:
                sync_type: full # added by service import: the de-facto format's default
                runs: every half hour
                description: Contacts
                output: Contact
                endpoint: GET /contacts
                webhook_subscriptions:
                    - contact.created
            companies:
                sync_type: full # added by service import: the de-facto format's default
                description: |
                    Companies, every day.
                output: Company
                endpoint: /companies
        actions:
            create-contact:
                description: Creates a contact
                output: Contact
                endpoint: POST /contacts
models:
    Contact:
        id: string
    Company:
        id: string
        version: string
`);
    expect(edits.map((edit) => `${edit.line}: ${edit.message}`)).toEqual([
      "6: crm/syncs/contacts: added 'sync_type: full' (the de-facto format's default when it is left out; SPEC.md requires it)",
      "10: crm/syncs/contacts: removed 'version' (every deploy is a version here: service deploy --redeploy <n>)",
      "11: crm/syncs/contacts: renamed 'webhook-subscriptions' to 'webhook_subscriptions'",
      "14: crm/syncs/companies: added 'sync_type: full' (the de-facto format's default when it is left out; SPEC.md requires it)",
      "18: crm/syncs/companies: removed 'version' (every deploy is a version here: service deploy --redeploy <n>)",
      "24: crm/actions/create-contact: removed 'version' (every deploy is a version here: service deploy --redeploy <n>)",
    ]);
    const compiled = compileConfig(text);
    expect(compiled.problems).toEqual([]);
    expect(compiled.config?.integrations[0]?.syncs.map((s) => [s.name, s.syncType, s.webhookSubscriptions])).toEqual([
      ['contacts', 'full', ['contact.created']],
      ['companies', 'full', []],
    ]);
  });

  it('keeps Windows line endings', () => {
    const crlf =
      'integrations:\r\n  a:\r\n    syncs:\r\n      s:\r\n        output: M\r\n        version: 2\r\n        endpoint: /m\r\n';
    expect(convertConfigText(crlf).text).toBe(
      "integrations:\r\n  a:\r\n    syncs:\r\n      s:\r\n        sync_type: full # added by service import: the de-facto format's default\r\n        output: M\r\n        endpoint: /m\r\n",
    );
  });

  it('leaves a file that needs nothing, one that does not parse, and flow mappings as they are', () => {
    const clean = 'integrations:\n  a:\n    syncs:\n      s:\n        sync_type: incremental\n        output: M\n';
    expect(convertConfigText(clean)).toEqual({ text: clean, edits: [] });
    const broken = 'integrations:\n  a: [\n';
    expect(convertConfigText(broken)).toEqual({ text: broken, edits: [] });
    const flow = 'integrations:\n  a:\n    syncs:\n      s: { output: M, version: 1 }\n';
    expect(convertConfigText(flow)).toEqual({ text: flow, edits: [] });
  });
});

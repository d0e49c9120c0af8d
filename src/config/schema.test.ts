import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildJsonSchema } from './schema.js';
import { compileConfig } from './validate.js';
import { JSON_SCHEMA_FILE } from './writeJsonSchema.js';

describe('the files in config/', () => {
  it('service.schema.json is what the zod schema generates (run `npx tsx src/config/writeJsonSchema.ts` when not)', () => {
    const committed: unknown = JSON.parse(readFileSync(JSON_SCHEMA_FILE, 'utf8'));
    expect(committed).toEqual(buildJsonSchema());
  });

  it('the JSON Schema carries the structural rules: required fields, no unknown keys, the endpoint pattern', () => {
    const schema = JSON.stringify(buildJsonSchema());
    expect(schema).toContain('"required":["description","output","endpoint","sync_type"]');
    expect(schema).toContain('"additionalProperties":false');
    expect(schema).toContain('^(?:(GET|POST|PUT|PATCH|DELETE) )?(');
  });

  it('service.example.yaml compiles without a single problem', () => {
    const text = readFileSync(fileURLToPath(new URL('../../config/service.example.yaml', import.meta.url)), 'utf8');
    const { config, problems } = compileConfig(text);
    expect(problems).toEqual([]);
    expect(config?.integrations[0]?.syncs.map((s) => s.name)).toEqual(['issues', 'repositories']);
  });
});

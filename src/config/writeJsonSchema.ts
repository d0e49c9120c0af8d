/**
 * Writes config/service.schema.json from the zod schema (`npx tsx src/config/writeJsonSchema.ts`).
 * A test fails when the committed file differs from what this would write.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildJsonSchema } from './schema.js';

export const JSON_SCHEMA_FILE = fileURLToPath(new URL('../../config/service.schema.json', import.meta.url));

export function jsonSchemaText(): string {
  return `${JSON.stringify(buildJsonSchema(), null, 2)}\n`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(JSON_SCHEMA_FILE, jsonSchemaText());
  process.stdout.write(`wrote ${JSON_SCHEMA_FILE}\n`);
}

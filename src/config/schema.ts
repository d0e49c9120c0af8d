/**
 * The shape of service.yaml as zod schemas: the single source of the structural rules (which keys,
 * which value types, which are required) and of the JSON Schema for editors (config/service.schema.json,
 * written by `npx tsx src/config/writeJsonSchema.ts`). Rules that span several values
 * (model references, output/endpoint lengths, `id`, type expressions, `runs`) live in validate.ts,
 * because they need the whole file and must all be reported in one run.
 */
import { z } from 'zod';
import { ENDPOINT_PATTERN, HTTP_METHODS, PATH_PATTERN } from './endpoint.js';
import { MAX_RUNS_TEXT, MIN_RUNS_TEXT, RUNS_FORMS } from './runs.js';

const nameList = (what: string) =>
  z.union([z.string(), z.array(z.string())], { error: `expected ${what}: a string or a list of strings` });

const endpointString = (defaultMethod: string) =>
  z
    .string({ error: 'expected an endpoint string "<METHOD> <URL-PATH>"' })
    .regex(new RegExp(ENDPOINT_PATTERN))
    .describe(
      `"<METHOD> <URL-PATH>", METHOD one of GET, POST, PUT, PATCH, DELETE; without a method, ${defaultMethod}. Example: "GET /issues"`,
    );

const endpointMapping = (defaultMethod: string) =>
  z
    .strictObject({
      method: z.enum(HTTP_METHODS).describe(`Default ${defaultMethod}.`).optional(),
      path: z.string().regex(new RegExp(PATH_PATTERN)).describe('The URL path, starting with "/". Example: "/issues"'),
      group: z
        .string()
        .describe('A heading the endpoint is listed under in the generated OpenAPI document.')
        .optional(),
    })
    .describe('An endpoint as a mapping: { method, path, group }.');

const endpoint = (defaultMethod: string) =>
  z.union([endpointString(defaultMethod), endpointMapping(defaultMethod)], {
    error: 'expected an endpoint: "<METHOD> <URL-PATH>" or a mapping { method, path }',
  });

const scopes = z
  .union([z.string(), z.array(z.string())], { error: 'expected a string or a list of strings' })
  .describe(
    'Informational only: the scopes the integration needs, as a list or one comma-separated string. Triggers no configuration.',
  );

/** Keys the de-facto format reads and this service does not; accepted with a warning (`ignored_key`). */
const formatVersion = z
  .union([z.string(), z.number()])
  .describe(
    "The de-facto format's script version; ignored here (each deploy is a version: `service deploy --redeploy <n>`).",
  )
  .meta({ deprecated: true })
  .optional();

/** A type expression naming the data: a model name, or a type (`Task[]`, `string`, `Company | null`). */
const typeName = (what: string) => z.string({ error: `expected ${what}: a model name or a type expression` });

export const syncSchema = z
  .strictObject({
    description: z.string().describe('Describes the sync.'),
    output: nameList('model name(s)').describe(
      'Name(s) of model(s) in `models`. When a list, `endpoint` is a list of the same length: the n-th endpoint returns the n-th model.',
    ),
    endpoint: z
      .union([endpoint('GET'), z.array(endpoint('GET'))], { error: 'expected an endpoint or a list of endpoints' })
      .describe('The generated endpoint(s) returning the output model(s).'),
    sync_type: z
      .enum(['incremental', 'full'])
      .describe('`full`: each run replaces all data. `incremental`: each run upserts.'),
    runs: z
      .string({ error: `expected a string: ${RUNS_FORMS}` })
      .describe(
        `How often the sync runs, at most every ${MIN_RUNS_TEXT} and at least every ${MAX_RUNS_TEXT}. Default "24h". Accepts ${RUNS_FORMS}.`,
      )
      .optional(),
    input: typeName('the input')
      .describe('Model (or type expression) of the data the sync needs, delivered through the connection metadata.')
      .optional(),
    scopes: scopes.optional(),
    auto_start: z.boolean().describe('Start syncing when a connection is created. Default true.').optional(),
    auto_starts: z
      .boolean()
      .describe('Deprecated spelling of `auto_start`; accepted with a warning.')
      .meta({ deprecated: true })
      .optional(),
    track_deletes: z
      .boolean()
      .describe('Full syncs only: flag records absent from a successful run as deleted. Default false.')
      .optional(),
    webhook_subscriptions: nameList('webhook types')
      .describe('Types of external webhooks the sync script handles.')
      .optional(),
    'webhook-subscriptions': nameList('webhook types')
      .describe("The de-facto format's spelling of `webhook_subscriptions`; accepted with a warning.")
      .meta({ deprecated: true })
      .optional(),
    version: formatVersion,
    record_validation: z
      .enum(['off', 'warn', 'refuse'])
      .describe(
        'Checks every record batchSave receives against its model: `warn` logs each bad field (with its path) and stores the record, `refuse` fails the run with `invalid_record` before anything of the batch is stored. Default off.',
      )
      .optional(),
  })
  .describe('A sync: a script that runs on a schedule per connection and stores records.');

export const actionSchema = z
  .strictObject({
    description: z.string().describe('Describes the action.'),
    output: typeName('the output').describe(
      'What the action returns: a model name or a type expression (`Task[]`, `boolean`, `Company | null`).',
    ),
    endpoint: endpoint('POST').describe(
      'Generated endpoint that triggers the action: "<METHOD> <URL-PATH>" or { method, path, group }.',
    ),
    input: typeName('the input')
      .describe('Model (or type expression) of the data needed to trigger the action.')
      .optional(),
    scopes: scopes.optional(),
    version: formatVersion,
  })
  .describe('An action: a script that runs on demand and returns a result.');

/**
 * A field's type: a type expression string, a number or boolean literal, null, a YAML list (an array
 * of the union of its items) or a mapping (an inline object).
 */
export const fieldTypeSchema: z.ZodType = z.lazy(() =>
  z.union(
    [z.string(), z.number(), z.boolean(), z.null(), z.array(fieldTypeSchema), z.record(z.string(), fieldTypeSchema)],
    {
      error: 'expected a type: a type expression, a literal, a list or a mapping',
    },
  ),
);

export const modelSchema = z
  .object({
    __extends: nameList('model name(s)').describe('Parent model(s) whose fields this model inherits.').optional(),
    __string: fieldTypeSchema.describe('Type of any additional string key (an index signature).').optional(),
  })
  .catchall(fieldTypeSchema)
  .describe('Field names (`name?` for an optional field) to type expressions.');

const mapOf = <T extends z.ZodType>(value: T, what: string) =>
  // `syncs:` with nothing after it is YAML null: read it as an empty map rather than an error.
  z.record(z.string(), value, { error: `expected a mapping of ${what}` }).nullable();

export const integrationSchema = z
  .strictObject({
    syncs: mapOf(syncSchema, 'sync names to syncs').optional(),
    actions: mapOf(actionSchema, 'action names to actions').optional(),
    mcp_tools: nameList('action names')
      .describe(
        'The actions AI agents may call as tools through POST /mcp (docs/api.md "Actions as tools for AI agents"). Default: every action of the integration; an empty list exposes none.',
      )
      .optional(),
  })
  .nullable()
  .describe('The syncs and actions of one integration.');

export const serviceYamlSchema = z
  .strictObject({
    integrations: mapOf(integrationSchema, 'integration ids to integrations').describe('Integrations by id.'),
    models: mapOf(modelSchema, 'model names to models').optional().describe('Models by name.'),
  })
  .describe('service-integrations/service.yaml');

/** The JSON Schema for editors, from the same zod schema the compiler validates with. */
export function buildJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(serviceYamlSchema, { io: 'input', target: 'draft-07' });
  return { ...schema, title: 'service.yaml' };
}

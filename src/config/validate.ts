/**
 * The service.yaml compiler: load (YAML with positions) → schema (zod: keys, value types, required
 * fields) → cross-reference checks (models, `id`, `__extends`, output/endpoint lengths, `runs`, type
 * expressions, generated endpoints that collide or that a built-in route shadows) → the normalized
 * {@link ServiceConfig}. Every stage runs on whatever the previous one
 * could read, so one run reports every problem of the file; the config is returned only without errors.
 */
import type { z } from 'zod';
import { ENDPOINT_FORM, endpointHint, parseEndpoint } from './endpoint.js';
import { checkGeneratedEndpoints } from './generatedEndpoints.js';
import { loadYaml, type LoadedYaml } from './load.js';
import { closest, didYouMean, type ConfigProblem, type ProblemCode, type YamlPath } from './problems.js';
import { MIN_RUNS_TEXT, parseRuns, RUNS_FORMS } from './runs.js';
import { actionSchema, integrationSchema, serviceYamlSchema, syncSchema } from './schema.js';
import { KNOWN_TYPES, parseTypeExpr } from './typeExpr.js';
import {
  DEFAULT_RUNS,
  MIN_RUNS_MS,
  type ActionConfig,
  type EndpointConfig,
  type FieldConfig,
  type IntegrationConfig,
  type ModelConfig,
  type RecordValidationMode,
  type ServiceConfig,
  type SyncConfig,
  type SyncOutput,
  type TypeExpr,
} from './types.js';

export interface ConfigResult {
  /** The normalized configuration; null when there is at least one error. */
  config: ServiceConfig | null;
  /** Errors and warnings, in document order. */
  problems: ConfigProblem[];
}

type Raw = Record<string, unknown>;

const isRecord = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);
const isStringList = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((item) => typeof item === 'string');
const asList = (value: unknown): string[] | null =>
  typeof value === 'string' ? [value] : isStringList(value) ? value : null;
const entries = (value: unknown): [string, unknown][] => (isRecord(value) ? Object.entries(value) : []);

/** Integration ids, sync and action names become file paths, URLs and workflow ids. */
const RESOURCE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;
/** Folders of service-integrations/ that are not integrations (an integration's scripts live in a folder named by its id). */
const RESERVED_FOLDERS = new Set(['build', 'node_modules']);
/** Model names become TypeScript interface names. */
const MODEL_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const RESERVED_MODEL_NAMES = new Set([
  ...KNOWN_TYPES.keys(),
  'true',
  'false',
  'ServiceSync',
  'ServiceAction',
  'ActionError',
  'Array',
  'Record',
  'Promise',
  'Object',
  'String',
  'Number',
  'Boolean',
  'never',
  'void',
  'symbol',
  'bigint',
]);
const MODEL_KEYS = ['__extends', '__string'];

class Collector {
  readonly problems: ConfigProblem[] = [];
  constructor(private readonly yaml: LoadedYaml) {}

  add(severity: ConfigProblem['severity'], code: ProblemCode, message: string, path: YamlPath, atKey = false): void {
    const { line, column } = this.yaml.locate(path, { key: atKey });
    this.problems.push({ severity, code, message, path: [...path], line, column });
  }
  error(code: ProblemCode, message: string, path: YamlPath, atKey = false): void {
    this.add('error', code, message, path, atKey);
  }
  warn(code: ProblemCode, message: string, path: YamlPath, atKey = false): void {
    this.add('warning', code, message, path, atKey);
  }
  get errorCount(): number {
    return this.problems.filter((p) => p.severity === 'error').length;
  }
}

/** Compiles the text of a service.yaml. Never throws on any input. */
export function compileConfig(text: string): ConfigResult {
  const yaml = loadYaml(text);
  if (yaml.problems.length > 0) return { config: null, problems: sortProblems(yaml.problems) };
  const out = new Collector(yaml);
  if (yaml.value === null || yaml.value === undefined) {
    out.error('empty_config', 'the file is empty: it needs at least `integrations:`', []);
    return { config: null, problems: out.problems };
  }
  schemaProblems(yaml.value, out);
  const config = crossCheck(yaml, yaml.value, out);
  for (const problem of checkGeneratedEndpoints(config)) out.error(problem.code, problem.message, problem.path);
  return { config: out.errorCount === 0 ? config : null, problems: sortProblems(out.problems) };
}

function sortProblems(problems: ConfigProblem[]): ConfigProblem[] {
  return [...problems].sort((a, b) => a.line - b.line || a.column - b.column);
}

// ---------------------------------------------------------------------------------------------------
// Schema stage: zod issues become problems with our codes and messages.

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${value}`;
  return typeof value;
}

/** zod's type names in the words of YAML. */
const YAML_NAMES: Record<string, string> = {
  object: 'a mapping',
  record: 'a mapping',
  array: 'a list',
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
};

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let current = root;
  for (const part of path) {
    if (Array.isArray(current) && typeof part === 'number') current = current[part];
    else if (isRecord(current) && typeof part === 'string') current = current[part];
    else return undefined;
  }
  return current;
}

function toYamlPath(path: readonly PropertyKey[]): YamlPath {
  return path.map((part) => (typeof part === 'number' ? part : String(part)));
}

/** Which keys are allowed in the mapping at `path` (for "did you mean"). */
function allowedKeys(path: YamlPath): string[] {
  if (path.length === 0) return Object.keys(serviceYamlSchema.shape);
  if (path.length === 2 && path[0] === 'integrations') return Object.keys(integrationSchema.unwrap().shape);
  if (path.length === 4 && path[2] === 'syncs') return Object.keys(syncSchema.shape).filter((k) => k !== 'auto_starts');
  if (path.length === 4 && path[2] === 'actions') return Object.keys(actionSchema.shape);
  return [];
}

function describePlace(path: YamlPath): string {
  if (path.length === 0) return 'at the top level';
  if (path.length === 2 && path[0] === 'integrations') return `in integration '${String(path[1])}'`;
  if (path.length === 4 && path[2] === 'syncs') return `in sync '${String(path[3])}'`;
  if (path.length === 4 && path[2] === 'actions') return `in action '${String(path[3])}'`;
  return '';
}

function schemaProblems(value: unknown, out: Collector): void {
  const parsed = serviceYamlSchema.safeParse(value);
  if (parsed.success) return;
  for (const issue of parsed.error.issues) issueProblems(value, issue, [], out);
}

function issueProblems(root: unknown, issue: z.core.$ZodIssue, prefix: readonly PropertyKey[], out: Collector): void {
  const fullPath = [...prefix, ...issue.path];
  const path = toYamlPath(fullPath);
  const input = valueAt(root, fullPath);
  const field = path[path.length - 1];
  const generic = issue.message.startsWith('Invalid');
  if (input === undefined && issue.code !== 'unrecognized_keys' && issue.code !== 'custom') {
    out.error('missing_field', `missing required field '${String(field)}'`, path);
    return;
  }
  switch (issue.code) {
    case 'unrecognized_keys': {
      const allowed = allowedKeys(path);
      for (const key of issue.keys) {
        const suggestion = didYouMean(key, allowed);
        const hint =
          suggestion !== '' || allowed.length === 0 ? suggestion : `; expected one of: ${allowed.join(', ')}`;
        out.error(
          'unknown_key',
          `unknown key '${key}' ${describePlace(path)}${hint}`.replace('  ', ' '),
          [...path, key],
          true,
        );
      }
      return;
    }
    case 'invalid_union': {
      // When the value has the right outer shape (a list, say) but something inside is wrong, the
      // inner problem is the useful one: report that branch's issues.
      const deeper = issue.errors.filter(
        (branch) => branch.length > 0 && branch.every((inner) => inner.path.length > 0),
      );
      if (deeper.length === 1 && deeper[0] !== undefined) {
        for (const inner of deeper[0]) issueProblems(root, inner, fullPath, out);
        return;
      }
      if (isEndpointPath(path) && typeof input === 'string') {
        endpointProblem(input, path, out);
        return;
      }
      out.error('invalid_type', `${generic ? 'unexpected value' : issue.message}, got ${describeValue(input)}`, path);
      return;
    }
    case 'invalid_type': {
      const expected = generic ? `expected ${YAML_NAMES[issue.expected] ?? issue.expected}` : issue.message;
      out.error('invalid_type', `${expected}, got ${describeValue(input)}`, path);
      return;
    }
    case 'invalid_format': {
      if (isEndpointPath(path) && typeof input === 'string') endpointProblem(input, path, out);
      else out.error('invalid_value', issue.message, path);
      return;
    }
    case 'invalid_value': {
      const allowed = issue.values.map(String);
      const got = typeof input === 'string' ? didYouMean(input, allowed) : '';
      out.error(
        'invalid_value',
        `${String(field)} must be one of ${allowed.map((v) => `'${v}'`).join(', ')}, got ${describeValue(input)}${got}`,
        path,
      );
      return;
    }
    default:
      out.error('invalid_value', issue.message, path);
  }
}

function isEndpointPath(path: YamlPath): boolean {
  return (
    path.includes('endpoint') && (path[path.length - 1] === 'endpoint' || typeof path[path.length - 1] === 'number')
  );
}

function endpointProblem(value: string, path: YamlPath, out: Collector): void {
  out.error(
    'invalid_endpoint',
    `invalid endpoint ${JSON.stringify(value)}${endpointHint(value)}; expected ${ENDPOINT_FORM}`,
    path,
  );
}

// ---------------------------------------------------------------------------------------------------
// Cross-reference stage, on the raw value: each check looks only at values of the right shape (the
// schema stage has already reported the others), so a broken sync does not hide a broken model.

function crossCheck(yaml: LoadedYaml, value: unknown, out: Collector): ServiceConfig {
  const root = isRecord(value) ? value : {};
  const modelNames = new Set(Object.keys(isRecord(root['models']) ? root['models'] : {}));
  const models = checkModels(yaml, root['models'], modelNames, out);
  const byName = new Map(models.map((model) => [model.name, model]));

  const integrations: IntegrationConfig[] = [];
  for (const [id, integration] of entries(root['integrations'])) {
    const base = ['integrations', id];
    checkName(id, 'integration id', base, out);
    const item: IntegrationConfig = { id, syncs: [], actions: [] };
    const body = isRecord(integration) ? integration : {};
    for (const [name, sync] of entries(body['syncs'])) {
      const result = checkSync(id, name, sync, [...base, 'syncs', name], modelNames, byName, out);
      if (result !== null) item.syncs.push(result);
    }
    for (const [name, action] of entries(body['actions'])) {
      const result = checkAction(id, name, action, [...base, 'actions', name], modelNames, out);
      if (result !== null) item.actions.push(result);
    }
    integrations.push(item);
  }
  return { integrations, models };
}

function checkName(name: string, what: string, path: YamlPath, out: Collector): void {
  if (!RESOURCE_NAME.test(name)) {
    out.error(
      'invalid_name',
      `${what} '${name}' must start with a letter or digit and hold only letters, digits, '-' and '_' (it becomes a file name and part of URLs)`,
      path,
      true,
    );
  } else if (what === 'integration id' && RESERVED_FOLDERS.has(name)) {
    out.error(
      'invalid_name',
      `integration id '${name}' is reserved: service-integrations/${name}/ is where \`service compile\` writes its output`,
      path,
      true,
    );
  }
}

function checkModelRef(
  name: unknown,
  what: string,
  path: YamlPath,
  modelNames: ReadonlySet<string>,
  out: Collector,
): name is string {
  if (typeof name !== 'string') return false;
  if (modelNames.has(name)) return true;
  const hint = didYouMean(name, modelNames);
  out.error(
    'unknown_model',
    `${what} '${name}' is not a model declared under \`models\`${hint === '' && modelNames.size > 0 ? `; declared: ${[...modelNames].join(', ')}` : hint}`,
    path,
  );
  return false;
}

function checkSync(
  integration: string,
  name: string,
  raw: unknown,
  path: YamlPath,
  modelNames: ReadonlySet<string>,
  models: ReadonlyMap<string, ModelConfig>,
  out: Collector,
): SyncConfig | null {
  checkName(name, 'sync name', path, out);
  if (!isRecord(raw)) return null;

  // auto_starts: a spelling found in a sample configuration (SPEC.md rule 3); accepted, with a warning.
  if ('auto_starts' in raw) {
    if ('auto_start' in raw) {
      out.error(
        'conflicting_keys',
        "both 'auto_start' and its alias 'auto_starts' are set; keep only 'auto_start'",
        [...path, 'auto_starts'],
        true,
      );
    } else {
      out.warn(
        'deprecated_key',
        "'auto_starts' is read as 'auto_start'; write 'auto_start'",
        [...path, 'auto_starts'],
        true,
      );
    }
  }

  const outputList = asList(raw['output']);
  const outputs: string[] = [];
  if (outputList !== null) {
    const seen = new Set<string>();
    outputList.forEach((model, index) => {
      const at = Array.isArray(raw['output']) ? [...path, 'output', index] : [...path, 'output'];
      if (seen.has(model)) out.error('duplicate_output', `model '${model}' is listed twice in output`, at);
      seen.add(model);
      if (checkModelRef(model, 'output', at, modelNames, out)) {
        outputs.push(model);
        checkIdField(models.get(model), at, out);
      }
    });
    if (outputList.length === 0) out.error('missing_field', 'output lists no model', [...path, 'output']);
  }

  const endpointList = asList(raw['endpoint']);
  const endpoints: EndpointConfig[] = [];
  for (const text of endpointList ?? []) {
    const endpoint = parseEndpoint(text);
    if (endpoint !== null) endpoints.push(endpoint);
  }
  if (outputList !== null && endpointList !== null) {
    if (Array.isArray(raw['output']) && !Array.isArray(raw['endpoint'])) {
      out.error(
        'output_endpoint_mismatch',
        `output is a list of ${outputList.length}, so endpoint must be a list of ${outputList.length} too (the n-th endpoint returns the n-th model)`,
        [...path, 'endpoint'],
      );
    } else if (outputList.length !== endpointList.length) {
      out.error(
        'output_endpoint_mismatch',
        `${outputList.length} output model(s) but ${endpointList.length} endpoint(s): the n-th endpoint returns the n-th model, so the lists must have the same length`,
        [...path, 'endpoint'],
      );
    }
  }

  const runs = typeof raw['runs'] === 'string' ? raw['runs'] : DEFAULT_RUNS;
  const parsedRuns = parseRuns(runs);
  if (!parsedRuns.ok && typeof raw['runs'] === 'string') {
    if (parsedRuns.reason === 'below_minimum') {
      out.error(
        'runs_below_minimum',
        `runs ${JSON.stringify(runs)} is more often than the minimum of every ${MIN_RUNS_TEXT} (${MIN_RUNS_MS} ms); accepted forms: ${RUNS_FORMS}`,
        [...path, 'runs'],
      );
    } else {
      out.error('invalid_runs', `runs ${JSON.stringify(runs)} is not a frequency; accepted forms: ${RUNS_FORMS}`, [
        ...path,
        'runs',
      ]);
    }
  }

  const input = raw['input'];
  const inputOk = input === undefined || checkModelRef(input, 'input', [...path, 'input'], modelNames, out);

  const syncType = raw['sync_type'];
  if (syncType === 'incremental' && raw['track_deletes'] === true) {
    out.warn(
      'ignored_field',
      'track_deletes has no effect on an incremental sync (SPEC: it applies to full syncs only)',
      [...path, 'track_deletes'],
    );
  }

  const autoStart = raw['auto_start'] ?? raw['auto_starts'];
  if (
    typeof raw['description'] !== 'string' ||
    (syncType !== 'incremental' && syncType !== 'full') ||
    !parsedRuns.ok ||
    !inputOk ||
    outputs.length !== outputList?.length ||
    endpoints.length !== outputs.length
  ) {
    return null;
  }
  const pairs: SyncOutput[] = outputs.flatMap((model, index) => {
    const endpoint = endpoints[index];
    return endpoint === undefined ? [] : [{ model, endpoint }];
  });
  return {
    name,
    integration,
    description: raw['description'],
    syncType,
    runs,
    runsMs: parsedRuns.ms,
    autoStart: typeof autoStart === 'boolean' ? autoStart : true,
    trackDeletes: raw['track_deletes'] === true,
    outputs: pairs,
    input: typeof input === 'string' ? input : null,
    scopes: isStringList(raw['scopes']) ? raw['scopes'] : [],
    webhookSubscriptions: asList(raw['webhook_subscriptions']) ?? [],
    recordValidation: recordValidationOf(raw['record_validation']),
  };
}

function recordValidationOf(value: unknown): RecordValidationMode {
  return value === 'warn' || value === 'refuse' ? value : 'off';
}

/** SPEC: a model used as sync output must have a field `id`, the record's unique identifier. */
function checkIdField(model: ModelConfig | undefined, path: YamlPath, out: Collector): void {
  if (model === undefined) return;
  const id = model.fields.find((field) => field.name === 'id');
  if (id === undefined) {
    out.error(
      'missing_id',
      `model '${model.name}' is a sync output, so it needs a field 'id' (the unique identifier records are deduplicated by)`,
      path,
    );
  } else if (id.optional || !isIdType(id.type)) {
    out.error(
      'invalid_id',
      `field 'id' of model '${model.name}' must be required and a string or a number (records are deduplicated by it)`,
      path,
    );
  }
}

function isIdType(type: TypeExpr): boolean {
  switch (type.kind) {
    case 'primitive':
      return type.name === 'string' || type.name === 'number';
    case 'literal':
      return typeof type.value !== 'boolean';
    case 'union':
      return type.members.every(isIdType);
    default:
      return false;
  }
}

function checkAction(
  integration: string,
  name: string,
  raw: unknown,
  path: YamlPath,
  modelNames: ReadonlySet<string>,
  out: Collector,
): ActionConfig | null {
  checkName(name, 'action name', path, out);
  if (!isRecord(raw)) return null;
  const outputOk = checkModelRef(raw['output'], 'output', [...path, 'output'], modelNames, out);
  const input = raw['input'];
  const inputOk = input === undefined || checkModelRef(input, 'input', [...path, 'input'], modelNames, out);
  const endpoint = typeof raw['endpoint'] === 'string' ? parseEndpoint(raw['endpoint']) : null;
  if (typeof raw['description'] !== 'string' || !outputOk || !inputOk || endpoint === null) return null;
  return {
    name,
    integration,
    description: raw['description'],
    output: String(raw['output']),
    endpoint,
    input: typeof input === 'string' ? input : null,
    scopes: isStringList(raw['scopes']) ? raw['scopes'] : [],
  };
}

// ---------------------------------------------------------------------------------------------------
// Models.

interface OwnModel {
  name: string;
  path: YamlPath;
  parents: string[];
  fields: FieldConfig[];
  stringIndex: TypeExpr | null;
}

function checkModels(yaml: LoadedYaml, raw: unknown, modelNames: ReadonlySet<string>, out: Collector): ModelConfig[] {
  const own = new Map<string, OwnModel>();
  for (const [name, body] of entries(raw)) {
    const path = ['models', name];
    if (!MODEL_NAME.test(name)) {
      out.error(
        'invalid_name',
        `model name '${name}' must be a TypeScript identifier (letters, digits, '_', '$')`,
        path,
        true,
      );
    } else if (RESERVED_MODEL_NAMES.has(name)) {
      out.error('invalid_name', `model name '${name}' is a type name already; choose another`, path, true);
    }
    if (!isRecord(body)) continue;
    const model: OwnModel = { name, path, parents: [], fields: [], stringIndex: null };
    const parents = body['__extends'];
    const parentList = asList(parents);
    parentList?.forEach((parent, index) => {
      const at = Array.isArray(parents) ? [...path, '__extends', index] : [...path, '__extends'];
      if (parent === name) out.error('circular_extends', `model '${name}' extends itself`, at);
      else if (checkModelRef(parent, '__extends', at, modelNames, out)) model.parents.push(parent);
    });
    const object = parseObjectFields(yaml, body, path, modelNames, out, true);
    model.fields = object.fields;
    model.stringIndex = object.stringIndex;
    own.set(name, model);
  }
  return resolveInheritance(own, out);
}

function parseObjectFields(
  yaml: LoadedYaml,
  body: Raw,
  path: YamlPath,
  modelNames: ReadonlySet<string>,
  out: Collector,
  isModel: boolean,
): { fields: FieldConfig[]; stringIndex: TypeExpr | null } {
  const fields: FieldConfig[] = [];
  let stringIndex: TypeExpr | null = null;
  const seen = new Set<string>();
  for (const [key, value] of Object.entries(body)) {
    const at = [...path, key];
    if (key === '__extends' && isModel) continue;
    if (key === '__string') {
      stringIndex = parseFieldType(yaml, value, at, modelNames, out);
      continue;
    }
    if (key.startsWith('__')) {
      const allowed = isModel ? MODEL_KEYS : ['__string'];
      out.error(
        'unknown_key',
        `unknown key '${key}'${didYouMean(key, allowed)}${closest(key, allowed) === undefined ? ` (keys starting with '__' are reserved: ${allowed.join(', ')})` : ''}`,
        at,
        true,
      );
      continue;
    }
    const optional = key.endsWith('?');
    const name = optional ? key.slice(0, -1) : key;
    if (name === '' || name.endsWith('?')) {
      out.error(
        'invalid_name',
        `field name '${key}' is not valid: write 'name' or 'name?' for an optional field`,
        at,
        true,
      );
      continue;
    }
    if (seen.has(name)) {
      out.error('duplicate_key', `field '${name}' is declared twice (once as '${name}?')`, at, true);
      continue;
    }
    seen.add(name);
    const type = parseFieldType(yaml, value, at, modelNames, out);
    if (type !== null) fields.push({ name, optional, type });
  }
  return { fields, stringIndex };
}

function parseFieldType(
  yaml: LoadedYaml,
  value: unknown,
  path: YamlPath,
  modelNames: ReadonlySet<string>,
  out: Collector,
): TypeExpr | null {
  if (typeof value === 'string') {
    const parsed = parseTypeExpr(value, modelNames);
    if (!parsed.ok) {
      out.error('invalid_type_expression', `type ${JSON.stringify(value)}: ${parsed.error}`, path);
      return null;
    }
    for (const warning of parsed.warnings) out.warn('literal_looks_like_type', warning, path);
    return parsed.type;
  }
  if (typeof value === 'number' || typeof value === 'boolean') return { kind: 'literal', value };
  if (value === null) {
    if (yaml.isEmptyScalar(path)) {
      out.error(
        'missing_type',
        `field '${String(path[path.length - 1])}' has no type; write one, or 'null' for the null type`,
        path,
      );
      return null;
    }
    return { kind: 'primitive', name: 'null' };
  }
  if (Array.isArray(value)) {
    // A YAML list is an array whose elements are the union of the listed types: [string] is string[].
    if (value.length === 0) {
      out.error(
        'invalid_type_expression',
        'an empty list is not a type: list the element type(s), as in [string]',
        path,
      );
      return null;
    }
    const members: TypeExpr[] = [];
    value.forEach((item, index) => {
      const member = parseFieldType(yaml, item, [...path, index], modelNames, out);
      if (member !== null) members.push(member);
    });
    if (members.length !== value.length) return null;
    const element = members.length === 1 && members[0] !== undefined ? members[0] : { kind: 'union' as const, members };
    return { kind: 'array', element };
  }
  if (isRecord(value)) {
    const object = parseObjectFields(yaml, value, path, modelNames, out, false);
    return { kind: 'object', fields: object.fields, stringIndex: object.stringIndex };
  }
  return null;
}

/** Flattens `__extends` (parents in order, then own fields, own winning) and reports cycles and conflicts. */
function resolveInheritance(own: ReadonlyMap<string, OwnModel>, out: Collector): ModelConfig[] {
  const resolved = new Map<string, ModelConfig | null>();
  const reportedCycles = new Set<string>();

  const resolve = (name: string, stack: string[]): ModelConfig | null => {
    const done = resolved.get(name);
    if (done !== undefined) return done;
    const model = own.get(name);
    if (model === undefined) return null;
    if (stack.includes(name)) {
      const cycle = [...stack.slice(stack.indexOf(name)), name];
      const key = [...cycle].slice(0, -1).sort().join(',');
      if (!reportedCycles.has(key)) {
        reportedCycles.add(key);
        out.error('circular_extends', `__extends forms a cycle: ${cycle.join(' → ')}`, [...model.path, '__extends']);
      }
      return null;
    }
    const fields = new Map<string, { field: FieldConfig; from: string }>();
    let stringIndex: TypeExpr | null = null;
    let broken = false;
    for (const parentName of model.parents) {
      const parent = resolve(parentName, [...stack, name]);
      if (parent === null) {
        broken = true;
        continue;
      }
      for (const field of parent.fields) {
        const existing = fields.get(field.name);
        const ownField = model.fields.some((f) => f.name === field.name);
        if (existing !== undefined && !ownField && JSON.stringify(existing.field) !== JSON.stringify(field)) {
          out.error(
            'conflicting_inherited_field',
            `field '${field.name}' is inherited from '${existing.from}' and '${parentName}' with different types; declare it in '${name}' to choose`,
            [...model.path, '__extends'],
          );
        }
        fields.set(field.name, { field, from: parentName });
      }
      stringIndex ??= parent.stringIndex;
    }
    for (const field of model.fields) fields.set(field.name, { field, from: name });
    // Own fields come last in declaration order; inherited ones keep their parents' order.
    const ordered = [...[...fields.values()].filter((f) => f.from !== name).map((f) => f.field), ...model.fields];
    const result: ModelConfig | null = broken
      ? null
      : { name, extends: model.parents, fields: ordered, stringIndex: model.stringIndex ?? stringIndex };
    resolved.set(name, result);
    return result;
  };

  const models: ModelConfig[] = [];
  for (const name of own.keys()) {
    const model = resolve(name, []);
    if (model !== null) models.push(model);
  }
  return models;
}

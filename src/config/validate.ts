/**
 * The service.yaml compiler: load (YAML with positions) → schema (zod: keys, value types, required
 * fields) → cross-reference checks (models, `id`, `__extends`, output/endpoint lengths, `runs`, type
 * expressions, generated endpoints that collide or that a built-in route shadows) → the normalized
 * {@link ServiceConfig}. Every stage runs on whatever the previous one
 * could read, so one run reports every problem of the file; the config is returned only without errors.
 */
import type { z } from 'zod';
import { ENDPOINT_FORM, endpointHint, parseEndpoint, type DefaultMethod } from './endpoint.js';
import { checkGeneratedEndpoints } from './generatedEndpoints.js';
import { loadYaml, type LoadedYaml } from './load.js';
import {
  closest,
  didYouMean,
  withHintBudget,
  type ConfigProblem,
  type ProblemCode,
  type YamlPath,
} from './problems.js';
import { MAX_RUNS_TEXT, MIN_RUNS_TEXT, parseRuns, RUNS_FORMS } from './runs.js';
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
  return withHintBudget(HINT_CELLS, () => compile(text));
}

/** Edit-distance cells a compile spends on "did you mean" hints: tens of milliseconds at most. */
const HINT_CELLS = 5_000_000;

function compile(text: string): ConfigResult {
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

type Place = 'top' | 'integration' | 'sync' | 'action' | 'endpoint' | 'other';

function placeOf(path: YamlPath): Place {
  if (path.length === 0) return 'top';
  if (path.length === 2 && path[0] === 'integrations') return 'integration';
  if (path.length === 4 && path[2] === 'syncs') return 'sync';
  if (path.length === 4 && path[2] === 'actions') return 'action';
  if (path.length >= 5 && path[4] === 'endpoint') return 'endpoint';
  return 'other';
}

/** Keys the service reads in the mapping at `path`, less the deprecated spellings (for "did you mean"). */
const DEPRECATED_KEYS = new Set(['auto_starts', 'webhook-subscriptions', 'version']);
function allowedKeys(path: YamlPath): string[] {
  const keys = (shape: object): string[] => Object.keys(shape).filter((k) => !DEPRECATED_KEYS.has(k));
  switch (placeOf(path)) {
    case 'top':
      return keys(serviceYamlSchema.shape);
    case 'integration':
      return keys(integrationSchema.unwrap().shape);
    case 'sync':
      return keys(syncSchema.shape);
    case 'action':
      return keys(actionSchema.shape);
    case 'endpoint':
      return ['method', 'path', 'group'];
    default:
      return [];
  }
}

function describePlace(path: YamlPath): string {
  switch (placeOf(path)) {
    case 'top':
      return 'at the top level';
    case 'integration':
      return `in integration '${String(path[1])}'`;
    case 'sync':
      return `in sync '${String(path[3])}'`;
    case 'action':
      return `in action '${String(path[3])}'`;
    case 'endpoint':
      return `in the endpoint of '${String(path[3])}'`;
    default:
      return '';
  }
}

const SYNC_ONLY = 'it applies to syncs only';
const EVENT_SCRIPTS =
  'scripts run on connection events are not supported: they are neither built nor run (docs/configuration.md, "Differences from the de-facto format")';
/** Keys the de-facto format reads at a place where this service reads nothing, and why they are ignored. */
const IGNORED_KEYS: Partial<Record<Place, Record<string, string>>> = {
  action: {
    track_deletes: SYNC_ONLY,
    sync_type: SYNC_ONLY,
    runs: SYNC_ONLY,
    auto_start: SYNC_ONLY,
    webhook_subscriptions: SYNC_ONLY,
    'webhook-subscriptions': SYNC_ONLY,
  },
  integration: { 'post-connection-scripts': EVENT_SCRIPTS, 'on-events': EVENT_SCRIPTS },
};

/**
 * A key the service does not read: an error when it is one typo from a key it reads (a misspelt
 * `auto_start` must not silently fall back to the default), a warning otherwise (the format's
 * `version`, keys of other versions of the format): the file stays valid, the key does nothing.
 */
function unknownKeyProblem(key: string, path: YamlPath, value: unknown, out: Collector): void {
  const at = [...path, key];
  const place = describePlace(path);
  if (placeOf(path) === 'integration' && isRecord(value) && ('returns' in value || 'type' in value)) {
    // The de-facto format's first layout (2023): scripts straight under the integration, no endpoints.
    out.error(
      'unknown_key',
      `'${key}' ${place} looks like a script of the de-facto format's first layout (scripts under the integration, 'returns:'); declare it under 'syncs:' or 'actions:' with 'output:' and an 'endpoint'`,
      at,
      true,
    );
    return;
  }
  const reason = IGNORED_KEYS[placeOf(path)]?.[key];
  if (reason !== undefined) {
    out.warn('ignored_key', `'${key}' ${place} is ignored: ${reason}`.replace('  ', ' '), at, true);
    return;
  }
  const allowed = allowedKeys(path);
  const suggestion = closest(key, allowed);
  if (suggestion !== undefined) {
    out.error(
      'unknown_key',
      `unknown key '${key}' ${place}; did you mean '${suggestion}'?`.replace('  ', ' '),
      at,
      true,
    );
    return;
  }
  const known = allowed.length === 0 ? '' : ` (the keys read here: ${allowed.join(', ')})`;
  out.warn('ignored_key', `unknown key '${key}' ${place} is ignored${known}`.replace('  ', ' '), at, true);
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
    out.error('missing_field', missingFieldMessage(path), path);
    return;
  }
  switch (issue.code) {
    case 'unrecognized_keys': {
      for (const key of issue.keys) unknownKeyProblem(key, path, valueAt(root, [...fullPath, key]), out);
      return;
    }
    case 'invalid_union': {
      // When the value has the outer shape of exactly one branch (a list, a mapping) but something
      // inside is wrong, that branch's problems are the useful ones: report them.
      const matching = issue.errors.filter(
        (branch) =>
          branch.length > 0 && !branch.some((inner) => inner.path.length === 0 && inner.code === 'invalid_type'),
      );
      if (matching.length === 1 && matching[0] !== undefined) {
        for (const inner of matching[0]) issueProblems(root, inner, fullPath, out);
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
      else if (placeOf(path.slice(0, -1)) === 'endpoint' && field === 'path' && typeof input === 'string')
        out.error(
          'invalid_endpoint',
          `invalid endpoint path ${JSON.stringify(input)}${endpointHint(input)}; expected a path such as "/issues"`,
          path,
        );
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

/** What to write when a required field is missing: SPEC.md requires fields the de-facto format did not. */
function missingFieldMessage(path: YamlPath): string {
  const field = String(path[path.length - 1]);
  const what = placeOf(path.slice(0, -1)) === 'action' ? 'action' : 'sync';
  const add: Record<string, string> = {
    sync_type:
      "add 'sync_type: full' (each run replaces all records: what the de-facto format assumed when it was left out) or 'sync_type: incremental' (each run upserts)",
    description: `add 'description: <what the ${what} does>' (SPEC.md requires it; the de-facto format did not)`,
    output:
      what === 'action'
        ? "add 'output: <model or type>', what the action returns"
        : "add 'output: <model>', the model of the records",
    endpoint: `add 'endpoint: ${what === 'action' ? 'POST' : 'GET'} /<path>', the generated endpoint`,
    integrations: "add 'integrations:' with at least one integration",
  };
  const hint = add[field];
  return `missing required field '${field}'${hint === undefined ? '' : `: ${hint}`}`;
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
    const mcpTools = checkMcpTools(body, [...base, 'mcp_tools'], out);
    if (mcpTools !== null) item.mcpTools = mcpTools;
    integrations.push(item);
  }
  return { integrations, models };
}

/**
 * `mcp_tools`: every name must be an action the integration declares (a typo would silently hide a
 * tool); null when the key is absent or not a string or list (the schema stage reported that).
 */
function checkMcpTools(integration: Raw, path: YamlPath, out: Collector): string[] | null {
  const raw = integration['mcp_tools'];
  const names = asList(raw);
  if (names === null) return null;
  const actions = new Set(entries(integration['actions']).map(([name]) => name));
  const seen = new Set<string>();
  names.forEach((name, index) => {
    const at = Array.isArray(raw) ? [...path, index] : path;
    if (seen.has(name)) out.warn('duplicate_key', `action '${name}' is listed twice in mcp_tools`, at);
    seen.add(name);
    if (actions.has(name)) return;
    const hint = didYouMean(name, actions);
    out.error(
      'unknown_action',
      `mcp_tools names '${name}', which is not an action of this integration${hint === '' ? (actions.size > 0 ? `; its actions: ${[...actions].join(', ')}` : '; it declares no actions') : hint}`,
      at,
    );
  });
  return [...seen];
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

function unknownModelMessage(what: string, name: string, modelNames: ReadonlySet<string>): string {
  const hint = didYouMean(name, modelNames);
  return `${what} '${name}' is not a model declared under \`models\`${hint === '' && modelNames.size > 0 ? `; declared: ${[...modelNames].join(', ')}` : hint}`;
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
  const parsed = parseTypeExpr(name, modelNames);
  if (parsed.ok && parsed.type.kind === 'array' && parsed.type.element.kind === 'model' && what === 'output') {
    // A sync stores records one by one: its output is the model of one record.
    out.error(
      'unknown_model',
      `a sync's output is the model of one record, so '${name}' is not one: write '${parsed.type.element.name}' (each record is one ${parsed.type.element.name})`,
      path,
    );
    return false;
  }
  out.error('unknown_model', unknownModelMessage(what, name, modelNames), path);
  return false;
}

/** An input or output: a model name, or (as the de-facto format allows) a type expression over models. */
interface TypeRef {
  /** As written, trimmed. */
  text: string;
  /** Absent when `text` is a model name. */
  type?: TypeExpr;
}

/**
 * Reads an `input` or an action's `output`. A bare word that is neither a type nor a model is an
 * `unknown_model` here, not a literal as in a model field: an input or output names data, and a
 * literal string is written quoted (`'ok' | 'failed'`).
 */
function checkTypeRef(
  value: unknown,
  what: string,
  path: YamlPath,
  modelNames: ReadonlySet<string>,
  out: Collector,
): TypeRef | null {
  if (typeof value !== 'string') return null;
  const text = value.trim();
  if (modelNames.has(text)) return { text };
  const parsed = parseTypeExpr(text, modelNames);
  if (!parsed.ok) {
    out.error('invalid_type_expression', `${what} ${JSON.stringify(value)}: ${parsed.error}`, path);
    return null;
  }
  const unknown = parsed.bareLiterals.filter((word) => /^[A-Za-z_$][\w$]*$/.test(word));
  for (const word of unknown) out.error('unknown_model', unknownModelMessage(what, word, modelNames), path);
  return unknown.length > 0 ? null : { text, type: parsed.type };
}

/** The list form of a value that may be one item or a list of them. */
function itemsOf(value: unknown): unknown[] | null {
  if (value === undefined || value === null) return null;
  return Array.isArray(value) ? (value as unknown[]) : [value];
}

/** `scopes`: a list, or one string of comma-separated scopes as the de-facto format writes them. */
function scopesOf(value: unknown): string[] {
  if (typeof value === 'string')
    return value
      .split(',')
      .map((scope) => scope.trim())
      .filter((scope) => scope !== '');
  return isStringList(value) ? value : [];
}

/** `version`, read by the de-facto format to version scripts; a warning here. */
function warnVersion(raw: Raw, path: YamlPath, out: Collector): void {
  if (!('version' in raw)) return;
  out.warn(
    'ignored_key',
    "'version' is ignored: every deploy is a version of its own here (service deploy --redeploy <n> goes back to one)",
    [...path, 'version'],
    true,
  );
}

function endpointsOf(value: unknown, defaultMethod: DefaultMethod): EndpointConfig[] {
  return (itemsOf(value) ?? []).flatMap((item) => {
    const endpoint = parseEndpoint(item, defaultMethod);
    return endpoint === null ? [] : [endpoint];
  });
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

  // auto_starts: a spelling found in a sample configuration (SPEC.md rule 3); webhook-subscriptions:
  // the de-facto format's spelling. Both accepted, with a warning.
  for (const [alias, key] of [
    ['auto_starts', 'auto_start'],
    ['webhook-subscriptions', 'webhook_subscriptions'],
  ] as const) {
    if (!(alias in raw)) continue;
    if (key in raw) {
      out.error(
        'conflicting_keys',
        `both '${key}' and its alias '${alias}' are set; keep only '${key}'`,
        [...path, alias],
        true,
      );
    } else {
      out.warn('deprecated_key', `'${alias}' is read as '${key}'; write '${key}'`, [...path, alias], true);
    }
  }
  warnVersion(raw, path, out);

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

  const endpointItems = itemsOf(raw['endpoint']);
  const endpoints = endpointsOf(raw['endpoint'], 'GET');
  if (outputList !== null && endpointItems !== null) {
    if (Array.isArray(raw['output']) && !Array.isArray(raw['endpoint'])) {
      out.error(
        'output_endpoint_mismatch',
        `output is a list of ${outputList.length}, so endpoint must be a list of ${outputList.length} too (the n-th endpoint returns the n-th model)`,
        [...path, 'endpoint'],
      );
    } else if (outputList.length !== endpointItems.length) {
      out.error(
        'output_endpoint_mismatch',
        `${outputList.length} output model(s) but ${endpointItems.length} endpoint(s): the n-th endpoint returns the n-th model, so the lists must have the same length`,
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
    } else if (parsedRuns.reason === 'above_maximum') {
      out.error('invalid_runs', `runs ${JSON.stringify(runs)} is longer than the maximum of every ${MAX_RUNS_TEXT}`, [
        ...path,
        'runs',
      ]);
    } else {
      out.error('invalid_runs', `runs ${JSON.stringify(runs)} is not a frequency; accepted forms: ${RUNS_FORMS}`, [
        ...path,
        'runs',
      ]);
    }
  }

  const input =
    raw['input'] === undefined ? undefined : checkTypeRef(raw['input'], 'input', [...path, 'input'], modelNames, out);

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
    input === null ||
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
    input: input?.text ?? null,
    ...(input?.type === undefined ? {} : { inputType: input.type }),
    scopes: scopesOf(raw['scopes']),
    webhookSubscriptions: asList(raw['webhook_subscriptions'] ?? raw['webhook-subscriptions']) ?? [],
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
  } else if (!id.optional && isIdType(id.type)) {
    return;
  } else if (canBeId(id.type)) {
    // The de-facto format only asks for the field; a record whose id is absent or null is refused by
    // batchSave at run time (invalid_record), so the file is valid and the author warned.
    out.warn(
      'nullable_id',
      `field 'id' of model '${model.name}' may be ${id.optional ? 'absent' : 'null'}: svc.batchSave refuses a record without a string or number id (invalid_record); make it required and a string or a number`,
      path,
    );
  } else {
    out.error(
      'invalid_id',
      `field 'id' of model '${model.name}' must be a string or a number (records are deduplicated by it)`,
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

/** A type some of whose values are ids: a string or number member, besides null, undefined or any. */
function canBeId(type: TypeExpr): boolean {
  if (type.kind === 'union') return type.members.some(canBeId);
  return isIdType(type) || (type.kind === 'primitive' && (type.name === 'any' || type.name === 'unknown'));
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
  warnVersion(raw, path, out);
  const output = checkTypeRef(raw['output'], 'output', [...path, 'output'], modelNames, out);
  const input =
    raw['input'] === undefined ? undefined : checkTypeRef(raw['input'], 'input', [...path, 'input'], modelNames, out);
  const endpoint = parseEndpoint(raw['endpoint'], 'POST');
  if (typeof raw['description'] !== 'string' || output === null || input === null || endpoint === null) return null;
  return {
    name,
    integration,
    description: raw['description'],
    output: output.text,
    ...(output.type === undefined ? {} : { outputType: output.type }),
    endpoint,
    input: input?.text ?? null,
    ...(input?.type === undefined ? {} : { inputType: input.type }),
    scopes: scopesOf(raw['scopes']),
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

/** An inline object with `__extends`: its parents' fields are merged in once every model is resolved. */
interface NestedExtends {
  object: Extract<TypeExpr, { kind: 'object' }>;
  parents: string[];
  path: YamlPath;
}

interface ModelContext {
  yaml: LoadedYaml;
  modelNames: ReadonlySet<string>;
  out: Collector;
  nested: NestedExtends[];
}

/**
 * `__extends` as a list, or as a string of one or more comma-separated parents (`A,B` or `A, B`: the
 * de-facto format splits it at commas).
 */
function parentsOf(value: unknown, path: YamlPath, self: string | null, context: ModelContext): string[] {
  const items: [string, YamlPath][] = Array.isArray(value)
    ? value.flatMap((item, index): [string, YamlPath][] =>
        typeof item === 'string' ? [[item.trim(), [...path, index]]] : [],
      )
    : typeof value === 'string'
      ? value
          .split(',')
          .map((part): [string, YamlPath] => [part.trim(), path])
          .filter(([part]) => part !== '')
      : [];
  const parents: string[] = [];
  for (const [parent, at] of items) {
    if (parent === self) context.out.error('circular_extends', `model '${self}' extends itself`, at);
    else if (checkModelRef(parent, '__extends', at, context.modelNames, context.out)) parents.push(parent);
  }
  return parents;
}

function checkModels(yaml: LoadedYaml, raw: unknown, modelNames: ReadonlySet<string>, out: Collector): ModelConfig[] {
  const context: ModelContext = { yaml, modelNames, out, nested: [] };
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
    model.parents = parentsOf(body['__extends'], [...path, '__extends'], name, context);
    const object = parseObjectFields(body, path, context);
    model.fields = object.fields;
    model.stringIndex = object.stringIndex;
    own.set(name, model);
  }
  const models = resolveInheritance(own, out);
  resolveNestedExtends(context.nested, models, out);
  return models;
}

function parseObjectFields(
  body: Raw,
  path: YamlPath,
  context: ModelContext,
): { fields: FieldConfig[]; stringIndex: TypeExpr | null } {
  const { out } = context;
  const fields: FieldConfig[] = [];
  let stringIndex: TypeExpr | null = null;
  const seen = new Map<string, string>();
  for (const [key, value] of Object.entries(body)) {
    const at = [...path, key];
    if (key === '__extends') continue;
    if (key === '__string') {
      stringIndex = parseFieldType(value, at, context);
      continue;
    }
    // Other keys starting with '__' are fields, as in the de-facto format (`__raw: any`), unless one
    // typo away from a reserved key.
    const near = key.startsWith('__') ? closest(key, MODEL_KEYS) : undefined;
    if (near !== undefined) {
      out.error('unknown_key', `unknown key '${key}'; did you mean '${near}'?`, at, true);
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
    const type = parseFieldType(value, at, context);
    const earlier = seen.get(name);
    seen.set(name, key);
    if (earlier !== undefined) {
      // The de-facto format keeps the later declaration; so does this compiler, and says so.
      out.warn(
        'redeclared_field',
        `field '${name}' is declared twice ('${earlier}' and '${key}'): the later one, '${key}', is kept`,
        at,
        true,
      );
      const index = fields.findIndex((field) => field.name === name);
      if (index >= 0) fields.splice(index, 1);
    }
    if (type !== null) fields.push({ name, optional, type });
  }
  return { fields, stringIndex };
}

function parseFieldType(value: unknown, path: YamlPath, context: ModelContext): TypeExpr | null {
  const { yaml, modelNames, out } = context;
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
    // An empty list says only "a list" (the de-facto format writes `field: []`): a list of anything.
    if (value.length === 0) return { kind: 'array', element: { kind: 'primitive', name: 'any' } };
    const members: TypeExpr[] = [];
    value.forEach((item, index) => {
      const member = parseFieldType(item, [...path, index], context);
      if (member !== null) members.push(member);
    });
    if (members.length !== value.length) return null;
    const element = members.length === 1 && members[0] !== undefined ? members[0] : { kind: 'union' as const, members };
    return { kind: 'array', element };
  }
  if (isRecord(value)) {
    const parents = parentsOf(value['__extends'], [...path, '__extends'], null, context);
    const fields = parseObjectFields(value, path, context);
    const object = { kind: 'object' as const, fields: fields.fields, stringIndex: fields.stringIndex };
    if (parents.length > 0) context.nested.push({ object, parents, path });
    return object;
  }
  return null;
}

/** True when `type` is or contains the very object `target` (walked by identity, each object once). */
function holds(type: TypeExpr, target: TypeExpr, seen = new Set<TypeExpr>()): boolean {
  if (type === target) return true;
  if (seen.has(type)) return false;
  seen.add(type);
  switch (type.kind) {
    case 'array':
      return holds(type.element, target, seen);
    case 'union':
      return type.members.some((member) => holds(member, target, seen));
    case 'object':
      return (
        type.fields.some((field) => holds(field.type, target, seen)) ||
        (type.stringIndex !== null && holds(type.stringIndex, target, seen))
      );
    default:
      return false;
  }
}

/** Merges the parents' fields into inline objects with `__extends`: the parents' first, own fields winning. */
function resolveNestedExtends(nested: readonly NestedExtends[], models: readonly ModelConfig[], out: Collector): void {
  const byName = new Map(models.map((model) => [model.name, model]));
  for (const { object, parents, path } of nested) {
    const inherited = new Map<string, FieldConfig>();
    let stringIndex: TypeExpr | null = null;
    for (const name of parents) {
      const parent = byName.get(name);
      if (parent === undefined) continue;
      // An inline object that extends a model holding it (`A: { x: { __extends: A } }`, or as the
      // type of its other keys, `A: { __string: { __extends: A } }`) would contain itself: a type
      // without end, which models.ts and the manifest cannot write.
      const parentType: TypeExpr = { kind: 'object', fields: parent.fields, stringIndex: parent.stringIndex };
      if (holds(parentType, object)) {
        out.error(
          'circular_extends',
          `this object extends '${name}', which holds it: its type would contain itself; name the shape as a model and refer to it instead`,
          [...path, '__extends'],
        );
        continue;
      }
      for (const field of parent.fields) {
        const existing = inherited.get(field.name);
        const declared = object.fields.some((own) => own.name === field.name);
        if (existing !== undefined && !declared && JSON.stringify(existing) !== JSON.stringify(field)) {
          out.error(
            'conflicting_inherited_field',
            `field '${field.name}' is inherited from two parents with different types; declare it here to choose`,
            [...path, '__extends'],
          );
        }
        if (existing === undefined) inherited.set(field.name, field);
      }
      stringIndex ??= parent.stringIndex;
    }
    const own = new Set(object.fields.map((field) => field.name));
    object.fields = [...[...inherited.values()].filter((field) => !own.has(field.name)), ...object.fields];
    object.stringIndex ??= stringIndex;
  }
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

/**
 * The normalized, typed configuration that the compiler produces from service.yaml: defaults filled
 * in, aliases resolved, every list a list, every reference checked, `__extends` flattened. Everything
 * downstream (models.ts generation, compile, deploy, the runtime) reads this, never the YAML.
 * Absent optional values are `null` (not missing) so the JSON form in the build manifest is stable.
 */

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface EndpointConfig {
  method: HttpMethod;
  /** Starts with `/`. */
  path: string;
  /**
   * The mapping form's `group`: a heading the endpoint is listed under in generated documentation
   * (the OpenAPI tag). Present only when written, so configs deployed before it compare unchanged.
   */
  group?: string;
}

export interface SyncOutput {
  /** A model name from `models`. */
  model: string;
  /** The generated endpoint that returns this model's records. */
  endpoint: EndpointConfig;
}

export interface SyncConfig {
  name: string;
  integration: string;
  description: string;
  syncType: 'incremental' | 'full';
  /** `runs` as written (after the default), for display. */
  runs: string;
  /** The frequency in milliseconds; at least {@link MIN_RUNS_MS}. */
  runsMs: number;
  autoStart: boolean;
  /** Only meaningful for full syncs; kept as written for incremental ones. */
  trackDeletes: boolean;
  /** The n-th output model with the n-th endpoint. */
  outputs: SyncOutput[];
  /** The input as written (delivered through the connection metadata): a model name, a type expression, or null. */
  input: string | null;
  /** The input's type when it is not just a model name (`Settings | null`); absent otherwise. */
  inputType?: TypeExpr;
  scopes: string[];
  webhookSubscriptions: string[];
  /**
   * `record_validation`: what a run does with a saved record that breaks its model (checkRecord.ts).
   * Absent in configs deployed before the setting existed: read it as `off`.
   */
  recordValidation?: RecordValidationMode;
}

/** `off` (default): records are stored as they are; `warn`: logged, stored; `refuse`: the run fails. */
export type RecordValidationMode = 'off' | 'warn' | 'refuse';

export interface ActionConfig {
  name: string;
  integration: string;
  description: string;
  /** The output as written: a model name or a type expression (`Task[]`, `boolean`, `Company | null`). */
  output: string;
  /** The output's type when it is not just a model name; absent otherwise (see {@link actionOutputType}). */
  outputType?: TypeExpr;
  endpoint: EndpointConfig;
  /** The input as written: a model name, a type expression, or null. */
  input: string | null;
  /** The input's type when it is not just a model name; absent otherwise. */
  inputType?: TypeExpr;
  scopes: string[];
}

/** The type of an action's output (a model reference when it is one). */
export function actionOutputType(action: Pick<ActionConfig, 'output' | 'outputType'>): TypeExpr {
  return action.outputType ?? { kind: 'model', name: action.output };
}

/** The type of an action's or a sync's input, or null when it takes none. */
export function inputTypeOf(script: { input: string | null; inputType?: TypeExpr }): TypeExpr | null {
  if (script.input === null) return null;
  return script.inputType ?? { kind: 'model', name: script.input };
}

export interface IntegrationConfig {
  id: string;
  syncs: SyncConfig[];
  actions: ActionConfig[];
  /**
   * `mcp_tools`: the actions AI agents may call through POST /mcp, in the order written. Present only
   * when written (so configs deployed before it compare unchanged); absent means every action.
   */
  mcpTools?: string[];
}

/** `object` becomes `Record<string, any>` (as the format types it); the others are TypeScript's names. */
export type PrimitiveType =
  'string' | 'number' | 'boolean' | 'Date' | 'null' | 'undefined' | 'unknown' | 'any' | 'object';

/** A parsed type expression of a model field. */
export type TypeExpr =
  | { kind: 'primitive'; name: PrimitiveType }
  | { kind: 'literal'; value: string | number | boolean }
  | { kind: 'model'; name: string }
  | { kind: 'array'; element: TypeExpr }
  | { kind: 'union'; members: TypeExpr[] }
  | { kind: 'object'; fields: FieldConfig[]; stringIndex: TypeExpr | null };

export interface FieldConfig {
  name: string;
  optional: boolean;
  type: TypeExpr;
}

export interface ModelConfig {
  name: string;
  /** Direct parents from `__extends`, in the order written. */
  extends: string[];
  /** Inherited fields first (parents in order), then the model's own; an own field overrides an inherited one. */
  fields: FieldConfig[];
  /** The `__string` type: any other string key is allowed with this type. */
  stringIndex: TypeExpr | null;
}

export interface ServiceConfig {
  integrations: IntegrationConfig[];
  models: ModelConfig[];
}

/** The shortest `runs` the service accepts: 30 seconds (docs/configuration.md says why). */
export const MIN_RUNS_MS = 30_000;
/**
 * The longest `runs`: 10 years (of 365.25 days, as the ms notation counts them). Longer ones overflowed
 * later: the next run's date past what a Date holds (300,000 years: every GET /sync/status of the sync
 * answered 500) or the bigint of the stored frequency (10 billion years: the PUT itself answered 500).
 */
export const MAX_RUNS_MS = 315_576_000_000;
/** `runs` when the sync does not say. */
export const DEFAULT_RUNS = '24h';

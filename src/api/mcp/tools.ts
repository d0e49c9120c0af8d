/**
 * The actions of an integration as Model Context Protocol tools (docs/api.md "Actions as tools for AI
 * agents"). Pure: built from a deployed configuration, no I/O.
 *
 * - One tool per action that `mcp_tools` exposes (every action when the key is absent), named as the
 *   action, with its description.
 * - `inputSchema` and `outputSchema` are the JSON Schemas the OpenAPI document gives the generated
 *   endpoints (src/api/generated.ts), made self-contained: the models they refer to move from
 *   `#/components/schemas/` to the schema's own `$defs`.
 * - MCP wants an object schema at the top of both. An input or output that is a model (or an inline
 *   object) is that object; any other type (a list, a union, a primitive) is wrapped: the tool takes
 *   `{ input: … }` and answers `{ result: … }`. An action without an input takes no arguments; one
 *   that returns nothing (`output: void`) has no outputSchema. An output a script returns that breaks
 *   its outputSchema is answered as a result with `isError` that carries it (toolServer.ts), never as
 *   structured content a client would refuse.
 * - Arguments are checked against the input type with the service's own model checker
 *   (src/config/checkRecord.ts, the rules of `record_validation`), so every problem is named with its
 *   path before a run starts. It is stricter than the schema in one way: a field the model does not
 *   declare is refused (unless the model has `__string`), as it is most often a misspelled one.
 * - The output is checked against `outputSchema` with the JSON Schema validator the SDK's own client
 *   uses, since a client refuses a structured result that does not match the schema it was given.
 */
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { checkValue, modelIndex, type ModelIndex, type RecordProblem } from '../../config/checkRecord.js';
import {
  actionOutputType,
  inputTypeOf,
  type ActionConfig,
  type IntegrationConfig,
  type ServiceConfig,
  type TypeExpr,
} from '../../config/types.js';
import { modelSchemas, typeSchema } from '../generated.js';

type JsonSchema = Record<string, unknown>;
/** A JSON Schema with `type: 'object'` at the top, as MCP requires of `inputSchema` and `outputSchema`. */
export type ObjectSchema = JsonSchema & { type: 'object' };

/** Where the OpenAPI document keeps the models, and where a tool's own schema keeps them. */
const COMPONENTS = '#/components/schemas/';
const DEFS = '#/$defs/';

export interface ActionTool {
  name: string;
  description: string;
  inputSchema: ObjectSchema;
  /** Absent when the action returns nothing (`undefined`). */
  outputSchema?: ObjectSchema;
  /** The action's input type (null: none); `wrapped` when the arguments carry it as `input`. */
  input: { type: TypeExpr | null; wrapped: boolean };
  /** The action's output type; `wrapped` when the structured result carries it as `result`. */
  output: { type: TypeExpr; wrapped: boolean };
}

/** The tools of one integration of a deployment, what checking their arguments needs, and a fingerprint of the list. */
export interface ToolSet {
  tools: ActionTool[];
  /** Changes exactly when the list an agent sees changes (names, descriptions, schemas). */
  fingerprint: string;
  byName: ReadonlyMap<string, ActionTool>;
  models: ModelIndex;
  /** Checks an output against a tool's outputSchema (validators compiled once per tool set). */
  checkOutput(tool: ActionTool, structured: unknown): { valid: true } | { valid: false; message: string };
}

/**
 * `schema` with its references to the OpenAPI components turned into references to its own `$defs`,
 * which hold every model reached (a recursive model refers to itself there).
 */
function selfContained(schema: JsonSchema, models: Record<string, JsonSchema>): JsonSchema {
  const defs: Record<string, JsonSchema> = {};
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => {
        if (key === '$ref' && typeof inner === 'string' && inner.startsWith(COMPONENTS)) {
          const name = inner.slice(COMPONENTS.length);
          include(name);
          return [key, `${DEFS}${name}`];
        }
        return [key, rewrite(inner)];
      }),
    );
  };
  const include = (name: string): void => {
    const model = models[name];
    if (model === undefined || name in defs) return;
    defs[name] = {};
    defs[name] = rewrite(model) as JsonSchema;
  };
  const top = rewrite(schema) as JsonSchema;
  return Object.keys(defs).length > 0 ? { ...top, $defs: defs } : top;
}

/** An action's input and output as types: a model reference, or the type expression service.yaml wrote. */
function actionTypes(action: ActionConfig): { input: TypeExpr | null; output: TypeExpr } {
  return { input: inputTypeOf(action), output: actionOutputType(action) };
}

/** Whether a type is a JSON object at its top, so that it can be a tool's schema as it is. */
function isObjectType(type: TypeExpr): boolean {
  return type.kind === 'model' || type.kind === 'object' || (type.kind === 'primitive' && type.name === 'object');
}

/** The schema of a type at the top of a tool's schema: a model inline, anything else as typeSchema gives it. */
function topSchema(type: TypeExpr, models: Record<string, JsonSchema>): JsonSchema {
  return selfContained(type.kind === 'model' ? (models[type.name] ?? {}) : typeSchema(type), models);
}

/** `{ type: 'object', properties: { [key]: schema } }`, the schema's `$defs` moved to the top. */
function wrap(key: string, schema: JsonSchema, required: boolean): ObjectSchema {
  const { $defs, ...inner } = schema;
  return {
    type: 'object',
    properties: { [key]: inner },
    ...(required ? { required: [key] } : {}),
    additionalProperties: false,
    ...($defs === undefined ? {} : { $defs }),
  };
}

/** A tool of an action's name, description and types (exported for the types service.yaml cannot name yet). */
export function toolOf(
  action: { name: string; description: string; input: TypeExpr | null; output: TypeExpr },
  models: Record<string, JsonSchema>,
  index: ModelIndex,
): ActionTool {
  const { input, output } = action;
  const inputWrapped = input !== null && !isObjectType(input);
  const inputSchema: ObjectSchema =
    input === null
      ? { type: 'object', properties: {}, additionalProperties: false }
      : inputWrapped
        ? // `input` is required unless the type takes `undefined` (`X | undefined`).
          wrap('input', topSchema(input, models), checkValue(undefined, input, index).length > 0)
        : { ...topSchema(input, models), type: 'object' };
  const returnsNothing = output.kind === 'primitive' && output.name === 'undefined';
  const outputWrapped = !isObjectType(output);
  const outputSchema: ObjectSchema | undefined = returnsNothing
    ? undefined
    : outputWrapped
      ? wrap('result', topSchema(output, models), true)
      : { ...topSchema(output, models), type: 'object' };
  return {
    name: action.name,
    description: action.description,
    inputSchema,
    ...(outputSchema === undefined ? {} : { outputSchema }),
    input: { type: input, wrapped: inputWrapped },
    output: { type: output, wrapped: outputWrapped },
  };
}

/** The actions of an integration that `mcp_tools` exposes, in the order service.yaml declares them. */
export function exposedActions(integration: IntegrationConfig): ActionConfig[] {
  if (integration.mcpTools === undefined) return integration.actions;
  const allowed = new Set(integration.mcpTools);
  return integration.actions.filter((action) => allowed.has(action.name));
}

/** The tools of one integration of a deployed configuration; an integration it does not declare has none. */
export function buildToolSet(config: ServiceConfig, integrationId: string): ToolSet {
  const integration = config.integrations.find((candidate) => candidate.id === integrationId);
  const models = modelSchemas(config);
  const index = modelIndex(config.models);
  const tools = integration
    ? exposedActions(integration).map((action) => toolOf({ ...action, ...actionTypes(action) }, models, index))
    : [];
  const validators = new Map<string, (value: unknown) => { valid: boolean; errorMessage?: string | undefined }>();
  // Its own validator: Ajv keeps every schema it compiled, so one per tool set lets a superseded
  // deployment's schemas go with it.
  let ajv: AjvJsonSchemaValidator | undefined;
  return {
    tools,
    fingerprint: JSON.stringify(
      tools.map(({ name, description, inputSchema, outputSchema }) => [
        name,
        description,
        inputSchema,
        outputSchema ?? null,
      ]),
    ),
    byName: new Map(tools.map((tool) => [tool.name, tool])),
    models: index,
    checkOutput(tool, structured) {
      if (tool.outputSchema === undefined) return { valid: true };
      let validate = validators.get(tool.name);
      if (validate === undefined) {
        ajv ??= new AjvJsonSchemaValidator();
        validate = ajv.getValidator(tool.outputSchema);
        validators.set(tool.name, validate);
      }
      const verdict = validate(structured);
      return verdict.valid ? { valid: true } : { valid: false, message: verdict.errorMessage ?? 'does not match' };
    },
  };
}

/** A problem of the arguments, with the path of the argument (`title`, `labels[2].name`, `input`). */
export type ArgumentProblem = RecordProblem;

/**
 * The action's input from a tool call's `arguments`, or every problem of the arguments. `arguments`
 * is the only thing a call gives the action: the connection is the session's, never an argument.
 */
export function inputFromArguments(
  tool: ActionTool,
  args: Record<string, unknown> | undefined,
  models: ModelIndex,
): { ok: true; input: unknown } | { ok: false; problems: ArgumentProblem[] } {
  const given = args ?? {};
  const { type, wrapped } = tool.input;
  if (type === null) {
    const extra = Object.keys(given);
    if (extra.length === 0) return { ok: true, input: undefined };
    return {
      ok: false,
      problems: extra.map((key) => ({ path: key, message: 'is not an argument: this tool takes no arguments' })),
    };
  }
  if (!wrapped) {
    const problems = checkValue(given, type, models);
    return problems.length === 0 ? { ok: true, input: given } : { ok: false, problems };
  }
  const problems: ArgumentProblem[] = Object.keys(given)
    .filter((key) => key !== 'input')
    .map((key) => ({ path: key, message: 'is not an argument: this tool takes one argument, `input`' }));
  for (const problem of checkValue(given['input'], type, models)) {
    const path =
      problem.path === '$' ? 'input' : problem.path.startsWith('[') ? `input${problem.path}` : `input.${problem.path}`;
    problems.push({ path, message: problem.message });
  }
  return problems.length === 0 ? { ok: true, input: given['input'] } : { ok: false, problems };
}

/** The structured result of a tool from the action's output: `{ result }` when wrapped, else the output. */
export function structuredOutput(tool: ActionTool, output: unknown): unknown {
  return tool.output.wrapped ? { result: output ?? null } : output;
}

/**
 * Checks a record against its model as declared in service.yaml (the normalized config of types.ts):
 * the same rules the generated models.ts states to the type checker, applied to the JSON a script
 * saves. Pure and free of Node imports: `service dryrun` calls it, and workflow code may too.
 *
 * Decisions (docs/configuration.md, "Record validation"): a record is JSON, so a `date` is a string
 * that `Date.parse` reads; a field the model does not declare is a problem unless the model has
 * `__string`; `undefined` and optional fields may be absent; `any` and `unknown` accept everything.
 */
import { modelNamesIn, typeToTs } from './generateModels.js';
import type { FieldConfig, ModelConfig, TypeExpr } from './types.js';

/** One bad field: `path` is where it is in the record (`state`, `labels[2].name`, `$` for the record). */
export interface RecordProblem {
  path: string;
  message: string;
}

/** The problems of one record of a batch. */
export interface InvalidRecord {
  /** Position of the record in the list passed to batchSave. */
  index: number;
  /** Its `id`, when it has one. */
  id: string | number | undefined;
  problems: RecordProblem[];
}

/** Models by name, as `checkRecord` looks them up (built once per config). */
export type ModelIndex = ReadonlyMap<string, Pick<ModelConfig, 'name' | 'fields' | 'stringIndex'>>;

export function modelIndex(models: readonly ModelConfig[]): ModelIndex {
  return new Map(models.map((model) => [model.name, model]));
}

/** The models named and every model they refer to, in declaration order (what checking them needs). */
export function modelsReferenced(models: readonly ModelConfig[], names: readonly string[]): ModelConfig[] {
  const byName = new Map(models.map((model) => [model.name, model]));
  const wanted = new Set<string>();
  const visit = (type: TypeExpr | null): void => modelNamesIn(type).forEach(add);
  const add = (name: string): void => {
    const model = byName.get(name);
    if (model === undefined || wanted.has(name)) return;
    wanted.add(name);
    model.fields.forEach((field) => visit(field.type));
    visit(model.stringIndex);
  };
  names.forEach(add);
  return models.filter((model) => wanted.has(model.name));
}

// A record nested deeper than this is reported at the depth limit instead of walked further.
const MAX_DEPTH = 64;
// Problems kept per record: one broken list could otherwise report thousands of identical lines.
const MAX_PROBLEMS = 20;
// Type checks one batch may cost: STEPS_BASE plus STEPS_PER_VALUE for each JSON value in it. A union
// tries its members in turn, so a record nested through unions of several object members (a recursive
// model, `child: Tree | Other | null`) could otherwise cost exponentially many checks in its depth; the
// record that spends the budget is reported as too complex to check, and the records after it are not
// checked. The check runs in workflow code, where a long synchronous walk stalls the workflow thread.
const STEPS_BASE = 10_000;
const STEPS_PER_VALUE = 4;
// Longest key or id shown in a problem line: the rest is the record's own data.
const LONGEST_SHOWN_NAME = 60;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function clipped(text: string): string {
  return text.length > LONGEST_SHOWN_NAME ? `${text.slice(0, LONGEST_SHOWN_NAME - 1)}…` : text;
}

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path === '$' ? '' : path}[${key}]`;
  const part = /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? clipped(key) : clipped(JSON.stringify(key));
  if (path === '$') return /^[A-Za-z_$]/.test(part) ? part : `[${part}]`;
  return /^[A-Za-z_$]/.test(part) ? `${path}.${part}` : `${path}[${part}]`;
}

function shown(value: unknown): string {
  if (value === undefined) return 'nothing (the field is missing)';
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (isPlainObject(value)) return 'an object';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

function fitsPrimitive(name: string, value: unknown): boolean {
  switch (name) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'Date':
      return typeof value === 'string' && !Number.isNaN(Date.parse(value));
    case 'null':
      return value === null;
    case 'undefined':
      return value === undefined;
    case 'object':
      return isPlainObject(value);
    default:
      // any, unknown
      return true;
  }
}

/** What kind of JSON value a type accepts, to pick the union member a value was meant for. */
function accepts(type: TypeExpr, value: unknown, models: ModelIndex): boolean {
  switch (type.kind) {
    case 'primitive':
      return fitsPrimitive(type.name, value);
    case 'literal':
      return typeof value === typeof type.value;
    case 'model':
      return isPlainObject(value) && models.has(type.name);
    case 'object':
      return isPlainObject(value);
    case 'array':
      return Array.isArray(value);
    case 'union':
      return type.members.some((member) => accepts(member, value, models));
  }
}

/** How many JSON values `value` holds (itself included), counted down to the depth the checker walks. */
function valuesIn(value: unknown, depth = 0): number {
  if (depth > MAX_DEPTH || typeof value !== 'object' || value === null) return 1;
  let count = 1;
  for (const item of Array.isArray(value) ? value : Object.values(value)) count += valuesIn(item, depth + 1);
  return count;
}

class TooComplex extends Error {}

/** The checks a batch may still cost, shared by the checkers of its records. */
interface Budget {
  steps: number;
}

const budgetFor = (records: readonly unknown[]): Budget => ({
  steps: STEPS_BASE + STEPS_PER_VALUE * records.reduce<number>((sum, record) => sum + valuesIn(record), 0),
});

class Checker {
  readonly problems: RecordProblem[] = [];
  constructor(
    private readonly models: ModelIndex,
    private readonly budget: Budget,
  ) {}

  private add(path: string, message: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push({ path, message });
  }

  /** True when `value` fits `type`; otherwise the problems are added (only when `report`). */
  check(type: TypeExpr, value: unknown, path: string, depth: number, report = true): boolean {
    if (--this.budget.steps < 0) throw new TooComplex();
    if (depth > MAX_DEPTH) {
      if (report) this.add(path, `nested more than ${MAX_DEPTH} levels deep`);
      return false;
    }
    const fail = (expected: string): false => {
      if (report) this.add(path, `expected ${expected}, got ${shown(value)}`);
      return false;
    };
    switch (type.kind) {
      case 'primitive':
        return (
          fitsPrimitive(type.name, value) || fail(type.name === 'Date' ? 'a date (an ISO 8601 string)' : type.name)
        );
      case 'literal':
        return value === type.value || fail(typeToTs(type));
      case 'array': {
        if (!Array.isArray(value)) return fail(typeToTs(type));
        let ok = true;
        value.forEach((element: unknown, index) => {
          if (!this.check(type.element, element, report ? join(path, index) : path, depth + 1, report)) ok = false;
        });
        return ok;
      }
      case 'model': {
        const model = this.models.get(type.name);
        if (model === undefined) return fail(`model ${type.name} (not declared)`);
        if (!isPlainObject(value)) return fail(`an object of model ${type.name}`);
        return this.fields(model.fields, model.stringIndex, value, path, depth, report);
      }
      case 'object':
        if (!isPlainObject(value)) return fail('an object');
        return this.fields(type.fields, type.stringIndex, value, path, depth, report);
      case 'union': {
        if (type.members.some((member) => this.check(member, value, path, depth, false))) return true;
        // Unreported, the verdict is all that counts: walking the member again would only double the
        // cost at every level of a nested union.
        if (!report) return false;
        // A value meant for one member (the only object member, say) is reported inside it, with the
        // path of the field that broke it; otherwise the whole union is what was expected.
        const meant = type.members.filter((member) => member.kind !== 'literal' && accepts(member, value, this.models));
        const [only] = meant;
        if (only !== undefined && meant.length === 1 && only.kind !== 'primitive') {
          return this.check(only, value, path, depth, report);
        }
        return fail(typeToTs(type));
      }
    }
  }

  private fields(
    fields: readonly FieldConfig[],
    stringIndex: TypeExpr | null,
    value: Record<string, unknown>,
    path: string,
    depth: number,
    report: boolean,
  ): boolean {
    let ok = true;
    const declared = new Set<string>();
    for (const field of fields) {
      declared.add(field.name);
      const present = Object.hasOwn(value, field.name);
      const item = present ? value[field.name] : undefined;
      if (item === undefined && (field.optional || this.check(field.type, undefined, path, depth, false))) continue;
      if (!this.check(field.type, item, report ? join(path, field.name) : path, depth + 1, report)) ok = false;
    }
    for (const [key, item] of Object.entries(value)) {
      if (declared.has(key)) continue;
      if (stringIndex === null) {
        if (report) this.add(join(path, key), 'is not a field of the model');
        ok = false;
      } else if (!this.check(stringIndex, item, report ? join(path, key) : path, depth + 1, report)) {
        ok = false;
      }
    }
    return ok;
  }
}

/**
 * The problems of one record against the model `model` (empty when it fits). An unknown model is a
 * problem at `$`.
 */
export function checkRecord(record: unknown, model: string, models: ModelIndex): RecordProblem[] {
  return checkWithin(record, model, models, budgetFor([record]));
}

/** The problems of one JSON value against a type of the config (an action's input, say); empty when it fits. */
export function checkValue(value: unknown, type: TypeExpr, models: ModelIndex): RecordProblem[] {
  return checkWithin(value, type, models, budgetFor([value]));
}

function checkWithin(record: unknown, model: string | TypeExpr, models: ModelIndex, budget: Budget): RecordProblem[] {
  const checker = new Checker(models, budget);
  const type: TypeExpr = typeof model === 'string' ? { kind: 'model', name: model } : model;
  try {
    checker.check(type, record, '$', 0);
  } catch (error) {
    if (!(error instanceof TooComplex)) throw error;
    return [
      {
        path: '$',
        message: `too complex to check against ${typeof model === 'string' ? `model ${model}` : typeToTs(model)} (its unions need more than ${STEPS_BASE} + ${STEPS_PER_VALUE} per JSON value of the batch checks): simplify the model's unions or the record; the records after it were not checked`,
      },
    ];
  }
  return checker.problems;
}

/** The records of a batch that break their model, with the path of every bad field. */
export function checkRecords(records: readonly unknown[], model: string, models: ModelIndex): InvalidRecord[] {
  const invalid: InvalidRecord[] = [];
  const budget = budgetFor(records);
  for (const [index, record] of records.entries()) {
    const problems = checkWithin(record, model, models, budget);
    if (problems.length === 0) continue;
    const id = isPlainObject(record) ? record['id'] : undefined;
    invalid.push({ index, id: typeof id === 'string' || typeof id === 'number' ? id : undefined, problems });
    if (budget.steps < 0) break;
  }
  return invalid;
}

/** One line per bad field: `Issue record 3 (id "7"): state: expected "open" | "closed", got "merged"`. */
export function formatInvalidRecords(model: string, invalid: readonly InvalidRecord[]): string[] {
  return invalid.flatMap((record) =>
    record.problems.map(
      (problem) =>
        `${model} record ${record.index}${record.id === undefined ? '' : ` (id ${clipped(JSON.stringify(record.id))})`}: ${problem.path}: ${problem.message}`,
    ),
  );
}

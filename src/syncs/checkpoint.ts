/**
 * What a checkpoint may be (svc.saveCheckpoint, issue 32): a flat JSON object of string, number and
 * boolean values, as the field's de-facto product takes it (at most 16 keys of at most 255 characters,
 * strings of at most 4000), and at most CHECKPOINT_MAX_BYTES of JSON in all. Pure, tested beside it.
 */
export type CheckpointValue = string | number | boolean;
export type Checkpoint = Record<string, CheckpointValue>;

export const CHECKPOINT_MAX_FIELDS = 16;
export const CHECKPOINT_KEY_MAX_LENGTH = 255;
export const CHECKPOINT_STRING_MAX_LENGTH = 4000;
/** 16 strings of 4000 characters fit; a checkpoint is a position, not data. */
export const CHECKPOINT_MAX_BYTES = 64 * 1024;

/**
 * What a saveCheckpoint step at an execution's limit answers when no worker executed that save before
 * (workflows/svc.ts, run model version 9): the execution ends there. A save that ran answers what it
 * stored, 0 or more.
 */
export const CHECKPOINT_NOT_EXECUTED = -1;

/** The checkpoint, or why it is not one (a sentence that says what to change). */
export function checkCheckpoint(value: unknown): { ok: true; checkpoint: Checkpoint } | { ok: false; problem: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return {
      ok: false,
      problem: `a checkpoint is an object of string, number or boolean values, not ${describe(value)}`,
    };
  }
  const entries = Object.entries(value);
  if (entries.length > CHECKPOINT_MAX_FIELDS) {
    return { ok: false, problem: `a checkpoint has at most ${CHECKPOINT_MAX_FIELDS} keys, this one ${entries.length}` };
  }
  const checkpoint: Checkpoint = {};
  for (const [key, field] of entries) {
    // Assigned, it would set the object's prototype (a primitive: silently dropped), not a key.
    if (key === '__proto__') {
      return { ok: false, problem: 'checkpoint key "__proto__" is not allowed: name the key otherwise' };
    }
    if (key.length > CHECKPOINT_KEY_MAX_LENGTH) {
      return {
        ok: false,
        problem: `checkpoint key ${JSON.stringify(key.slice(0, 40))}… is longer than ${CHECKPOINT_KEY_MAX_LENGTH} characters`,
      };
    }
    if (typeof field === 'string') {
      if (field.length > CHECKPOINT_STRING_MAX_LENGTH) {
        return {
          ok: false,
          problem: `checkpoint value of ${JSON.stringify(key)} is longer than ${CHECKPOINT_STRING_MAX_LENGTH} characters`,
        };
      }
    } else if (typeof field === 'number') {
      if (!Number.isFinite(field))
        return { ok: false, problem: `checkpoint value of ${JSON.stringify(key)} is not a finite number` };
    } else if (typeof field !== 'boolean') {
      return {
        ok: false,
        problem: `checkpoint value of ${JSON.stringify(key)} is ${describe(field)}: only strings, numbers and booleans (a date as its ISO string)`,
      };
    }
    checkpoint[key] = field;
  }
  const bytes = utf8Length(JSON.stringify(checkpoint));
  if (bytes > CHECKPOINT_MAX_BYTES) {
    return { ok: false, problem: `a checkpoint is at most ${CHECKPOINT_MAX_BYTES} bytes of JSON, this one ${bytes}` };
  }
  return { ok: true, checkpoint };
}

/** The same checkpoint, whatever the order of its keys: what the run compares to see progress. */
export function checkpointKey(checkpoint: Checkpoint | null): string | null {
  if (checkpoint === null) return null;
  return JSON.stringify(
    Object.keys(checkpoint)
      .sort()
      .map((key) => [key, checkpoint[key]]),
  );
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

// Workflow code checks checkpoints too (workflows/svcOperations.ts), where there is no Buffer.
function utf8Length(text: string): number {
  let bytes = 0;
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}

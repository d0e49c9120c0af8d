/**
 * How records become rows: their key (`id` as text), their canonical JSON and its hash, and the
 * opaque page cursor. Pure functions, so the Postgres store and its benchmark share one definition.
 */
import { hash } from 'node:crypto';
import { ServiceError } from '../errors.js';

/** Longest accepted `id`, in characters: it is part of a btree key, which Postgres caps near 2.7 kB. */
export const MAX_RECORD_ID_LENGTH = 1024;

/** The metadata key the store adds on read; a record saved back with it has it removed first. */
export const METADATA_KEY = '_service_metadata';

/**
 * The stored key of a record's `id`. Strings are kept as they are and finite numbers become their
 * JavaScript string form, so the number 1 and the string "1" are the same record (the later save
 * wins and its `id` type is what reads return). Anything else is rejected, naming where it was.
 */
export function recordKey(id: unknown, where: { index: number; model: string }): string {
  const place = `record at index ${where.index} of model "${where.model}"`;
  if (typeof id === 'string') {
    if (id.length === 0) throw invalidId(`${place} has an empty string as id`, where);
    if (id.length > MAX_RECORD_ID_LENGTH) {
      throw invalidId(
        `${place} has an id of ${id.length} characters; at most ${MAX_RECORD_ID_LENGTH} are accepted`,
        where,
      );
    }
    if (id.includes('\u0000')) throw invalidId(`${place} has an id containing the character U+0000`, where);
    return id;
  }
  if (typeof id === 'number') {
    if (!Number.isFinite(id)) throw invalidId(`${place} has the non-finite number ${String(id)} as id`, where);
    return String(id);
  }
  const shown =
    id === undefined ? 'no id' : `an id of type ${id === null ? 'null' : Array.isArray(id) ? 'array' : typeof id}`;
  throw invalidId(`${place} has ${shown}; an id must be a string or a number`, where);
}

function invalidId(message: string, where: { index: number; model: string }): ServiceError {
  return new ServiceError('invalid_record_id', message, { details: where });
}

function invalidRecord(message: string, where: { index: number; model: string }): ServiceError {
  return new ServiceError('invalid_record', message, { details: where });
}

/**
 * JSON of a record with object keys sorted at every depth, so that equal content always gives equal
 * text (and hash) whatever order the script built it in. Follows JSON.stringify otherwise: `toJSON`
 * is honoured (dates become ISO strings), undefined and function values are dropped, non-finite
 * numbers become null. The top-level `_service_metadata` is dropped. Throws `invalid_record` for
 * what JSON cannot hold (bigint, cycles).
 */
export function canonicalRecordJson(record: unknown, where: { index: number; model: string }): string {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) {
    const kind = record === null ? 'null' : Array.isArray(record) ? 'an array' : typeof record;
    throw invalidRecord(`record at index ${where.index} of model "${where.model}" is ${kind}, not an object`, where);
  }
  let json: string;
  try {
    json = canonical(record, new Set(), true) ?? '{}';
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw invalidRecord(
      `record at index ${where.index} of model "${where.model}" cannot be stored as JSON: ${reason}`,
      where,
    );
  }
  return json;
}

function canonical(input: unknown, seen: Set<object>, top: boolean): string | undefined {
  let value = input;
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'bigint':
      throw new TypeError('a bigint value has no JSON form');
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';
  const object = value as object;
  if (seen.has(object)) throw new TypeError('it contains a cycle');
  seen.add(object);
  let out: string;
  if (Array.isArray(object)) {
    out = `[${object.map((item: unknown) => canonical(item, seen, false) ?? 'null').join(',')}]`;
  } else {
    const parts: string[] = [];
    const source = object as Record<string, unknown>;
    for (const key of Object.keys(source).sort()) {
      if (top && key === METADATA_KEY) continue;
      const encoded = canonical(source[key], seen, false);
      if (encoded !== undefined) parts.push(`${JSON.stringify(key)}:${encoded}`);
    }
    out = `{${parts.join(',')}}`;
  }
  seen.delete(object);
  return out;
}

/** md5 of the canonical JSON, in uuid form (16 bytes in the table). Not a security boundary: change detection only. */
export function contentHash(json: string): string {
  // The one-shot hash: no Hash object per record (a third of the store's JavaScript work per batch).
  const hex = hash('md5', json, 'hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A value in Postgres COPY text format (tab-separated): backslash, tab, newline and CR escaped. */
export function copyText(value: string): string {
  return /[\\\t\n\r]/.test(value)
    ? value.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r')
    : value;
}

const CURSOR_PREFIX = 'r1:';

/**
 * The opaque cursor of a record: its modification position. Positions follow commit order within a
 * (connection, model), so "after this cursor" never misses a record committed later (see
 * docs/records.md). The version prefix lets the encoding change without breaking old cursors silently.
 */
export function encodeCursor(position: string): string {
  return Buffer.from(`${CURSOR_PREFIX}${position}`, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const text = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const position = text.startsWith(CURSOR_PREFIX) ? text.slice(CURSOR_PREFIX.length) : '';
  if (!/^\d{1,18}$/.test(position)) {
    throw new ServiceError('invalid_cursor', 'cursor is not one this service returned; start again without a cursor');
  }
  return position;
}

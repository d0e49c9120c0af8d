import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument, errorCodesTable } from './api/openapi.js';
import {
  ERROR_CODES,
  isRealmErrorCode,
  isRunErrorCode,
  RelayedError,
  runErrorCode,
  ServiceError,
  type RunErrorCode,
} from './errors.js';

/** The rows of a Markdown table as trimmed cells, whatever its padding. */
const rowsOf = (table: string): string[][] =>
  table
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|\s*-/.test(line))
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );

describe('the error codes', () => {
  it('are snake_case, each with a 4xx or 5xx status and a one-line meaning', () => {
    for (const [code, entry] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(entry.status >= 400 && entry.status < 600, code).toBe(true);
      expect(entry.meaning, code).toMatch(/^\S.*\.$/);
      expect(entry.meaning, code).not.toContain('\n');
    }
  });

  it('are listed in docs/api.md ("Error codes") exactly as in src/errors.ts', () => {
    const doc = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    const section = doc.split('\n## Error codes\n')[1]?.split('\n## ')[0];
    expect(section, 'docs/api.md has a section "## Error codes"').toBeDefined();
    const documented = rowsOf(section ?? '');
    expect(documented).toEqual(rowsOf(errorCodesTable()));
    expect(documented.slice(1).map((row) => row[0])).toEqual(Object.keys(ERROR_CODES).map((code) => `\`${code}\``));
  });

  it('are listed with their statuses in the Error schema of the OpenAPI document', () => {
    const document = buildOpenApiDocument({ title: 't', version: '1', description: 'd' }, []);
    const schema = document.components.schemas.Error as { description?: string };
    for (const [code, entry] of Object.entries(ERROR_CODES)) {
      expect(schema.description).toMatch(new RegExp(`\\| \`${code}\` \\| ${entry.status}\\b`));
    }
  });

  it("give a ServiceError its code's status, another only where the code lists it", () => {
    expect(new ServiceError('unknown_connection', 'gone').status).toBe(404);
    expect(new ServiceError('rate_limited', 'slow down').status).toBe(429);
    expect(new ServiceError('internal_error', 'failed').status).toBe(500);
    expect(new ServiceError('invalid_secret_key', 'bad shape', { status: 400 }).status).toBe(400);
    expect(new ServiceError('invalid_request', 'unreadable', { status: 415 }).status).toBe(415);
  });

  it('are checked by the type checker (tsc fails when these lines stop being errors)', () => {
    const mistakes = () => [
      // @ts-expect-error a code outside ERROR_CODES (a typo) does not type-check
      new ServiceError('unknown_conection', 'typo'),
      // @ts-expect-error unknown_connection has no other status
      new ServiceError('unknown_connection', 'gone', { status: 400 }),
    ];
    expect(mistakes).toBeTypeOf('function');
  });

  it('let a relayed failure keep the code and status its boundary chose', () => {
    const relayed = new RelayedError('script_error', 'script failed', { status: 500, retryable: true });
    expect([relayed.code, relayed.status, relayed.retryable, relayed.message]).toEqual([
      'script_error',
      500,
      true,
      'script failed',
    ]);
    expect(new RelayedError('TypeError', 'x', { status: 404 })).toBeInstanceOf(ServiceError);
  });
});

describe("a run's error codes", () => {
  const runCodes = Object.keys(ERROR_CODES).filter(isRunErrorCode);

  it('come from a module workflow code may import: it imports nothing', () => {
    const source = readFileSync(new URL('./errors.ts', import.meta.url), 'utf8');
    expect(source).not.toMatch(/^\s*(import|export .* from)\b/m);
    expect(source).not.toMatch(/\brequire\(|\bimport\(|Date\.now|Math\.random|process\./);
  });

  it('are listed in docs/scripts.md ("Errors"), every one, and nothing else', () => {
    const doc = readFileSync(new URL('../docs/scripts.md', import.meta.url), 'utf8');
    const section = doc.split('\n## Errors\n')[1]?.split('\n## ')[0];
    expect(section, 'docs/scripts.md has a section "## Errors"').toBeDefined();
    const documented = rowsOf(section ?? '')
      .slice(1)
      .map((row) => /^`([a-z_]+)`$/.exec(row[0] ?? '')?.[1] ?? `not a code: ${row[0]}`);
    expect(new Set(documented).size, 'each code once').toBe(documented.length);
    expect([...documented].sort()).toEqual([...runCodes].sort());
  });

  it('keep the codes of the realm, of operations and of runs apart', () => {
    expect(runCodes.filter(isRealmErrorCode).sort()).toEqual([
      'invalid_script',
      'payload_too_large',
      'record_too_large',
      'result_not_serializable',
      'script_memory_limit',
    ]);
    for (const code of ['batch_too_large', 'too_many_timers', 'http_status_error', 'script_error', 'scope_denied']) {
      expect(isRunErrorCode(code), code).toBe(true);
    }
    // Codes of the API only: a run never fails with them.
    for (const code of ['invalid_cursor', 'rate_limited', 'route_not_found'])
      expect(isRunErrorCode(code), code).toBe(false);
  });

  it("give a run its code for a failure's type: the type when it is a run's code, else the fallback", () => {
    expect(runErrorCode('metadata_too_large', 'operation_failed')).toBe('metadata_too_large');
    // An activity's error class name (a database error after its retries) is no code.
    expect(runErrorCode('DatabaseError', 'operation_failed')).toBe('operation_failed');
    expect(runErrorCode('Error', 'action_failed')).toBe('action_failed');
    // A code of the API only is not passed on as a run's either.
    expect(runErrorCode('route_not_found', 'operation_failed')).toBe('operation_failed');
    expect(runErrorCode(undefined, 'http_error')).toBe('http_error');
    expect(runErrorCode(null, 'http_error')).toBe('http_error');
    expect(runErrorCode('constructor', 'operation_failed')).toBe('operation_failed');
    const typed = (): RunErrorCode[] => [
      // @ts-expect-error a code of the API only is no run's code
      'route_not_found',
      // @ts-expect-error a typo is no code
      'batch_to_large',
    ];
    expect(typed).toBeTypeOf('function');
  });
});

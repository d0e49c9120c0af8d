/**
 * Recorded runs in the field's format: an integration folder's `mocks/` as its tooling writes them
 * (`dryrun --save-responses`), read so that a script runs against its recorded responses on this
 * service's runtime and what it stores is compared with what the format's product stored.
 *
 * Layout (relative to the integration folder):
 * - `mocks/<script>/<Model>/batchSave.json`, `…/batchDelete.json`: every record the sync saved (deleted),
 *   in order;
 * - `mocks/<script>/input.json` (optional), `mocks/<script>/output.json`: an action's input and output;
 * - `mocks/nango/<method>/proxy/<endpoint>/<script>.json`: the older form, the body answered to that
 *   method and endpoint whatever the query (one page: a paginated walk was recorded as its first page);
 * - `mocks/nango/<method>/proxy/<endpoint>/<script>/<hash>.json`: the newer form, one file per request
 *   (`{ requestIdentity, response, headers, status }`), named by the SHA-1 of the request's identity
 *   (method, endpoint, sorted query, headers other than the transport's, body; the query's values as text,
 *   as the URL carried them, or, by older recorders, as the script gave them); some of the recorder's
 *   versions wrote them one folder deeper, `…/<script>/base/<hash>.json` (its default variant's name);
 * - `mocks/nango/getMetadata.json`, `mocks/nango/getConnection.json`.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { ServiceConfig } from '../config/types.js';
import type { ConnectionRecord } from '../runtime/public.js';
import type { HttpRequestInput, HttpResult } from '../runtime/svcTypes.js';
import type { LocalBackend, LocalRunResult } from './localRun.js';
import { localIntegration } from './localTools.js';
import type { RunErrorCode } from '../errors.js';

export const MOCKS_FOLDER = 'mocks';
/** The folder of a script's default variant under its per-request recordings (see recordedBackend). */
const DEFAULT_VARIANT = 'base';

/** One recorded run: a script and what it stored or answered. */
export interface RecordedRun {
  integration: string;
  kind: 'sync' | 'action';
  name: string;
  /** Per model: the records of every batchSave, in order. */
  batchSaves: Record<string, unknown[]>;
  /** Per model: the records of every batchDelete, in order. */
  batchDeletes: Record<string, unknown[]>;
  /** An action's input (undefined when none was recorded). */
  input?: unknown;
  /** An action's recorded output. */
  output?: unknown;
}

function readJson(file: string): unknown {
  return JSON.parse(readFileSync(file, 'utf8')) as unknown;
}

function isFolder(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** The recorded runs under `<integrationFolder>/mocks` of the syncs and actions the config declares. */
export function recordedRuns(config: ServiceConfig, integration: string, integrationFolder: string): RecordedRun[] {
  const mocks = join(integrationFolder, MOCKS_FOLDER);
  const declared = config.integrations.find((candidate) => candidate.id === integration);
  if (!declared || !isFolder(mocks)) return [];
  const runs: RecordedRun[] = [];
  for (const sync of declared.syncs) {
    const folder = join(mocks, sync.name);
    if (!isFolder(folder)) continue;
    const run: RecordedRun = { integration, kind: 'sync', name: sync.name, batchSaves: {}, batchDeletes: {} };
    for (const model of readdirSync(folder).sort()) {
      const saves = join(folder, model, 'batchSave.json');
      const deletes = join(folder, model, 'batchDelete.json');
      if (existsSync(saves)) run.batchSaves[model] = asList(readJson(saves));
      if (existsSync(deletes)) run.batchDeletes[model] = asList(readJson(deletes));
    }
    if (Object.keys(run.batchSaves).length > 0 || Object.keys(run.batchDeletes).length > 0) runs.push(run);
  }
  for (const action of declared.actions) {
    const output = join(mocks, action.name, 'output.json');
    if (!existsSync(output)) continue;
    const input = join(mocks, action.name, 'input.json');
    runs.push({
      integration,
      kind: 'action',
      name: action.name,
      batchSaves: {},
      batchDeletes: {},
      ...(existsSync(input) ? { input: readJson(input) } : {}),
      output: readJson(output),
    });
  }
  return runs;
}

function asList(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [value];
}

// Headers the format leaves out of a request's identity: the transport's and the credentials'.
const UNIDENTIFYING_HEADERS = new Set([
  'authorization',
  'user-agent',
  'nango-proxy-user-agent',
  'accept-encoding',
  'retries',
  'host',
  'connection-id',
  'provider-config-key',
]);

const byKey = (a: [string, unknown], b: [string, unknown]): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

/** The body's part of a request's identity, as the format computes it. */
function dataIdentity(data: unknown): string | undefined {
  if (data === undefined || data === null || data === '' || data === 0 || data === false) return undefined;
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  return text.length > 1000 ? `sha1:${createHash('sha1').update(text).digest('hex')}` : text;
}

/** A query's values as the URL carries them: text (a number `25` is sent as `"25"`). */
function asSent(params: unknown): unknown {
  return Array.isArray(params)
    ? params.map((entry: unknown) => (Array.isArray(entry) ? [entry[0], String(entry[1])] : entry))
    : params;
}

const sha1 = (value: unknown): string => createHash('sha1').update(JSON.stringify(value)).digest('hex');

/**
 * A request's identity in the format's recordings, and its SHA-1 (the file name of its answer). The
 * format's recorders differ on the query's values: the newer took them from the URL sent (text), older
 * ones kept them as the script gave them (a number stays a number), so `sentHash` is the file name the
 * newer would give a query holding a number (the same as `hash` when the query holds text only).
 */
export function requestIdentity(request: HttpRequestInput): {
  identity: Record<string, unknown>;
  hash: string;
  sentHash: string;
} {
  const { config } = request;
  const identity: Record<string, unknown> = {
    method: request.method.toLowerCase(),
    endpoint: config.endpoint.startsWith('/') ? config.endpoint.slice(1) : config.endpoint,
    params: Object.entries(config.params ?? {}).sort(byKey),
    headers: Object.entries(config.headers ?? {})
      .filter(([name]) => !UNIDENTIFYING_HEADERS.has(name.toLowerCase()))
      .sort(byKey),
    data: dataIdentity(config.data),
  };
  return { identity, hash: sha1(identity), sentHash: sha1({ ...identity, params: asSent(identity['params']) }) };
}

interface RecordedAnswer {
  requestIdentity?: { method?: string; endpoint?: string; params?: unknown; data?: unknown };
  response?: unknown;
  headers?: Record<string, string>;
  status?: number;
}

function missing(request: HttpRequestInput, where: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: 'fixture_missing' satisfies RunErrorCode,
    nonRetryable: true,
    message: `the recording has no answer to ${request.method} ${request.config.endpoint} ${JSON.stringify(request.config.params ?? {})} (looked for ${where})`,
  });
}

/**
 * A local run's backend answering from the recordings of one script: each request from its file (the
 * newer form: by the request's identity, else the one recorded answer of the same method, endpoint,
 * query and body, headers aside; the older form: the endpoint's body, and an empty page for the pages
 * of a walk after the first, which the older form did not record), the connection's metadata and record.
 */
export function recordedBackend(options: {
  integrationFolder: string;
  integration: string;
  script: string;
}): LocalBackend {
  const mocks = join(options.integrationFolder, MOCKS_FOLDER);
  const optional = (file: string): unknown => (existsSync(file) ? readJson(file) : undefined);
  const answer = (request: HttpRequestInput, recorded: RecordedAnswer | undefined, body: unknown): HttpResult => {
    const status = recorded?.status ?? 200;
    if (status >= 400) {
      throw ApplicationFailure.create({
        type: 'http_status_error',
        nonRetryable: true,
        message: `${request.method} ${request.config.endpoint} answered ${status}`,
        details: [
          {
            kind: 'response',
            response: {
              status,
              headers: recorded?.headers ?? {},
              data: body,
              request: { method: request.method, url: request.config.endpoint },
            },
          },
        ],
      });
    }
    return {
      status,
      headers: Object.fromEntries(
        Object.entries(recorded?.headers ?? {}).map(([name, value]) => [name.toLowerCase(), String(value)]),
      ),
      data: body,
      request: { method: request.method, url: request.config.endpoint },
    };
  };
  return {
    httpRequest(request) {
      const { identity, hash, sentHash } = requestIdentity(request);
      const base = join(mocks, 'nango', identity['method'] as string, 'proxy', identity['endpoint'] as string);
      const perRequest = join(base, options.script);
      if (isFolder(perRequest)) {
        // The script's own folder, then its default variant's: some of the recorder's versions wrote
        // every request of a script under `<script>/base/` (`base` is the name of a script's default variant).
        const folders = [perRequest, join(perRequest, DEFAULT_VARIANT)].filter(isFolder);
        const exact = folders
          .flatMap((folder) => [hash, sentHash].map((name) => join(folder, `${name}.json`)))
          .find((file) => existsSync(file));
        if (exact !== undefined) {
          const recorded = readJson(exact) as RecordedAnswer;
          return Promise.resolve(answer(request, recorded, recorded.response));
        }
        // The same request but for headers the script's SDK and this one set differently (the query's
        // values compared as the URL carries them, whichever way the recorder kept them).
        const query = JSON.stringify(asSent(identity['params']));
        for (const file of folders.flatMap((folder) =>
          readdirSync(folder)
            .filter((name) => name.endsWith('.json'))
            .sort()
            .map((name) => join(folder, name)),
        )) {
          const recorded = readJson(file) as RecordedAnswer;
          const known = recorded.requestIdentity;
          if (
            known !== undefined &&
            JSON.stringify(asSent(known.params ?? [])) === query &&
            (known.data ?? undefined) === identity['data']
          ) {
            return Promise.resolve(answer(request, recorded, recorded.response));
          }
        }
        throw missing(request, `${perRequest}/${hash}.json`);
      }
      const legacy = `${perRequest}.json`;
      if (existsSync(legacy)) {
        // The older form recorded one page of a walk: the pages after it are empty.
        return Promise.resolve(answer(request, undefined, (request.page ?? 0) > 0 ? [] : readJson(legacy)));
      }
      throw missing(request, legacy);
    },
    getConnection: () =>
      Promise.resolve(
        (optional(join(mocks, 'nango', 'getConnection.json')) ?? {
          id: 1,
          created_at: '1970-01-01T00:00:00.000Z',
          updated_at: '1970-01-01T00:00:00.000Z',
          provider_config_key: options.integration,
          connection_id: 'recorded',
          credentials: { type: 'NONE' },
          connection_config: {},
          account_id: 0,
          metadata: {},
        }) as ConnectionRecord,
      ),
    getMetadata: () =>
      Promise.resolve(
        (optional(join(mocks, 'nango', 'getMetadata.json')) as Record<string, unknown> | undefined) ?? {},
      ),
    getEnvironmentVariables: () => Promise.resolve([]),
    getIntegration: () => Promise.resolve(localIntegration(options.integration)),
  };
}

/** JSON as the comparison sees it: the values a run's records and outputs cross as. */
function normalized(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner as Record<string, unknown>).sort(byKey))
      : inner,
  );
}

/** Where a run's outcome differs from its recording; empty when it reproduces it. */
export function differences(recorded: RecordedRun, result: LocalRunResult): string[] {
  const found: string[] = [];
  if (!result.ok) return [`the run failed: ${result.failure?.code ?? 'failed'}: ${result.failure?.message ?? ''}`];
  if (recorded.kind === 'action') {
    if (normalized(result.output) !== normalized(recorded.output)) found.push('the action answered another output');
    return found;
  }
  for (const [label, expected, received] of [
    ['batchSave', recorded.batchSaves, result.batchSaves],
    ['batchDelete', recorded.batchDeletes, result.batchDeletes],
  ] as const) {
    for (const model of new Set([...Object.keys(expected), ...Object.keys(received)])) {
      const want = expected[model] ?? [];
      const got = received[model] ?? [];
      if (normalized(want) === normalized(got)) continue;
      const index = want.findIndex((record, at) => normalized(record) !== normalized(got[at]));
      found.push(
        `${label} ${model}: ${got.length} records where the recording has ${want.length}` +
          (index >= 0 ? `; the first difference is record ${index}` : ''),
      );
    }
  }
  return found;
}

/**
 * What `service dryrun` and `service test` share: the local build, the Temporal server a local run
 * uses, the fixture format of recorded exchanges, and how a run's outcome is printed.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { ServiceConfig } from '../config/types.js';
import { loadProviderCatalog } from '../connections/providers/catalog.js';
import type { ConnectionRecord, EnvironmentVariable, Pagination } from '../runtime/public.js';
import type { HttpRequestInput, HttpResult, IntegrationDescription } from '../runtime/svcTypes.js';
import type { TemporalConnectionOptions } from '../temporal/connection.js';
import type { CliIo } from './io.js';
import { scriptKey, type Exchange, type LocalBackend, type LocalRunResult } from './localRun.js';
import { projectPaths } from './project.js';
import type { RunErrorCode } from '../errors.js';

/** The compiled project: its config and a script's bundle by `<syncs|actions>/<name>` per integration. */
export interface LocalBuild {
  config: ServiceConfig;
  bundles(integration: string): Map<string, string>;
}

/** Compiles the project (as `service compile` does) and reads its bundles; null after printing the problems. */
export async function loadLocalBuild(root: string, io: CliIo): Promise<LocalBuild | null> {
  const { compileProject } = await import('./compile.js');
  const compiled = await compileProject({ root, onProgress: (line) => io.out(`${line}\n`) });
  if (!compiled.ok || compiled.manifest === null) {
    const { countSummary, formatProjectProblems } = await import('./project.js');
    const report = [
      compiled.configReport,
      formatProjectProblems(compiled.problems.filter((p) => !p.file.endsWith('service.yaml'))),
    ];
    io.err(`${report.filter(Boolean).join('\n')}\n${countSummary(compiled.problems)}\n`);
    return null;
  }
  const { buildDir } = projectPaths(root);
  const codes = new Map<string, string>();
  for (const script of compiled.manifest.scripts) {
    codes.set(
      `${script.integration}\n${scriptKey(script.kind, script.name)}`,
      await readFile(join(buildDir, script.file), 'utf8'),
    );
  }
  return {
    config: compiled.manifest.config,
    bundles: (integration) =>
      new Map(
        [...codes]
          .filter(([key]) => key.startsWith(`${integration}\n`))
          .map(([key, code]) => [key.slice(integration.length + 1), code]),
      ),
  };
}

/**
 * The Temporal server of local runs: TEMPORAL_ADDRESS (and TEMPORAL_NAMESPACE) when set, else a
 * throw-away dev server started for this command. SERVICE_WORKFLOW_BUNDLE names a prebuilt workflow
 * bundle (tests); without it the package's prebuilt one is used when current, else the workflows are
 * bundled once, here.
 */
export async function startLocalTemporal(io: CliIo): Promise<{
  server: { address: string; namespace: string } & Omit<TemporalConnectionOptions, 'address'>;
  workflowBundle: { codePath: string } | { code: string };
  stop(): Promise<void>;
}> {
  const { startTemporal } = await import('../devstack/temporal.js');
  const env = { ...process.env, ...io.env };
  if (!env['TEMPORAL_ADDRESS'])
    io.out('starting a throw-away Temporal dev server for this run (set TEMPORAL_ADDRESS to use yours)…\n');
  // TLS and an API key for TEMPORAL_ADDRESS, as the service's own processes use them.
  const { temporalConnectionOptionsFromEnv } = await import('../temporal/connection.js');
  const external = env['TEMPORAL_ADDRESS'];
  const reach = external ? temporalConnectionOptionsFromEnv(external, env) : undefined;
  const server = await startTemporal({ env, ...(reach ? { connection: reach } : {}) });
  const bundlePath = env['SERVICE_WORKFLOW_BUNDLE'];
  // Bundled once for every run of the command (the prebuilt one of the package when it is current).
  const { loadWorkflowBundle } = await import('../temporal/workflowBundle.js');
  const workflowBundle = bundlePath
    ? { codePath: bundlePath }
    : await loadWorkflowBundle({ log: (line) => io.err(`${line}\n`) }).catch(async (error: unknown) => {
        await server.stop();
        throw error;
      });
  return {
    server: { ...reach, address: server.address, namespace: server.namespace },
    workflowBundle,
    stop: () => server.stop(),
  };
}

/** A recorded run: what `service dryrun --save-responses` writes and `service test` replays. */
export interface ScriptFixture {
  version: 1;
  integration: string;
  kind: 'sync' | 'action';
  name: string;
  connectionId: string;
  lastSyncDate: string | null;
  input: unknown;
  /** The connection's metadata when the run started. */
  metadata: Record<string, unknown>;
  /** The connection record, credential values replaced by `[redacted]`. */
  connection: unknown;
  /** The environment's variables by name; values are `[redacted]` (edit the file to give a test values). */
  environmentVariables: EnvironmentVariable[];
  /**
   * The integration as svc.getIntegration saw it, with its provider's default pagination; recorded since
   * svc.paginate reads that default. When absent: the integration id as the provider, this package's catalog.
   */
  integrationDescription?: IntegrationDescription;
  exchanges: Exchange[];
}

/** The default pagination of a provider of this package's catalog (with SERVICE_PROVIDERS_FILE's). */
export function catalogPagination(provider: string): Pagination | undefined {
  let paginate: Pagination | undefined;
  try {
    const catalog = loadProviderCatalog({ extraFile: process.env['SERVICE_PROVIDERS_FILE'] });
    paginate = catalog.has(provider) ? (catalog.get(provider).paginate as Pagination | undefined) : undefined;
  } catch {
    paginate = undefined;
  }
  return paginate;
}

/** An integration of a local run that no service describes: its id is taken as its provider's name. */
export function localIntegration(integrationId: string): IntegrationDescription {
  const pagination = catalogPagination(integrationId);
  return {
    integration: {
      unique_key: integrationId,
      provider: integrationId,
      display_name: integrationId,
      created_at: '1970-01-01T00:00:00.000Z',
      updated_at: '1970-01-01T00:00:00.000Z',
      webhook_url: `http://127.0.0.1:3003/webhook/local/${encodeURIComponent(integrationId)}`,
    },
    ...(pagination ? { pagination } : {}),
  };
}

export const FIXTURE_FILE = 'fixture.json';
export const SNAPSHOT_FILE = 'snapshot.json';

export async function writeFixture(dir: string, fixture: Omit<ScriptFixture, 'version'>): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, FIXTURE_FILE);
  await writeFile(file, `${JSON.stringify({ version: 1, ...fixture }, null, 2)}\n`);
  return file;
}

/** The key a request is matched by: method, endpoint, query, body and base URL (headers do not count). */
export function requestKey(request: HttpRequestInput): string {
  const { config } = request;
  const params = Object.entries(config.params ?? {})
    .map(([key, value]) => [key, String(value)])
    .sort(([a = ''], [b = '']) => a.localeCompare(b));
  return JSON.stringify([request.method, config.endpoint, params, config.data ?? null, config.baseUrlOverride ?? null]);
}

/**
 * A backend answering from a fixture, without network: each request gets the next recorded answer to
 * the same method, endpoint, query, body and base URL; a request the fixture does not hold fails the
 * run with `fixture_missing`, naming it.
 */
export function fixtureBackend(fixture: ScriptFixture): LocalBackend {
  const queues = new Map<string, Exchange[]>();
  for (const exchange of fixture.exchanges) {
    const key = requestKey(exchange.request);
    queues.set(key, [...(queues.get(key) ?? []), exchange]);
  }
  return {
    httpRequest(request): Promise<HttpResult> {
      const exchange = queues.get(requestKey(request))?.shift();
      if (!exchange) {
        throw ApplicationFailure.create({
          type: 'fixture_missing' satisfies RunErrorCode,
          nonRetryable: true,
          message: `the fixture has no (more) answer to ${request.method} ${request.config.endpoint} ${JSON.stringify(request.config.params ?? {})}: record it again with 'service dryrun --save-responses'`,
        });
      }
      if (exchange.response) return Promise.resolve(exchange.response);
      const failure = exchange.failure ?? {
        type: 'http_error',
        message: 'recorded failure',
        nonRetryable: true,
        details: [],
      };
      throw ApplicationFailure.create({
        type: failure.type,
        message: failure.message,
        nonRetryable: failure.nonRetryable,
        details: failure.details,
      });
    },
    getConnection: () => Promise.resolve(structuredClone(fixture.connection) as ConnectionRecord),
    getMetadata: () => Promise.resolve(structuredClone(fixture.metadata)),
    getEnvironmentVariables: () => Promise.resolve(structuredClone(fixture.environmentVariables)),
    getIntegration: () =>
      Promise.resolve(structuredClone(fixture.integrationDescription ?? localIntegration(fixture.integration))),
  };
}

const SHOWN_RECORDS = 3;

/** The outcome of a local run: records per model (count and the first few), deletes, metadata, problems. */
export function printRunResult(result: LocalRunResult, io: CliIo, options: { model?: string | undefined } = {}): void {
  const failed = result.exchanges.filter((exchange) => exchange.failure !== undefined).length;
  io.out(`\nrequests: ${result.exchanges.length}${failed > 0 ? ` (${failed} failed)` : ''}\n`);
  for (const [model, records] of Object.entries(result.records)) {
    if (options.model !== undefined && model !== options.model) continue;
    io.out(
      `${model}: ${records.length} record(s) would be saved${records.length > SHOWN_RECORDS ? `, the first ${SHOWN_RECORDS}:` : ''}\n`,
    );
    for (const record of records.slice(0, SHOWN_RECORDS)) io.out(`  ${JSON.stringify(record)}\n`);
  }
  for (const [model, ids] of Object.entries(result.deleted)) {
    if (options.model !== undefined && model !== options.model) continue;
    io.out(
      `${model}: ${ids.length} record(s) would be deleted: ${ids
        .slice(0, 10)
        .map((id) => JSON.stringify(id))
        .join(', ')}${ids.length > 10 ? ', …' : ''}\n`,
    );
  }
  for (const write of result.metadataWrites) io.out(`metadata ${write.kind}: ${JSON.stringify(write.metadata)}\n`);
  if (result.output !== undefined) io.out(`output: ${JSON.stringify(result.output, null, 2)}\n`);
  if (result.invalid.length > 0) {
    io.err(
      `\n${result.invalid.length} field(s) break their model:\n${result.invalid.map((line) => `  ${line}\n`).join('')}`,
    );
  }
  if (!result.ok && result.failure) io.err(`\nthe run failed: ${result.failure.code}: ${result.failure.message}\n`);
  else if (result.invalid.length === 0) io.out('\nthe run succeeded; every record fits its model\n');
}

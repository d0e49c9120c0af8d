/**
 * Schemathesis (PyPI) against GET /openapi.json of the running API (issue 29, finding 8: bad input is a
 * 400 when it arrives, never a 500). The one check: no answer is a 5xx. Three runs, each bounded by its
 * own time budget (schemathesis --max-time):
 * - generated: every operation with the environment's key, values generated from the schema and
 *   against it (coverage of the boundaries, fuzzing, stateful sequences through the OpenAPI links);
 * - realistic: the same, with path, query and header parameters that name what exists (the deployed
 *   integration, its connection, version 1), so generated bodies reach the logic behind the 404s;
 * - admin: the environment routes with the service admin key, on an environment made for it.
 * The command, to run by hand against `npm start`, is in docs/api.md ("Fuzzing the API").
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSchemathesis } from '../../scripts/ensureSchemathesis.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { json } from '../kit/upstream.js';

/** The time budget of all runs together, in seconds: the suite stays within CI's 90 minutes. */
const BUDGET_S = Number(process.env['SCHEMATHESIS_MAX_TIME_S'] ?? 180);

let h: ApiHarness;
let command: string;
let fuzzedEnvironment: string;
/** GET /openapi.json, read with the environment's key (the admin run's key does not open it). */
let spec: string;
const work = mkdtempSync(join(tmpdir(), 'schemathesis-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

beforeAll(async () => {
  command = await ensureSchemathesis((line) => console.log(line));
  h = await startApiHarness();
  // The external API answers what the fixture's scripts expect: a failing script is a run's failure,
  // which POST /action/trigger relays as a 500 by design (docs/api.md "Error codes"), not bad input.
  h.fake.setHandler((request, response, body) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    if (request.method === 'POST' && path === '/api/issues') {
      const title = (JSON.parse(body || '{}') as { title?: unknown }).title;
      return json(response, 201, { id: 'i-1', title: typeof title === 'string' ? title : '' });
    }
    if (path === '/api/issues') return json(response, 200, { issues: [] });
    return json(response, 200, { ok: true });
  });
  await deployWithConnection(h, 'fuzzed-key-6f2a1c');
  await h.api.environmentVariables.set({ variables: [{ name: 'FUZZ_VAR', value: 'v' }] });
  fuzzedEnvironment = (await h.admin.environments.create('fuzzed')).environment.id;
  spec = join(work, 'openapi.json');
  writeFileSync(spec, JSON.stringify(await h.api.openapi()));
}, 600_000);

/** Runs schemathesis with a config file; its exit code, its output and its JUnit report. */
function schemathesis(
  name: string,
  config: string,
  args: string[],
): Promise<{ code: number | null; output: string; junit: string }> {
  const folder = join(work, name);
  const configFile = join(work, `${name}.toml`);
  writeFileSync(configFile, config);
  return new Promise((resolve, reject) => {
    const child = spawn(
      command,
      [
        '--config-file',
        configFile,
        'run',
        spec,
        '--url',
        h.baseUrl,
        '--checks',
        'not_a_server_error',
        // One worker: with more, Python 3.11.7's ast module fails in hypothesis's threads.
        '--workers',
        '1',
        '--request-timeout',
        '30',
        '--seed',
        process.env['SCHEMATHESIS_SEED'] ?? '29',
        '--report',
        'junit',
        '--report-dir',
        folder,
        ...args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const report = readdirSync(folder, { withFileTypes: true }).find((entry) => entry.name.startsWith('junit'));
      resolve({ code, output, junit: report ? readFileSync(join(folder, report.name), 'utf8') : '' });
    });
  });
}

/** The part of schemathesis's output that names each failure (operation, answer, a curl line), else its end. */
function failures(output: string): string {
  const at = output.lastIndexOf('= FAILURES =');
  return (at === -1 ? output.slice(-8000) : output.slice(at)).slice(0, 12_000);
}

const toml = (values: Record<string, string | number>): string =>
  Object.entries(values)
    .map(([key, value]) => `${JSON.stringify(key)} = ${JSON.stringify(value)}`)
    .join('\n');

describe('schemathesis against GET /openapi.json', () => {
  const runs = [
    {
      name: 'realistic',
      share: 0.4,
      config: () =>
        `headers = { Authorization = "Bearer ${h.envA.secretKey}" }\n[parameters]\n${toml({
          'path.connection_id': 'c1',
          'path.id': INTEGRATION,
          'path.version': 1,
          'path.name': 'FUZZ_VAR',
          'path.integration': INTEGRATION,
          'path.environment': h.envA.id,
          'query.provider_config_key': INTEGRATION,
          'query.connection_id': 'c1',
          'header.Connection-Id': 'c1',
          'header.Provider-Config-Key': INTEGRATION,
        })}\n`,
      // What deletes or replaces the things named would leave the rest of the run to 404s: the
      // generated run tries them.
      args: [
        '--exclude-path-regex',
        '^/(environments|deploy)',
        '--exclude-method',
        'DELETE',
        '--phases',
        'coverage,fuzzing',
      ],
    },
    {
      name: 'generated',
      share: 0.4,
      config: () => `headers = { Authorization = "Bearer ${h.envA.secretKey}" }\n`,
      args: ['--exclude-path-regex', '^/environments'],
    },
    {
      name: 'admin',
      share: 0.2,
      config: () =>
        `headers = { Authorization = "Bearer ${h.adminKey}" }\n[parameters]\n${toml({ 'path.id': fuzzedEnvironment })}\n`,
      args: ['--include-path-regex', '^/environments', '--phases', 'coverage,fuzzing'],
    },
  ];
  for (const run of runs) {
    it(
      `${run.name}: no operation answers a 5xx`,
      async () => {
        const budget = Math.max(10, Math.round(BUDGET_S * run.share));
        const { code, output, junit } = await schemathesis(run.name, run.config(), [
          '--max-time',
          String(budget),
          ...run.args,
        ]);
        if (process.env['SCHEMATHESIS_OUTPUT'])
          writeFileSync(`${process.env['SCHEMATHESIS_OUTPUT']}.${run.name}`, output);
        expect(code, failures(output)).toBe(0);
        // It ran: test cases were generated and reported.
        expect(output).toMatch(/Test cases:\s+\d+ generated/);
        expect(junit).toContain('<testsuite');
      },
      (BUDGET_S + 300) * 1000,
    );
  }
});

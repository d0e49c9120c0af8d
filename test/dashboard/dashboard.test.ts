/**
 * The dashboard in a real browser (Debian's Chromium, headless, driven by Playwright) against the real
 * service: Postgres, Temporal and a worker from the API harness, a fake external API on 127.0.0.1.
 * Sign in, see the deployed integration and its Script tab, set an environment variable, run the sync
 * from the dashboard and watch its status, find its records (which carry the variable's value) and its
 * log lines, and sign out. Each page is photographed into test/dashboard/screenshots/.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import type { ApiDeps } from '../../src/api/index.js';
import { createApiRoutes, createGeneratedEndpointFallback } from '../../src/api/routes/index.js';
import { createServer } from '../../src/api/server.js';
import { createDashboardRouter, type DashboardOptions } from '../../src/dashboard/index.js';
import { stack } from '../kit/stack.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { openBrowser } from './browser.js';
import { deferCleanup } from '../kit/cleanup.js';
import { bundle } from '../kit/scripts.js';
import { json } from '../kit/upstream.js';

const INTEGRATION = 'fake-api';
const TEMPORAL_UI = 'http://127.0.0.1:18233';
const screenshots = fileURLToPath(new URL('./screenshots/', import.meta.url));

const SERVICE_YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      tickets:
        description: Support tickets, each stamped with the GREETING variable
        output: Ticket
        endpoint: GET /tickets
        sync_type: incremental
        runs: every 5 minutes
        auto_start: false
    actions:
      close-ticket:
        description: Closes a ticket
        input: TicketRef
        output: Ticket
        endpoint: POST /tickets/close
models:
  Ticket:
    id: string
    title: string
    greeting: string
  TicketRef:
    id: string
`;

/** What `service compile` uploads as the script's source: shown by the Script tab. */
const TICKETS_SOURCE = `import type { ServiceSync } from '../../models';

export default async function fetchTickets(svc: ServiceSync) {
  const variables = await svc.getEnvironmentVariables();
  const greeting = variables.find((v) => v.name === 'GREETING')?.value ?? 'unset';
  const res = await svc.get({ endpoint: '/tickets' });
  await svc.batchSave(res.data.tickets.map((t) => ({ ...t, greeting })), 'Ticket');
  await svc.log(\`saved \${res.data.tickets.length} tickets greeting \${greeting}\`);
}
`;
const TICKETS_BUNDLE = bundle(`async function (svc) {
  const variables = await svc.getEnvironmentVariables();
  const found = variables.find((v) => v.name === 'GREETING');
  const greeting = found ? found.value : 'unset';
  const res = await svc.get({ endpoint: '/tickets' });
  await svc.batchSave(res.data.tickets.map((t) => ({ id: t.id, title: t.title, greeting })), 'Ticket');
  await svc.log('saved ' + res.data.tickets.length + ' tickets greeting ' + greeting);
}`);
const CLOSE_SOURCE = `export default async function closeTicket(svc, input) {\n  return { id: input.id, title: 'closed', greeting: '' };\n}\n`;
const CLOSE_BUNDLE = bundle(`async function (svc, input) { return { id: input.id, title: 'closed', greeting: '' }; }`);

const TICKETS = Array.from({ length: 12 }, (_, i) => ({
  id: `t${String(i + 1).padStart(2, '0')}`,
  title: `Ticket ${i + 1}`,
}));

let h: ApiHarness;
let baseUrl: string;
let page: Page;
let context: BrowserContext;
let secretKey: string;

/**
 * The API with the dashboard mounted, as the service's composition mounts it: every API route, the
 * dashboard router, then the generated endpoints.
 */
function dashboardApp(deps: ApiDeps, options: DashboardOptions) {
  return createServer({
    routes: createApiRoutes(deps),
    authenticate: async (key) => {
      const environment = await deps.environments.findBySecretKey(key);
      return environment ? { id: environment.id, name: environment.name } : undefined;
    },
    mount: [createDashboardRouter(options)],
    fallback: createGeneratedEndpointFallback(deps),
    adminKey: deps.adminKey,
    logger: { info: () => undefined, error: (message, fields) => console.error(message, fields) },
  });
}

/** A run as GET /sync/runs answers it. */
interface ApiRun {
  run_id: string;
  sync: string;
  connection_id: string;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  status: 'success' | 'failed';
  models: Record<string, { added: number; updated: number; deleted: number }>;
  error: { code: string; message: string } | null;
}

/**
 * Points the mouse at run `index` (of `count`, oldest first) on the duration plot of the tickets
 * chart, and reads what the chart then shows: each plot's legend (label → value) and the run's summary.
 */
async function pointAtRun(index: number, count: number) {
  const slot = page.locator('.chart-slot[data-sync="tickets"]');
  const over = slot.locator('.u-over').first();
  await over.scrollIntoViewIfNeeded();
  const box = await over.boundingBox();
  if (!box) throw new Error('the duration plot is not shown');
  await page.mouse.move(box.x + ((index + 0.5) / count) * box.width, box.y + box.height / 2);
  const read = () =>
    page.evaluate<Record<string, string>[]>(
      `[...document.querySelectorAll('.chart-slot[data-sync="tickets"] .u-legend')].map((table) =>
        Object.fromEntries([...table.querySelectorAll('tr.u-series')].map((row) => [
          row.querySelector('.u-label').textContent,
          row.querySelector('.u-value').textContent,
        ])))`,
    );
  // The legends follow the cursor on the next frame.
  await expect.poll(async () => (await read()).map((legend) => legend['Run'] !== '—')).toEqual([true, true]);
  return { legends: await read(), detail: (await slot.locator('.chart-run').textContent()) ?? '' };
}

/** The Temporal links of the tickets chart's table, top to bottom. */
function tableLinks() {
  return page.evaluate<string[]>(
    `[...document.querySelectorAll('.chart-slot[data-sync="tickets"] table.list tbody a')].map((a) => a.getAttribute('href'))`,
  );
}

async function shoot(name: string) {
  await page.screenshot({ path: `${screenshots}${name}.png` });
}

/** A call to the service as the test's own client (to compare with what the dashboard shows). */
async function apiGet(path: string, key = secretKey) {
  const response = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

// Without Chromium every test fails with the instruction to install it (a failed beforeAll would
// report them as skipped).
let browserMissing: Error | undefined;

beforeAll(async () => {
  const browser = await openBrowser(screenshots);
  if (browser instanceof Error) {
    browserMissing = browser;
    return;
  }
  page = browser.page;
  context = browser.context;
  h = await startApiHarness();
  h.fake.setHandler((request, response) => {
    if (request.url === '/api/tickets') return json(response, 200, { tickets: TICKETS });
    if (request.url === '/hooks/service') return json(response, 200, {}); // the outbound webhooks of the runs
    json(response, 404, { error: 'not found' });
  });
  secretKey = h.envA.secretKey;
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: 'fake-api' });
  await h.deploy(h.envA.id, {
    yaml: SERVICE_YAML,
    scripts: [
      {
        integration: INTEGRATION,
        kind: 'sync',
        name: 'tickets',
        code: TICKETS_BUNDLE,
        source: TICKETS_SOURCE,
        sourcePath: 'fake-api/syncs/tickets.ts',
      },
      {
        integration: INTEGRATION,
        kind: 'action',
        name: 'close-ticket',
        code: CLOSE_BUNDLE,
        source: CLOSE_SOURCE,
        sourcePath: 'fake-api/actions/close-ticket.ts',
      },
    ],
  });
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'acme',
    credentials: { type: 'API_KEY', apiKey: 'key-acme' },
    connection_config: { subdomain: 'acme' },
    metadata: { plan: 'enterprise', seats: 12 },
  });

  const app = dashboardApp(h.deps, {
    temporalUiUrl: TEMPORAL_UI,
    temporalNamespace: stack().temporalNamespace,
    environments: h.deps.environments,
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  deferCleanup(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  page.setDefaultTimeout(15_000);
  // The pages must run without a script error: any fails the test it happened in.
  page.on('pageerror', (error) => pageErrors.push(error.message));
});

beforeEach(() => {
  if (browserMissing) throw browserMissing;
});

const pageErrors: string[] = [];
afterEach(() => {
  expect(pageErrors.splice(0)).toEqual([]);
});

describe('the dashboard', () => {
  it('serves its files with a strict content security policy, and its config', async () => {
    const index = await fetch(`${baseUrl}/dashboard/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await index.text()).toContain('<script type="module" src="js/app.js">');
    const config = await fetch(`${baseUrl}/dashboard/config.json`);
    expect(await config.json()).toEqual({
      temporal_ui_url: TEMPORAL_UI,
      temporal_namespace: stack().temporalNamespace,
      features: { keys: true },
    });
    const missing = await fetch(`${baseUrl}/dashboard/nope.js`);
    expect([missing.status, ((await missing.json()) as { error: { code: string } }).error.code]).toEqual([
      404,
      'route_not_found',
    ]);

    // The chart library: its two files from node_modules, with the same headers; nothing else of the package.
    for (const [path, type, text] of [
      ['vendor/uplot.esm.js', 'text/javascript', 'export { uPlot as default }'],
      ['vendor/uplot.min.css', 'text/css', '.uplot'],
    ] as const) {
      const file = await fetch(`${baseUrl}/dashboard/${path}`);
      expect(file.status).toBe(200);
      expect(file.headers.get('content-type')).toContain(type);
      expect(file.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(await file.text()).toContain(text);
    }
    for (const path of ['vendor/uPlot.cjs.js', 'vendor/uPlot.d.ts', 'vendor/package.json', 'vendor/']) {
      expect((await fetch(`${baseUrl}/dashboard/${path}`)).status, path).toBe(404);
    }
  });

  it('refuses a wrong key and signs in with the environment secret key', async () => {
    await page.goto(`${baseUrl}/dashboard`);
    expect(page.url()).toBe(`${baseUrl}/dashboard/`);
    const keyInput = page.getByLabel('Environment secret key');
    // Signed out, the pages show nothing but the sign-in form.
    expect(await page.getByRole('button', { name: 'Sign out' }).isHidden()).toBe(true);
    expect(await page.getByRole('navigation', { name: 'Main' }).isHidden()).toBe(true);
    await keyInput.fill('sk_wrong-key');
    await keyInput.press('Enter');
    await page.getByText('No environment has this secret key').waitFor();
    expect(await keyInput.getAttribute('aria-invalid')).toBe('true');
    await shoot('sign-in');

    await keyInput.fill(secretKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
    expect(await page.evaluate('Object.values(sessionStorage)')).toEqual([secretKey]);
    expect(await page.getByRole('button', { name: 'Sign out' }).isVisible()).toBe(true);
    await page.getByText('Environment: env-a').waitFor();
  });

  it('lists the deployed integration and shows its syncs, models and Script tab', async () => {
    const row = page.getByRole('row', { name: new RegExp(INTEGRATION) });
    await expect(row.textContent()).resolves.toContain('tickets');
    await expect(row.textContent()).resolves.toContain('close-ticket');
    await page.getByText('Deployed version 1').waitFor();
    await shoot('integrations');

    await page.getByRole('link', { name: INTEGRATION, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: `Integration ${INTEGRATION}` }).waitFor();
    const syncRow = page.getByRole('row', { name: /^tickets/ });
    expect(await syncRow.textContent()).toContain('GET /tickets');
    expect(await page.getByRole('row', { name: /close-ticket/ }).textContent()).toContain('POST /tickets/close');

    // Keyboard: the tabs move with the arrow keys (ARIA tabs pattern).
    await page.getByRole('tab', { name: 'Syncs and actions' }).focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.getByRole('tab', { name: 'Models' }).getAttribute('aria-selected')).toBe('true');
    await page.getByRole('heading', { name: 'TicketRef' }).waitFor();
    expect(await page.getByRole('tabpanel').textContent()).toContain('greeting');
    await page.keyboard.press('ArrowRight');
    const scriptTab = page.getByRole('tab', { name: 'Script' });
    expect(await scriptTab.getAttribute('aria-selected')).toBe('true');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Script');
    expect(page.url()).toContain(`#/integrations/${INTEGRATION}/script`);

    await page.getByRole('heading', { name: 'Sync tickets' }).waitFor();
    const source = page.locator('section.script').filter({ has: page.getByRole('heading', { name: 'Sync tickets' }) });
    expect(await page.getByLabel('Source of sync tickets').textContent()).toBe(TICKETS_SOURCE);
    expect(await page.getByLabel('Source of action close-ticket').textContent()).toBe(CLOSE_SOURCE);
    const meta = await source.locator('.meta').first().textContent();
    expect(meta).toContain('fake-api/syncs/tickets.ts');
    expect(meta).toContain('deploy version 1');
    await shoot('integration-script');
  });

  it('lists the integrations when the service has no deploy history routes, and says so', async () => {
    // A service without GET /deployments, as the browser sees it.
    await page.route('**/deployments', (route) =>
      route.fulfill({
        status: 404,
        contentType: 'application/json',
        body: JSON.stringify({ error: { code: 'route_not_found', message: 'No route GET /deployments.' } }),
      }),
    );
    try {
      await page.goto(`${baseUrl}/dashboard/#/integrations`);
      await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
      await page.getByText('The deploy history cannot be read: No route GET /deployments.').waitFor();
      expect(await page.getByRole('row', { name: new RegExp(INTEGRATION) }).textContent()).toContain('not deployed');
    } finally {
      await page.unroute('**/deployments');
    }
  });

  it('sets an environment variable, masked until revealed', async () => {
    await page.getByRole('link', { name: 'Environment settings' }).click();
    await page.getByRole('heading', { level: 1, name: 'Environment settings' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('GREETING');
    await page.getByLabel('Value', { exact: true }).fill('hello-from-dashboard');
    await page.getByRole('button', { name: 'Add variable' }).click();
    await page.getByText('Saved GREETING.').first().waitFor();
    const row = page.getByRole('row', { name: /GREETING/ });
    expect(await row.locator('code.masked').textContent()).toBe('••••••••');
    expect(await page.content()).not.toContain('hello-from-dashboard');
    await row.getByRole('button', { name: 'Reveal value of GREETING' }).click();
    expect(await row.locator('code.masked').textContent()).toBe('hello-from-dashboard');
    expect(await h.api.environmentVariables.list()).toEqual([{ name: 'GREETING', value: 'hello-from-dashboard' }]);
    // The keys card: the public key of the environment, the secret key masked.
    expect(await page.locator('#secret-key-value').textContent()).not.toContain(secretKey);
    const environment = await h.deps.environments.get(h.envA.id);
    await page.getByText(environment.publicKey).waitFor();
    await shoot('settings');

    // Another variable, deleted again after a confirmation.
    await page.getByLabel('Name', { exact: true }).fill('SCRATCH');
    await page.getByLabel('Value', { exact: true }).fill('temporary');
    await page.getByRole('button', { name: 'Add variable' }).click();
    await page.getByRole('row', { name: /SCRATCH/ }).waitFor();
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete SCRATCH' }).click();
    await page.getByText('Deleted SCRATCH.').waitFor();
    // The notice shows as soon as the API answers; the table is redrawn just after it.
    await page.getByRole('row', { name: /SCRATCH/ }).waitFor({ state: 'detached', timeout: 5000 });
    expect(await page.getByRole('row', { name: /SCRATCH/ }).count()).toBe(0);
    expect((await h.api.environmentVariables.list()).map((v) => v.name)).toEqual(['GREETING']);
  });

  it('saves the outbound webhook URL and shows the generated signing secret once', async () => {
    // A loopback URL: the sync runs below deliver their webhooks to it, and tests reach no other host.
    const hookUrl = `${h.fake.url}/hooks/service`;
    await page.getByLabel('Webhook URL').fill(hookUrl);
    await page.getByRole('button', { name: 'Save webhook settings' }).click();
    await page.getByText('The signing secret, shown this once').waitFor();
    expect(await page.getByText('The signing secret, shown this once').locator('code').textContent()).toMatch(/.{16,}/);
    expect(await h.api.webhooks.getSettings()).toEqual({
      url: hookUrl,
      has_secret: true,
    });
    await page.getByLabel('Webhook URL').fill('ftp://files.example.com/hooks');
    await page.getByRole('button', { name: 'Save webhook settings' }).click();
    await page.getByText(/Could not save: Invalid request: body\.url/).waitFor();
    expect((await h.api.webhooks.getSettings()).url).toBe(hookUrl);
  });

  it('runs the sync from the connection page and shows its status change and result', async () => {
    await page.getByRole('link', { name: 'Connections' }).click();
    await page.getByRole('row', { name: /acme/ }).waitFor();
    expect(await page.getByRole('row', { name: /acme/ }).textContent()).toContain('API_KEY');
    await shoot('connections');
    await page.getByRole('link', { name: 'acme' }).click();
    await page.getByRole('heading', { level: 1, name: 'Connection acme' }).waitFor();
    expect(await page.locator('dl.facts').first().textContent()).toContain('subdomain');
    expect(await page.getByLabel('Metadata as JSON').textContent()).toContain('"plan": "enterprise"');
    // Credentials are never shown.
    expect(await page.content()).not.toContain('key-acme');

    const row = page.locator('tr[data-sync="tickets"]');
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 15_000 }).toMatch(/paused|not_started/);
    // The sync's type and its `runs` as service.yaml writes it ("every 5 minutes"), with no second "every".
    expect(await row.locator('th .meta').textContent()).toBe('incremental, every 5 minutes');
    // Every status the row shows, in order, from here on (a string: the test's types have no DOM).
    await page.evaluate(`(() => {
      const target = document.querySelector('tr[data-sync="tickets"]');
      const seen = [target.getAttribute('data-status')];
      window.seenStatuses = seen;
      new MutationObserver(() => {
        const status = target.getAttribute('data-status');
        if (seen.at(-1) !== status) seen.push(status);
      }).observe(target, { attributes: true, attributeFilter: ['data-status'] });
    })()`);

    // Resuming a sync that never ran runs it now.
    await row.getByRole('button', { name: 'Resume sync tickets' }).click();
    await page.getByText('Sync tickets resumed.').waitFor();
    const result = row.locator('td').nth(3);
    await expect
      .poll(() => result.textContent(), { timeout: 45_000 })
      .toBe('Ticket: 12 added, 0 updated, 0 deleted, 0 unchanged');
    await expect.poll(() => row.getAttribute('data-status')).toBe('idle');
    expect(await row.locator('td').nth(4).textContent()).toBe('Ticket: 12');
    const seen = await page.evaluate<string[]>('window.seenStatuses');
    expect(seen[0]).toMatch(/paused|not_started/);
    expect(seen.at(-1)).toBe('idle');

    // Trigger: a second run, which finds every record unchanged.
    const lastRun = row.locator('td').nth(1);
    const firstFinished = await lastRun.locator('time').getAttribute('datetime');
    await row.getByRole('button', { name: 'Trigger sync tickets' }).click();
    await page.getByText('Sync tickets triggered.').waitFor();
    await expect
      .poll(() => lastRun.locator('time').getAttribute('datetime'), { timeout: 45_000 })
      .not.toBe(firstFinished);
    expect(await result.textContent()).toBe('Ticket: 0 added, 0 updated, 0 deleted, 12 unchanged');
    await shoot('connection');
  });

  it('charts the runs of the sync, or says there is no run history', async () => {
    const runs = await apiGet(
      `/sync/runs?provider_config_key=${INTEGRATION}&connection_id=acme&syncs=tickets&limit=30`,
    );
    const slot = page.locator('.chart-slot[data-sync="tickets"]');
    if (runs.status === 404) {
      await slot.getByText('No run history is available from this service yet.').waitFor();
      return;
    }
    expect(runs.status).toBe(200);
    const list = (runs.body['runs'] as ApiRun[]).toSorted((a, b) => a.started_at.localeCompare(b.started_at));
    expect(list.length).toBeGreaterThan(0);
    await expect
      .poll(() => slot.locator('figcaption').textContent())
      .toMatch(new RegExp(`^tickets: ${list.length} recent runs?, 0 failed$`));
    // Each run as the plots show it when pointed at: the API's numbers, oldest first.
    for (const [index, run] of list.entries()) {
      const seen = await pointAtRun(index, list.length);
      const sum = (kind: 'added' | 'updated' | 'deleted') =>
        String(Object.values(run.models).reduce((total, counts) => total + counts[kind], 0));
      expect(seen.legends[1]).toMatchObject({ Added: sum('added'), Updated: sum('updated'), Deleted: sum('deleted') });
      expect(seen.detail).toContain('succeeded');
    }
    const hrefs = await tableLinks();
    expect(hrefs).toHaveLength(list.length);
    expect(hrefs[0]).toMatch(new RegExp(`^${TEMPORAL_UI}/namespaces/${stack().temporalNamespace}/workflows/.+`));
  });

  it('draws the runs chart from runs in the shape of GET /sync/runs: bars, failures, Temporal links', async () => {
    // The drawing code on its own, in the browser, with two runs as the API describes them: this
    // checks the picture whether or not the service serves run history yet.
    const started = Date.now() - 120_000;
    const runs: ApiRun[] = [
      {
        run_id: 'sync-run-ok',
        sync: 'tickets',
        connection_id: 'acme',
        started_at: new Date(started).toISOString(),
        finished_at: new Date(started + 1500).toISOString(),
        duration_ms: 1500,
        status: 'success',
        models: { Ticket: { added: 12, updated: 0, deleted: 0 } },
        error: null,
      },
      {
        run_id: 'sync-run-failed',
        sync: 'tickets',
        connection_id: 'acme',
        started_at: new Date(started + 60_000).toISOString(),
        finished_at: new Date(started + 63_000).toISOString(),
        duration_ms: 3000,
        status: 'failed',
        models: { Ticket: { added: 0, updated: 4, deleted: 2 } },
        error: { code: 'http_status_error', message: 'GET /tickets answered 503' },
      },
    ];
    // Newest first, as the API answers: the chart orders them itself.
    await page.evaluate(
      `(async (runs) => {
        const { runsChart } = await import('./js/chart.js');
        const config = await (await fetch('config.json')).json();
        const slot = document.querySelector('.chart-slot[data-sync="tickets"]');
        slot.replaceChildren(runsChart({ runs, syncName: 'tickets', config }));
      })(${JSON.stringify([...runs].reverse())})`,
    );
    const slot = page.locator('.chart-slot[data-sync="tickets"]');
    expect(await slot.locator('figcaption').textContent()).toBe('tickets: 2 recent runs, 1 failed');
    expect(await slot.locator('.u-title').allTextContents()).toEqual(['Duration', 'Records added, updated, deleted']);

    const ok = await pointAtRun(0, 2);
    expect(ok.legends).toEqual([
      { Run: expect.stringMatching(/\d/), Duration: '1.5 s', 'Failed run (✕)': '—' },
      { Run: expect.stringMatching(/\d/), Deleted: '0', Updated: '0', Added: '12' },
    ]);
    expect(ok.detail).toMatch(/succeeded, duration 1\.5 s, 12 added, 0 updated, 0 deleted\. Click to open it/);
    const failed = await pointAtRun(1, 2);
    expect(failed.legends).toEqual([
      { Run: expect.stringMatching(/\d/), Duration: '—', 'Failed run (✕)': '3.0 s' },
      { Run: expect.stringMatching(/\d/), Deleted: '2', Updated: '4', Added: '0' },
    ]);
    expect(failed.detail).toContain('failed: http_status_error: GET /tickets answered 503, duration 3.0 s');

    // The bars as drawn on the canvas: their heights follow the durations (1.5 s is half of 3 s).
    const heights = await page.evaluate<{ height: number; colour: string }[]>(`(() => {
      const canvas = document.querySelector('.chart-slot[data-sync="tickets"] canvas');
      const ctx = canvas.getContext('2d');
      const over = canvas.parentElement.querySelector('.u-over');
      const frame = canvas.getBoundingClientRect();
      const scale = canvas.width / frame.width;
      const box = over.getBoundingClientRect();
      const left = (box.left - frame.left) * scale;
      const bottom = Math.floor((box.bottom - frame.top) * scale) - 1;
      const width = box.width * scale;
      return [0, 1].map((index) => {
        const x = Math.round(left + ((index + 0.5) / 2) * width);
        const column = ctx.getImageData(x, 0, 1, bottom + 1).data;
        const at = (y) => [column[y * 4], column[y * 4 + 1], column[y * 4 + 2]];
        const base = at(bottom);
        let top = bottom;
        // Up from the baseline while the pixel has the bar's colour.
        while (top > 0 && at(top - 1).every((value, i) => Math.abs(value - base[i]) < 8)) top -= 1;
        return { height: bottom - top + 1, colour: base.join(',') };
      });
    })()`);
    const [okBar, failedBar] = heights;
    expect(okBar?.colour).not.toBe(failedBar?.colour); // a failed run is red, and marked ✕
    expect(okBar!.height / failedBar!.height).toBeCloseTo(0.5, 1);

    // The table lists the same runs, newest first, each with its Temporal link.
    const rows = await slot.locator('table.list tbody tr').allTextContents();
    expect(rows[0]).toContain('http_status_error: GET /tickets answered 503');
    const ns = stack().temporalNamespace;
    expect(await tableLinks()).toEqual([
      `${TEMPORAL_UI}/namespaces/${ns}/workflows/sync-run-failed`,
      `${TEMPORAL_UI}/namespaces/${ns}/workflows/sync-run-ok`,
    ]);
    await page.locator('.charts').scrollIntoViewIfNeeded();
    await shoot('chart');

    // Clicking a run opens its workflow in the Temporal Web UI (answered here by the browser itself).
    await context.route(`${TEMPORAL_UI}/**`, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: '<title>Temporal</title>' }),
    );
    try {
      const over = slot.locator('.u-over').first();
      await over.scrollIntoViewIfNeeded();
      const box = await over.boundingBox();
      if (!box) throw new Error('the duration plot is not shown');
      const [popup] = await Promise.all([
        context.waitForEvent('page'),
        page.mouse.click(box.x + box.width * 0.75, box.y + box.height - 3),
      ]);
      await popup.waitForURL(`${TEMPORAL_UI}/namespaces/${ns}/workflows/sync-run-failed`);
      await popup.close();
    } finally {
      await context.unroute(`${TEMPORAL_UI}/**`);
    }
  });

  it('browses the records, which carry the variable the script read, page by page and by filter', async () => {
    await page.getByRole('link', { name: 'Browse records' }).click();
    await page.getByRole('heading', { level: 1, name: 'Records' }).waitFor();
    await page.getByLabel('Page size').selectOption('10');
    await page.getByRole('button', { name: 'Show records' }).click();
    await page.getByRole('heading', { name: /Records 1–10/ }).waitFor();
    const table = page.locator('table.records tbody');
    expect(await table.locator('tr').count()).toBe(10);
    expect(await table.locator('tr').first().textContent()).toContain('hello-from-dashboard');
    expect(await table.textContent()).toContain('added');
    await shoot('records');

    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByRole('heading', { name: /Records 11–12/ }).waitFor();
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    const ids = await table.locator('th code').allTextContents();
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByRole('heading', { name: /Records 1–10/ }).waitFor();
    const firstIds = await table.locator('th code').allTextContents();
    expect([...firstIds, ...ids].sort()).toEqual(TICKETS.map((t) => t.id));

    await page.getByLabel('deleted').check();
    await page.getByRole('button', { name: 'Show records' }).click();
    await page.getByRole('heading', { name: 'No records' }).waitFor();
    expect(page.url()).toContain('filter=deleted');
  });

  it('finds the log lines of the run by text, level, sync and run', async () => {
    await page.getByRole('link', { name: 'Logs' }).click();
    await page.getByRole('heading', { level: 1, name: 'Logs' }).waitFor();
    await page.getByLabel('Text').fill('tickets greeting');
    await page.getByLabel('Sync or action').fill('tickets');
    await page.getByRole('button', { name: 'Search' }).click();
    // One line per run: the resume's and the trigger's.
    await page.getByRole('heading', { name: '2 log lines' }).waitFor();
    const messages = await page.locator('table.logs tbody td.message').allTextContents();
    expect(messages).toEqual([
      'saved 12 tickets greeting hello-from-dashboard',
      'saved 12 tickets greeting hello-from-dashboard',
    ]);
    // Each line links to its run in the Temporal Web UI.
    const runLinks = await Promise.all(
      (await page.locator('table.logs a.temporal-link').all()).map((link) => link.getAttribute('href')),
    );
    expect(runLinks).toHaveLength(2);
    for (const href of runLinks)
      expect(href).toMatch(new RegExp(`^${TEMPORAL_UI}/namespaces/${stack().temporalNamespace}/workflows/.+`));
    await shoot('logs');

    await page.getByLabel('Level').selectOption('error');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('heading', { name: 'No log lines match' }).waitFor();

    // A run id links to every line of that run.
    await page.getByLabel('Level').selectOption('');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('table.logs tbody tr td a code').first().click();
    await page.getByRole('heading', { name: '1 log line' }).waitFor();
    expect(await page.getByLabel('Run id').inputValue()).toMatch(/.+/);
  });

  it('edits the variable and a full resync rewrites every record with the new value; pause and resume', async () => {
    await page.getByRole('link', { name: 'Environment settings' }).click();
    const row = page.getByRole('row', { name: /GREETING/ });
    await row.getByRole('button', { name: 'Edit GREETING' }).click();
    await page.getByLabel('New value of GREETING').fill('second-greeting');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Saved GREETING.').waitFor();

    await page.goto(`${baseUrl}/dashboard/#/connections/${INTEGRATION}/acme`);
    const syncRow = page.locator('tr[data-sync="tickets"]');
    await syncRow.getByRole('button', { name: 'Full resync sync tickets' }).click();
    await page.getByText('Sync tickets fully resynced.').waitFor();
    await expect
      .poll(() => syncRow.locator('td').nth(3).textContent(), { timeout: 45_000 })
      .toBe('Ticket: 0 added, 12 updated, 0 deleted, 0 unchanged');

    // Pause: no next run until resumed; the Temporal workflow agrees.
    await syncRow.getByRole('button', { name: 'Pause sync tickets' }).click();
    await expect.poll(() => syncRow.getAttribute('data-status')).toBe('paused');
    expect(await syncRow.locator('td').nth(2).textContent()).toBe('paused');
    expect(await syncRow.getByRole('button', { name: 'Pause sync tickets' }).isDisabled()).toBe(true);
    const paused = await h.api.syncs.status({
      provider_config_key: INTEGRATION,
      connection_id: 'acme',
      syncs: ['tickets'],
    });
    expect(paused.syncs[0]?.status).toBe('PAUSED');
    await syncRow.getByRole('button', { name: 'Resume sync tickets' }).click();
    await expect.poll(() => syncRow.getAttribute('data-status')).toBe('idle');
    expect(await syncRow.locator('td').nth(2).locator('time').count()).toBe(1);

    await page.goto(
      `${baseUrl}/dashboard/#/records?integration=${INTEGRATION}&connection=acme&model=Ticket&filter=updated&limit=50`,
    );
    await page.getByRole('heading', { name: /Records 1–12/ }).waitFor();
    const cells = await page.locator('table.records tbody tr').allTextContents();
    expect(cells.every((text) => text.includes('second-greeting') && text.includes('updated'))).toBe(true);
  });

  it('rotates the secret key: the dashboard keeps working with the new key, the old one is refused', async () => {
    await page.getByRole('link', { name: 'Environment settings' }).click();
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Rotate secret key' }).click();
    await page.getByText('New secret key shown above').waitFor();
    const newKey = await page.locator('#secret-key-value').textContent();
    expect(newKey).toMatch(/^sk_/);
    expect(newKey).not.toBe(secretKey);
    expect((await apiGet('/environment-variables')).status).toBe(401);
    secretKey = newKey ?? '';
    expect((await apiGet('/environment-variables')).status).toBe(200);
    await page.getByRole('link', { name: 'Integrations' }).click();
    await page.getByRole('link', { name: INTEGRATION, exact: true }).waitFor();
  });

  it('is usable from the keyboard: a skip link first, then the navigation', async () => {
    await page.goto(`${baseUrl}/dashboard/#/integrations`);
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
    // From the top of the page (a click on the header's name), Shift+Tab reaches the skip link first.
    await page.locator('.brand').click();
    await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Integrations');
    expect(await page.evaluate('document.activeElement?.tagName')).toBe('H1');
    expect(page.url()).toContain('#/integrations');
    await page.locator('.brand').click();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Integrations');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Connections' }).waitFor();
    // The new page's heading has the focus, so a screen reader starts there.
    await expect.poll(() => page.evaluate('document.activeElement?.tagName')).toBe('H1');
  });

  it('signs out: the key leaves the tab and the pages ask for it again', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    expect(await page.getByRole('navigation', { name: 'Main' }).isHidden()).toBe(true);
    await page.goto(`${baseUrl}/dashboard/#/records`);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  });

  it('marks a connection that needs re-auth in the list and on its page', async () => {
    const scope = [h.envA.id, INTEGRATION, 'acme'];
    // As a refused token refresh leaves it (src/connections/connectionService.ts recordFailure).
    await h.pool.query(
      `UPDATE connections SET refresh_error_code = 'invalid_grant', refresh_error_message = 'the token endpoint answered 400 invalid_grant',
         refresh_error_at = now(), refresh_error_permanent = true
       WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3`,
      scope,
    );
    try {
      await page.getByLabel('Environment secret key').fill(secretKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1 }).waitFor();
      await page.goto(`${baseUrl}/dashboard/#/connections`);
      await page.getByRole('row', { name: /acme/ }).waitFor();
      expect(await page.getByRole('row', { name: /acme/ }).textContent()).toContain('Needs re-auth');
      await page.getByRole('link', { name: 'acme' }).click();
      await page.getByRole('heading', { level: 1, name: 'Connection acme' }).waitFor();
      const alert = page.locator('[data-needs-reauth]');
      expect(await alert.textContent()).toContain('Needs re-auth');
      expect(await alert.getAttribute('role')).toBe('alert');
      await shoot('connection-needs-reauth');
    } finally {
      await h.pool.query(
        `UPDATE connections SET refresh_error_code = NULL, refresh_error_message = NULL, refresh_error_at = NULL, refresh_error_permanent = false
         WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3`,
        scope,
      );
    }
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  });

  it('manages environments when signed in with the service admin key, and shows no environment’s data', async () => {
    await page.getByLabel('Environment secret key').fill(h.adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Environments' }).waitFor();
    await page.getByText('Service admin', { exact: true }).waitFor();
    // Only the Environments page: the environment pages are not offered, nor reachable by link.
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.getByRole('link').allTextContents()).toEqual(['Environments']);
    await page.goto(`${baseUrl}/dashboard/#/records`);
    await page.getByRole('heading', { level: 1, name: 'Environments' }).waitFor();
    await page.locator('tr[data-environment="env-a"]').waitFor();

    await page.getByLabel('New environment name').fill('staging-ui');
    await page.getByRole('button', { name: 'Create environment' }).click();
    await page.locator('tr[data-environment="staging-ui"]').waitFor();
    const created = (await page.locator('#new-key code.secret-key').textContent()) ?? '';
    expect(created).toMatch(/^sk_/);
    expect((await apiGet('/environment-variables', created)).status).toBe(200);
    await shoot('environments');

    const row = () => page.locator('tr[data-environment="staging-ui"], tr[data-environment="qa-ui"]');
    await row().getByRole('button', { name: 'Rename' }).click();
    await page.getByLabel('New name of staging-ui').fill('qa-ui');
    await page.getByRole('button', { name: 'Save name' }).click();
    await page.locator('tr[data-environment="qa-ui"]').waitFor();
    await page.getByText('Renamed staging-ui to qa-ui.').waitFor();

    page.once('dialog', (dialog) => void dialog.accept());
    await row().getByRole('button', { name: 'Rotate key' }).click();
    // In the key notice (the screen-reader announcer repeats the sentence a moment later).
    await page.locator('#new-key').getByText('Rotated the key of qa-ui.').waitFor();
    const rotated = (await page.locator('#new-key code.secret-key').textContent()) ?? '';
    expect(rotated).toMatch(/^sk_/);
    expect(rotated).not.toBe(created);
    expect((await apiGet('/environment-variables', created)).status).toBe(401);
    expect((await apiGet('/environment-variables', rotated)).status).toBe(200);

    page.once('dialog', (dialog) => void dialog.accept());
    await row().getByRole('button', { name: 'Delete' }).click();
    await page.getByText('Deleted qa-ui.').waitFor();
    // The notice comes before the list is loaded again: wait for the row to go.
    await row().waitFor({ state: 'detached' });
    expect(await row().count()).toBe(0);
    expect((await apiGet('/environment-variables', rotated)).status).toBe(401);

    // An environment with connections is refused, with the reason, and stays.
    page.once('dialog', (dialog) => void dialog.accept());
    await page.locator('tr[data-environment="env-a"]').getByRole('button', { name: 'Delete' }).click();
    await page.getByText(/Could not delete env-a: .*still has 1 connection/).waitFor();
    expect((await apiGet('/environment-variables')).status).toBe(200);
    // The admin key itself opens no environment's data.
    expect((await apiGet('/connections', h.adminKey)).status).toBe(401);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
  });
});

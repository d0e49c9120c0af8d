/**
 * Bad input is a 400 (or a 404 for what cannot exist) when it arrives, never a 500 then or later
 * (issue 29, finding 8; each found by hand or by schemathesis, test/api/schemathesis.test.ts):
 * - `provider_settings.base_url` that is not a URL (`http://[fe80::1%25lo]:80`) was stored, and every
 *   proxied request of the integration answered 500 "Invalid URL";
 * - a deployment version past Postgres's integer range (`GET /deployments/2147483648`, `/request`,
 *   `/redeploy`) answered 500;
 * - a page of connections whose offset overflows a bigint (`GET /connections?page=6402373705728000&limit=8902`).
 */
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, type ApiHarness } from '../kit/index.js';
import { deployWithConnection } from '../kit/api.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';

/** The API with the fixture deployment and one connection. */
const it = kit.extend<{ api: ApiHarness }>({
  api: [
    async ({ db, upstream }, use) =>
      withApiHarness({ database: db, upstream }, use, async (h) => {
        await deployWithConnection(h, 'bounds-key-1f9d3a');
      }),
    { scope: 'file' },
  ],
});

const statusOf = (response: { status: number }) => response.status;

describe('bad input is refused when it arrives', () => {
  it('a base_url that is not a URL is a 400 naming the field, and proxied requests never answer 500', async ({
    api: h,
  }) => {
    const saved = await h.api.raw('PATCH', `/integrations/${INTEGRATION}`, {
      body: { provider: PROVIDER, provider_settings: { base_url: 'http://[fe80::1%25lo]:80' } },
    });
    const proxied = await h.api.raw('GET', '/proxy/anything', {
      headers: { 'connection-id': 'c1', 'provider-config-key': INTEGRATION },
    });
    expect(proxied.status).toBeLessThan(500);
    expect(saved.status).toBe(400);
    expect(JSON.stringify(saved.json)).toMatch(/invalid_provider_settings.*base_url/);
    for (const base of ['not a url', 'ftp://example.com', 'http://exa mple.com', 'https://']) {
      const again = await h.api.raw('PATCH', `/integrations/${INTEGRATION}`, {
        body: { provider: PROVIDER, provider_settings: { base_url: base } },
      });
      expect(again.status, base).toBe(400);
    }
  });

  it('a deployment version past the integer range is a 404 or a 400, on every route that takes one', async ({
    api: h,
  }) => {
    for (const version of ['2147483648', '9007199254740990', '1e30']) {
      expect(statusOf(await h.api.raw('GET', `/deployments/${version}`)), version).toBeLessThan(500);
      expect(statusOf(await h.api.raw('GET', `/deployments/${version}/request`)), version).toBeLessThan(500);
      expect(statusOf(await h.api.raw('POST', `/deployments/${version}/redeploy`)), version).toBeLessThan(500);
    }
    expect(statusOf(await h.api.raw('GET', '/deployments/2147483647'))).toBe(404);
    expect(statusOf(await h.api.raw('GET', '/deployments/1'))).toBe(200);
  });

  it('a page of connections past any offset Postgres can count is a 400 (schemathesis: page 6.4e15 of 8902)', async ({
    api: h,
  }) => {
    expect(
      statusOf(await h.api.raw('GET', '/connections', { query: { page: '6402373705728000', limit: '8902' } })),
    ).toBe(400);
    expect(statusOf(await h.api.raw('GET', '/connections', { query: { page: '1000000', limit: '10000' } }))).toBe(200);
  });
});

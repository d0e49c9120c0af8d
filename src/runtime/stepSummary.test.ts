import { describe, expect, it } from 'vitest';
import { requestSummary, scrubbed } from './stepSummary.js';

describe('requestSummary', () => {
  it('names a request by method, path and query', () => {
    expect(requestSummary('GET', '/issues', { page: 3, state: 'open' })).toBe('GET /issues?page=3&state=open');
    expect(requestSummary('POST', '/repos/acme/api/issues', undefined)).toBe('POST /repos/acme/api/issues');
    expect(requestSummary('GET', '/items/3f2b8c1e-9a4d-4c7e-8f00-1234567890ab', {})).toBe(
      'GET /items/3f2b8c1e-9a4d-4c7e-8f00-1234567890ab',
    );
  });

  it('redacts values named like credentials, in params and in the endpoint', () => {
    const names = ['api_key', 'access_token', 'client_secret', 'password', 'Authorization', 'sig', 'code', 'session'];
    for (const name of names) {
      expect(requestSummary('GET', '/x', { [name]: 'hunter2' })).toBe(`GET /x?${name}=…`);
      expect(requestSummary('GET', `/x?${name}=hunter2&page=2`, undefined)).toBe(`GET /x?${name}=…&page=2`);
    }
  });

  it('redacts long opaque values and path segments, and user info of an absolute URL', () => {
    const token = 'a'.repeat(20) + '0123456789'.repeat(3);
    expect(requestSummary('GET', `/bot${token}/getUpdates`, { cursor: token })).toBe('GET /…/getUpdates?cursor=…');
    expect(requestSummary('GET', 'https://user:pa55@api.example.com/v1/me', undefined)).toBe(
      'GET https://…@api.example.com/v1/me',
    );
  });

  it('stays short', () => {
    const summary = requestSummary(
      'GET',
      '/search',
      Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`f${i}`, i])),
    );
    expect(summary.length).toBeLessThanOrEqual(200);
    expect(summary.endsWith('…')).toBe(true);
  });
});

// HOSTILE s25: what the redaction missed before (each of these was in clear in the history).
describe('requestSummary against credentials it did not know by name', () => {
  const APPID = '9f8e7d6c5b4a39281706f5e4d3c2b1a0'; // OpenWeatherMap: `appid` is the API key
  const SLACK = 'aB3dE6gH9jK2mN5pQ8sT1vW4'; // the secret segment of a Slack incoming-webhook URL
  const PAT = 'ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ'; // 40 characters: was exactly short enough

  it('redacts token-like path segments and values, whatever their name', () => {
    expect(requestSummary('GET', '/data/2.5/weather', { q: 'London', appid: APPID })).toBe(
      'GET /data/2.5/weather?q=London&appid=…',
    );
    expect(requestSummary('POST', `https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/${SLACK}`, undefined)).toBe(
      'POST https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/…',
    );
    expect(requestSummary('GET', `/user/${PAT}`, { x: PAT })).toBe('GET /user/…?x=…');
    expect(requestSummary('GET', '/login', { user: 'bob', pwd: 'hunter2' })).toBe('GET /login?user=bob&pwd=…');
  });

  it('redacts a credential in a name, a percent-encoded name and a fragment', () => {
    expect(requestSummary('GET', `/x?${PAT}`, undefined)).toBe('GET /x?…');
    expect(requestSummary('GET', '/x', { [APPID]: 1 })).toBe('GET /x?…=1');
    expect(requestSummary('GET', '/x?%6Bey=hunter2', undefined)).toBe('GET /x?%6Bey=…');
    expect(requestSummary('GET', '/cb#access_token=hunter2', undefined)).toBe('GET /cb#…');
  });

  it('keeps what is plainly not a credential readable', () => {
    expect(requestSummary('GET', '/issues', { since: '2026-11-20T10:00:00Z', per_page: 100 })).toBe(
      'GET /issues?since=2026-11-20T10:00:00Z&per_page=100',
    );
    expect(requestSummary('GET', '/repos/acme/api/issues/12345', { state: 'open' })).toBe(
      'GET /repos/acme/api/issues/12345?state=open',
    );
  });
});

describe('scrubbed (every readable summary passes through it)', () => {
  it('redacts token-like words of any summary and bounds its length', () => {
    expect(scrubbed('triggerAction sk_live_51HgQ2xKz9Yq8Lm3N')).toBe('triggerAction …');
    expect(scrubbed(`triggerAction ${'a'.repeat(5000)}`)).toBe('triggerAction …');
    expect(scrubbed(`triggerAction ${'word '.repeat(1000)}`).length).toBeLessThanOrEqual(200);
    expect(scrubbed('batchSave Issue ×3')).toBe('batchSave Issue ×3');
    expect(scrubbed('GET /issues?page=1&api_key=…')).toBe('GET /issues?page=1&api_key=…');
    expect(scrubbed('loadScript 0123456789ab')).toBe('loadScript 0123456789ab');
  });
});

import { describe, expect, it } from 'vitest';
import { requestSummary } from './stepSummary.js';

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

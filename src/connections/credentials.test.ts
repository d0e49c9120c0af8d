/**
 * What is shown and redacted of credentials, and when the background refresher should renew them,
 * without a database.
 */
import { describe, expect, it } from 'vitest';
import {
  credentialSecretForms,
  credentialsSchema,
  publicCredentials,
  renewableAt,
  type StoredCredentials,
} from './credentials.js';

const now = new Date('2026-06-01T12:00:00.000Z');
const oauth2: StoredCredentials = {
  type: 'OAUTH2',
  access_token: 'access-1',
  refresh_token: 'refresh-1',
  expires_at: '2026-06-01T13:00:00.000Z',
  raw: { access_token: 'access-1', refresh_token: 'refresh-1', scope: 'repo' },
};
const privateKey = '-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----';

describe('credentials', () => {
  it('leave the refresh token out unless asked for, in raw too (SPEC.md "Authentication" 5)', () => {
    const shown = publicCredentials(oauth2, false);
    expect(JSON.stringify(shown)).not.toContain('refresh-1');
    expect(shown).toEqual({
      type: 'OAUTH2',
      access_token: 'access-1',
      expires_at: '2026-06-01T13:00:00.000Z',
      raw: { access_token: 'access-1', scope: 'repo' },
    });
    expect(publicCredentials(oauth2, true)).toMatchObject({
      refresh_token: 'refresh-1',
      raw: { refresh_token: 'refresh-1' },
    });
  });

  it('never show the long-lived secret of a minted kind, only its token', () => {
    const jwt: StoredCredentials = {
      type: 'JWT',
      client_email: 'svc@example.com',
      private_key: privateKey,
      access_token: 't-1',
    };
    expect(publicCredentials(jwt, true)).toEqual({
      type: 'JWT',
      client_email: 'svc@example.com',
      access_token: 't-1',
      raw: {},
    });
    const cc: StoredCredentials = { type: 'OAUTH2_CC', client_id: 'id-1', client_secret: 'secret-1' };
    expect(publicCredentials(cc, true)).toEqual({ type: 'OAUTH2_CC', client_id: 'id-1', access_token: '', raw: {} });
    // …but redact it, with the integration's client secret where the kind uses one.
    expect(credentialSecretForms(cc, 'client-secret-x')).toContain('secret-1');
    expect(credentialSecretForms(oauth2, 'client-secret-x')).toEqual(
      expect.arrayContaining(['access-1', 'refresh-1', 'client-secret-x']),
    );
  });

  it('are renewable at the expiry of what the service can renew itself, now for a minted kind without a token', () => {
    expect(renewableAt(oauth2, now)).toEqual(new Date('2026-06-01T13:00:00.000Z'));
    const { refresh_token: _r, ...withoutRefresh } = oauth2;
    expect(renewableAt(withoutRefresh, now)).toBeNull();
    expect(renewableAt({ type: 'APP', app_id: 'app-1', private_key: privateKey }, now)).toEqual(now);
    expect(renewableAt({ type: 'API_KEY', apiKey: 'k' }, now)).toBeNull();
  });

  it('are refused in a shape no kind has, and a private key that is not PEM', () => {
    expect(credentialsSchema.safeParse({ type: 'API_KEY', apiKey: 'k', extra: 1 }).success).toBe(false);
    expect(credentialsSchema.safeParse({ type: 'OAUTH2', access_token: 't', expires_at: 'tomorrow' }).success).toBe(
      false,
    );
    expect(credentialsSchema.safeParse({ type: 'APP', app_id: 'a', private_key: 'not a key' }).success).toBe(false);
    expect(credentialsSchema.safeParse({ type: 'APP', app_id: 'a', private_key: privateKey }).success).toBe(true);
  });
});

/**
 * A connection's credentials: their schemas (as stored and as imported), which kinds carry a token the
 * service renews, what a script or the API is shown of them, and every value to redact. Pure: no
 * database, no clock of its own.
 */
import { z } from 'zod';
import type { Credentials } from '../runtime/public.js';
import { secretForms } from '../runtime/redaction.js';
import { connectionTagsSchema } from './tags.js';
import type { MintedToken } from './tokenGrants.js';

/** SPEC.md "Limits": a token expiring within this window is refreshed. */
export const REFRESH_WINDOW_MS = 15 * 60 * 1000;

export const connectionIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9._@+=-]{1,255}$/, 'letters, digits and . _ @ + = -, 1 to 255 characters');

const isoTimestamp = z.iso.datetime({ offset: true });
/** A connection's metadata, and the `raw` token response of a credential. */
export const jsonObject = z.record(z.string(), z.unknown());

/** The token the service obtained last for a minted kind: absent until the first one. */
const mintedTokenFields = {
  access_token: z.string().min(1).optional(),
  expires_at: isoTimestamp.optional(),
  raw: jsonObject.optional(),
};
const privateKeyField = z
  .string()
  .max(16_384)
  .refine((text) => text.includes('PRIVATE KEY-----'), {
    error: 'a PEM private key, from -----BEGIN PRIVATE KEY----- to -----END PRIVATE KEY-----',
  });

/** Credentials as stored (and as imported): the refresh token is always kept here. */
export const credentialsSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('OAUTH2'),
      access_token: z.string().min(1),
      refresh_token: z.string().min(1).optional(),
      expires_at: isoTimestamp.optional(),
      raw: jsonObject.default({}),
    })
    .strict(),
  z
    .object({
      type: z.literal('OAUTH1'),
      oauth_token: z.string().min(1),
      oauth_token_secret: z.string().min(1),
      raw: jsonObject.default({}),
    })
    .strict(),
  z.object({ type: z.literal('API_KEY'), apiKey: z.string().min(1) }).strict(),
  z.object({ type: z.literal('BASIC'), username: z.string().min(1), password: z.string() }).strict(),
  z
    .object({
      type: z.literal('OAUTH2_CC'),
      client_id: z.string().min(1).max(1024),
      client_secret: z.string().min(1).max(4096),
      ...mintedTokenFields,
    })
    .strict(),
  z
    .object({
      type: z.literal('JWT'),
      client_email: z.string().min(1).max(1024),
      private_key: privateKeyField,
      private_key_id: z.string().min(1).max(256).optional(),
      subject: z.string().min(1).max(1024).optional(),
      ...mintedTokenFields,
    })
    .strict(),
  z
    .object({
      type: z.literal('APP'),
      app_id: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'the app id (or client id) of the app'),
      private_key: privateKeyField,
      ...mintedTokenFields,
    })
    .strict(),
]);
export type StoredCredentials = z.infer<typeof credentialsSchema>;
export type OAuth2Credentials = Extract<StoredCredentials, { type: 'OAUTH2' }>;
export type MintedCredentials = Extract<StoredCredentials, { type: 'OAUTH2_CC' | 'JWT' | 'APP' }>;
/** Credentials with an access token that expires: refreshed (OAuth 2) or minted again (the others). */
export type TokenCredentials = OAuth2Credentials | MintedCredentials;

export const importConnectionInput = z
  .object({
    environmentId: z.string().min(1),
    integrationId: z.string().min(1),
    connectionId: connectionIdSchema,
    credentials: credentialsSchema,
    connection_config: z.record(z.string().max(128), z.string().max(2048)).optional(),
    metadata: jsonObject.optional(),
    /** Replaces the connection's tags when given; kept otherwise. */
    tags: connectionTagsSchema.optional(),
  })
  .strict();
export type ImportConnectionInput = z.input<typeof importConnectionInput>;

export function isMinted(credentials: StoredCredentials): credentials is MintedCredentials {
  return credentials.type === 'OAUTH2_CC' || credentials.type === 'JWT' || credentials.type === 'APP';
}

export function hasToken(credentials: StoredCredentials): credentials is TokenCredentials {
  return credentials.type === 'OAUTH2' || isMinted(credentials);
}

/** Whether the token must be renewed before use: none yet, or it expires within `windowMs` of `now`. */
export function expiresSoon(credentials: TokenCredentials, now: Date, windowMs = REFRESH_WINDOW_MS): boolean {
  if (credentials.access_token === undefined) return true;
  if (credentials.expires_at === undefined) return false;
  return Date.parse(credentials.expires_at) - now.getTime() < windowMs;
}

/** Whether the credentials hold a token that has not expired at `now` (an unreachable provider leaves it in use). */
export function hasUsableToken(credentials: StoredCredentials, now: Date): boolean {
  return (
    hasToken(credentials) &&
    credentials.access_token !== undefined &&
    (credentials.expires_at === undefined || Date.parse(credentials.expires_at) > now.getTime())
  );
}

/**
 * When the background refresher should renew these credentials (the `credentials_expires_at` column):
 * the token's expiry for what the service can renew by itself, now for a minted kind without a token
 * yet, null otherwise (an OAuth 2 token without a refresh token or an expiry, the other kinds).
 */
export function renewableAt(credentials: StoredCredentials, now: Date): Date | null {
  if (isMinted(credentials)) {
    if (credentials.access_token === undefined) return now;
    return credentials.expires_at === undefined ? null : new Date(credentials.expires_at);
  }
  if (
    credentials.type === 'OAUTH2' &&
    credentials.refresh_token !== undefined &&
    credentials.expires_at !== undefined
  ) {
    return new Date(credentials.expires_at);
  }
  return null;
}

/** The minted credentials with `token` in place of the one they held. */
export function withToken<T extends MintedCredentials>(credentials: T, token: MintedToken): T {
  const { expires_at: _previous, ...rest } = credentials;
  return {
    ...rest,
    access_token: token.access_token,
    ...(token.expires_at === undefined ? {} : { expires_at: token.expires_at }),
    raw: token.raw,
  } as T;
}

/**
 * Every credential value in the forms it can be echoed in (src/runtime/redaction.ts), with the
 * integration's OAuth client secret where the kind uses one.
 */
export function credentialSecretForms(credentials: StoredCredentials, clientSecret: string | undefined): string[] {
  switch (credentials.type) {
    case 'OAUTH2':
      return secretForms([credentials.access_token, credentials.refresh_token, clientSecret]);
    case 'OAUTH1':
      return secretForms([credentials.oauth_token, credentials.oauth_token_secret, clientSecret]);
    case 'API_KEY':
      return secretForms([credentials.apiKey]);
    case 'BASIC':
      return secretForms([credentials.password, `${credentials.username}:${credentials.password}`]);
    case 'OAUTH2_CC':
      return secretForms([credentials.access_token, credentials.client_secret]);
    case 'JWT':
    case 'APP':
      return secretForms([credentials.access_token, credentials.private_key]);
  }
}

/** SPEC.md "Authentication" 5: the refresh token leaves the service only when asked for, in `raw` too. */
export function publicCredentials(credentials: StoredCredentials, includeRefreshToken: boolean): Credentials {
  switch (credentials.type) {
    case 'OAUTH2': {
      const raw = { ...credentials.raw };
      if (!includeRefreshToken) delete raw['refresh_token'];
      return {
        type: 'OAUTH2',
        access_token: credentials.access_token,
        ...(includeRefreshToken && credentials.refresh_token !== undefined
          ? { refresh_token: credentials.refresh_token }
          : {}),
        ...(credentials.expires_at === undefined ? {} : { expires_at: credentials.expires_at }),
        raw,
      };
    }
    case 'OAUTH1':
    case 'API_KEY':
    case 'BASIC':
      return credentials;
    // The long-lived secret (client secret, private key) stays in the service; scripts get the token.
    case 'OAUTH2_CC':
      return { type: 'OAUTH2_CC', client_id: credentials.client_id, ...mintedPublic(credentials) };
    case 'JWT':
      return { type: 'JWT', client_email: credentials.client_email, ...mintedPublic(credentials) };
    case 'APP':
      return { type: 'APP', app_id: credentials.app_id, ...mintedPublic(credentials) };
  }
}

function mintedPublic(credentials: MintedCredentials): {
  access_token: string;
  expires_at?: string;
  raw: Record<string, unknown>;
} {
  return {
    access_token: credentials.access_token ?? '',
    ...(credentials.expires_at === undefined ? {} : { expires_at: credentials.expires_at }),
    raw: credentials.raw ?? {},
  };
}

/**
 * The provider catalog: how to authenticate against each external API and where it lives. The
 * shipped entries are in providers.yaml beside this file, written from each API's public
 * documentation; users add or replace entries with a YAML file of the same shape named by
 * SERVICE_PROVIDERS_FILE, and an integration may override single fields (`provider_settings`).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { z } from 'zod';
import { ServiceError } from '../../errors.js';
import {
  MAX_CONNECTION_SETTINGS,
  MAX_SETTINGS,
  MAX_SETTING_VALUE_LENGTH,
  matchesSettingPattern,
  settingPatternProblem,
  settingsBudgetProblem,
} from './settingPattern.js';
import {
  fillUrlTemplate,
  placeValue,
  secretUrlProblem,
  templateSettings,
  UrlTemplateError,
  urlTemplateProblem,
} from './urlTemplate.js';

export const BUILTIN_PROVIDERS_FILE = join(dirname(fileURLToPath(import.meta.url)), 'providers.yaml');

/**
 * A URL that may hold `${connectionConfig.<name>}` placeholders (src/connections/providers/urlTemplate.ts):
 * an http(s) URL, or one that starts with a placeholder standing for the whole origin, that parses as a
 * URL with sample values (so `http://[fe80::1%25lo]:80` is refused when it is saved, not on every request).
 */
const templatedUrl = z
  .string()
  .min(1)
  .max(2048)
  .superRefine((value, context) => {
    const problem = urlTemplateProblem(value);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
  });

/** A URL that receives a secret (client secret, client id, a signed assertion): its domain is literal. */
const secretUrl = templatedUrl.superRefine((value, context) => {
  if (urlTemplateProblem(value) !== undefined) return;
  const problem = secretUrlProblem(value);
  if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
});

const stringMap = z.record(z.string(), z.string());

/** The URL fields of a provider that may hold `${connectionConfig.<name>}`. */
const URL_FIELDS = ['base_url', 'authorization_url', 'token_url', 'request_token_url', 'access_token_url'] as const;

/** What a setting without a pattern must be: a host name label (or dotted labels). */
const DEFAULT_SETTING_PATTERN = '^[A-Za-z0-9][A-Za-z0-9-]*(\\.[A-Za-z0-9-]+)*$';

const allowedHost = z
  .string()
  .regex(
    /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:\d{1,5})?$/i,
    'a host name, optionally `*.` in front and `:port` after (api.example.com, *.example.com:8443)',
  );

const connectionSetting = z
  .object({
    /** Shown to the end user / API caller. */
    description: z.string().optional(),
    /**
     * A value must match this regular expression (anchored by the author), in RE2 syntax: matched in
     * linear time (settingPattern.ts), refused when saved if RE2 cannot compile it.
     */
    pattern: z
      .string()
      .superRefine((value, context) => {
        const problem = settingPatternProblem(value);
        if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
      })
      .optional(),
    /** Required settings must be given at connect or import; optional ones may be absent. */
    optional: z.boolean().default(false),
  })
  .strict();

/**
 * The provider's default pagination (`svc.paginate` merges a script's `paginate` over it), in the keys
 * of the field's format (src/runtime/public.ts `Pagination`).
 */
const providerPagination = z
  .object({
    type: z.enum(['cursor', 'link', 'offset']),
    limit: z.union([z.number().int().positive(), z.string().min(1)]).optional(),
    limit_name_in_request: z.string().min(1).optional(),
    response_path: z.string().min(1).optional(),
    in_body: z.boolean().optional(),
    cursor_path_in_response: z.string().min(1).optional(),
    cursor_name_in_request: z.string().min(1).optional(),
    link_rel_in_response_header: z.string().min(1).optional(),
    link_path_in_response_body: z.string().min(1).optional(),
    offset_name_in_request: z.string().min(1).optional(),
    offset_start_value: z.number().int().optional(),
    offset_calculation_method: z.enum(['per-page', 'by-response-size']).optional(),
  })
  .strict()
  .refine((value) => value.type !== 'cursor' || (value.cursor_name_in_request && value.cursor_path_in_response), {
    message: 'cursor pagination needs cursor_name_in_request and cursor_path_in_response',
  })
  .refine((value) => value.type !== 'offset' || value.offset_name_in_request, {
    message: 'offset pagination needs offset_name_in_request',
  })
  .refine((value) => value.limit === undefined || value.limit_name_in_request, {
    message: 'limit needs limit_name_in_request',
  });

const commonFields = {
  display_name: z.string().min(1),
  /** Where the provider documents its API; for the reader of the catalog. */
  docs: z.string().url().optional(),
  /** Base URL of the API; may use `${connectionConfig.<name>}`. */
  base_url: templatedUrl.optional(),
  /**
   * Hosts of the API besides the base URL's (an upload host, say): `Base-Url-Override` and
   * `baseUrlOverride` may point there and the connection's credentials go there. `host`, `host:port`
   * or `*.domain`; https, or the base URL's scheme.
   */
  allowed_hosts: z.array(allowedHost).default([]),
  /** Headers every proxied request carries (API version, Accept…); the request's own headers win. */
  headers: stringMap.default({}),
  /** Settings a connection needs, by name, usable in URL templates as `${connectionConfig.<name>}`. */
  connection_config: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), connectionSetting).default({}),
  /** How the provider's list endpoints page, as `svc.paginate`'s default (written from the provider's API docs). */
  paginate: providerPagination.optional(),
};

/** Where the access token goes; default `Authorization: Bearer <token>`. */
const tokenHeader = z
  .object({ name: z.string().min(1), format: z.string().includes('${accessToken}') })
  .strict()
  .default({ name: 'Authorization', format: 'Bearer ${accessToken}' });

const oauth2Provider = z
  .object({
    auth_mode: z.literal('OAUTH2'),
    ...commonFields,
    authorization_url: secretUrl,
    token_url: secretUrl,
    /** Extra query parameters of the authorization URL (access_type=offline, say). */
    authorization_params: stringMap.default({}),
    /** Extra body parameters of the token request (both grants). */
    token_params: stringMap.default({}),
    /** Extra body parameters of the refresh request only. */
    refresh_params: stringMap.default({}),
    /** How the client authenticates at the token endpoint (RFC 6749 section 2.3.1). */
    token_request_auth_method: z.enum(['client_secret_post', 'client_secret_basic']).default('client_secret_post'),
    /** Body encoding of the token request; a few providers document JSON only. */
    token_request_format: z.enum(['form', 'json']).default('form'),
    /** Send an S256 PKCE challenge (RFC 7636). */
    pkce: z.boolean().default(false),
    scope_separator: z.string().default(' '),
    default_scopes: z.array(z.string()).default([]),
    /** Token response fields copied into connection_config after the exchange (instance_url, say). */
    token_response_metadata: z.array(z.string()).default([]),
    /** Where the access token goes; default `Authorization: Bearer <token>`. */
    token_header: tokenHeader,
  })
  .strict();

const oauth1Provider = z
  .object({
    auth_mode: z.literal('OAUTH1'),
    ...commonFields,
    request_token_url: secretUrl,
    authorization_url: secretUrl,
    access_token_url: secretUrl,
    authorization_params: stringMap.default({}),
    signature_method: z.literal('HMAC-SHA1').default('HMAC-SHA1'),
  })
  .strict();

const apiKeyProvider = z
  .object({
    auth_mode: z.literal('API_KEY'),
    ...commonFields,
    /** Where the key goes: a header with a format (`Bearer ${apiKey}`), or a query parameter. */
    api_key: z.discriminatedUnion('in', [
      z.object({ in: z.literal('header'), name: z.string().min(1), format: z.string().includes('${apiKey}') }).strict(),
      z.object({ in: z.literal('query'), name: z.string().min(1) }).strict(),
    ]),
  })
  .strict();

const basicProvider = z.object({ auth_mode: z.literal('BASIC'), ...commonFields }).strict();

/**
 * OAuth 2 client credentials (RFC 6749 section 4.4): each connection holds its own client id and
 * secret (the end user's API client), and the service exchanges them for access tokens.
 */
const clientCredentialsProvider = z
  .object({
    auth_mode: z.literal('OAUTH2_CC'),
    ...commonFields,
    token_url: secretUrl,
    token_params: stringMap.default({}),
    token_request_auth_method: z.enum(['client_secret_post', 'client_secret_basic']).default('client_secret_post'),
    token_request_format: z.enum(['form', 'json']).default('form'),
    scope_separator: z.string().default(' '),
    default_scopes: z.array(z.string()).default([]),
    token_header: tokenHeader,
  })
  .strict();

/**
 * A service account (RFC 7523 section 2.1, Google's "service account" flow): the connection holds a
 * private key; the service signs an RS256 JWT with it (issuer: the account's email, audience: the
 * token URL) and exchanges it at the token URL for an access token.
 */
const jwtProvider = z
  .object({
    auth_mode: z.literal('JWT'),
    ...commonFields,
    token_url: secretUrl,
    /** The JWT's `aud`; default the token URL. */
    audience: z.string().min(1).optional(),
    scope_separator: z.string().default(' '),
    default_scopes: z.array(z.string()).default([]),
    token_header: tokenHeader,
  })
  .strict();

/**
 * App installation tokens (a GitHub App): the connection holds the app's id and private key; the
 * service signs a short-lived app JWT (RS256, issuer: the app id) and POSTs it as a Bearer token to
 * the token URL (which names the installation, `${connectionConfig.installation_id}`), which answers
 * `{ token, expires_at }`.
 */
const appProvider = z
  .object({
    auth_mode: z.literal('APP'),
    ...commonFields,
    token_url: secretUrl,
    /** Headers of the installation token request (GitHub's Accept). */
    token_request_headers: stringMap.default({}),
    token_header: tokenHeader,
  })
  .strict();

export const providerSchema = z.discriminatedUnion('auth_mode', [
  oauth2Provider,
  oauth1Provider,
  apiKeyProvider,
  basicProvider,
  clientCredentialsProvider,
  jwtProvider,
  appProvider,
]);

export type Provider = z.infer<typeof providerSchema>;
export type OAuth2Provider = z.infer<typeof oauth2Provider>;
export type OAuth1Provider = z.infer<typeof oauth1Provider>;
export type ClientCredentialsProvider = z.infer<typeof clientCredentialsProvider>;
export type JwtProvider = z.infer<typeof jwtProvider>;
export type AppProvider = z.infer<typeof appProvider>;
/** The modes whose access tokens the service obtains by itself from stored long-lived secrets. */
export type MintedTokenProvider = ClientCredentialsProvider | JwtProvider | AppProvider;

const providerName = z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'lower-case letters, digits, . _ -');
const catalogSchema = z.record(providerName, providerSchema);

export interface ProviderCatalog {
  /** The provider of this name, or a ServiceError `unknown_provider`. */
  get(name: string): Provider;
  has(name: string): boolean;
  names(): string[];
}

/** Validates catalog entries, naming the source and the first problems of each entry. */
export function parseProviders(raw: unknown, source: string): Record<string, Provider> {
  const parsed = catalogSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
    throw new ServiceError('invalid_provider_catalog', `${source}: ${problems.slice(0, 10).join('; ')}`, {
      details: problems,
    });
  }
  const problems = Object.entries(parsed.data).flatMap(([name, provider]) => {
    const problem = settingsProblem(provider);
    return problem === undefined ? [] : [`${name}: ${problem}`];
  });
  if (problems.length > 0) {
    throw new ServiceError('invalid_provider_catalog', `${source}: ${problems.slice(0, 10).join('; ')}`, {
      details: problems,
    });
  }
  return parsed.data;
}

/** Why checking a connection's settings against this provider would cost too much (settingPattern.ts), or undefined. */
function settingsProblem(provider: Provider): string | undefined {
  const names = new Set(Object.keys(provider.connection_config));
  for (const field of URL_FIELDS) {
    const template = (provider as Partial<Record<(typeof URL_FIELDS)[number], string>>)[field];
    if (template !== undefined) for (const name of templateSettings(template).keys()) names.add(name);
  }
  return settingsBudgetProblem(
    [...names].map((name) => provider.connection_config[name]?.pattern ?? DEFAULT_SETTING_PATTERN),
  );
}

function readProvidersFile(file: string): Record<string, Provider> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ServiceError(
      'invalid_provider_catalog',
      `cannot read providers file ${file}: ${(error as Error).message}`,
    );
  }
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (error) {
    throw new ServiceError('invalid_provider_catalog', `${file} is not valid YAML: ${(error as Error).message}`);
  }
  return parseProviders(raw ?? {}, file);
}

export interface LoadCatalogOptions {
  /** A YAML file of extra providers (same shape as providers.yaml); entries replace built-ins of the same name. */
  extraFile?: string | undefined;
  /** Extra providers given in code (tests, embedding); validated like the files. */
  extra?: Record<string, unknown> | undefined;
}

/** Built-in providers, then `extraFile`'s (the service passes SERVICE_PROVIDERS_FILE: src/service.ts), then `extra`. */
export function loadProviderCatalog(options: LoadCatalogOptions = {}): ProviderCatalog {
  const providers = new Map<string, Provider>(Object.entries(readProvidersFile(BUILTIN_PROVIDERS_FILE)));
  const { extraFile } = options;
  if (extraFile)
    for (const [name, provider] of Object.entries(readProvidersFile(extraFile))) providers.set(name, provider);
  if (options.extra) {
    for (const [name, provider] of Object.entries(parseProviders(options.extra, 'extra providers'))) {
      providers.set(name, provider);
    }
  }
  return {
    get(name) {
      const provider = providers.get(name);
      if (!provider) {
        throw new ServiceError(
          'unknown_provider',
          `provider '${name}' is not in the catalog; see docs/connections.md for adding one`,
        );
      }
      return provider;
    },
    has: (name) => providers.has(name),
    names: () => [...providers.keys()].sort(),
  };
}

/**
 * The provider with an integration's overrides applied (a self-hosted GitLab's URLs, say). The
 * result is validated again, so an override cannot produce an entry the catalog would refuse.
 */
export function withOverrides(provider: Provider, overrides: Record<string, unknown>, integrationId: string): Provider {
  if (Object.keys(overrides).length === 0) return provider;
  // Counted before the schema compiles each pattern (compiling is what a pattern costs).
  const settings = overrides['connection_config'];
  const count = settings !== null && typeof settings === 'object' ? Object.keys(settings).length : 0;
  if (count > MAX_SETTINGS) {
    throw settingsRefused(integrationId, `declares ${count} connection settings, at most ${MAX_SETTINGS} are accepted`);
  }
  const merged = providerSchema.safeParse({ ...provider, ...overrides, auth_mode: provider.auth_mode });
  if (!merged.success) {
    const problems = merged.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ServiceError(
      'invalid_provider_settings',
      `provider_settings of integration '${integrationId}': ${problems.join('; ')}`,
      { details: problems },
    );
  }
  const problem = settingsProblem(merged.data);
  if (problem !== undefined) throw settingsRefused(integrationId, problem);
  return merged.data;
}

function settingsRefused(integrationId: string, problem: string): ServiceError {
  return new ServiceError(
    'invalid_provider_settings',
    `provider_settings of integration '${integrationId}' ${problem}`,
    {
      details: [problem],
    },
  );
}

/**
 * Fills `${connectionConfig.<name>}` placeholders. Each value must match the setting's pattern (or,
 * without one, be a plain host label), and is a value in its position of the URL, never URL syntax
 * (urlTemplate.ts): it fills host labels in front of the template's literal domain, one path
 * segment, or a query value, so no setting (and no pattern an integration sets) can send a URL, and
 * the credentials sent to it, to another host.
 */
export function fillTemplate(
  template: string,
  provider: Provider,
  connectionConfig: Record<string, string>,
  where: string,
): string {
  try {
    return fillUrlTemplate(template, (name) => {
      const value = connectionConfig[name];
      if (value === undefined || value === '') {
        throw new ServiceError(
          'missing_connection_config',
          `${where} needs the connection setting '${name}', which this connection does not have`,
        );
      }
      checkSetting(provider, name, value);
      return value;
    });
  } catch (error) {
    if (error instanceof UrlTemplateError) {
      throw new ServiceError('invalid_connection_config', `${where}: ${error.message}`);
    }
    throw error;
  }
}

/**
 * Checks one setting's value against its pattern (linear time: settingPattern.ts) and, where the
 * provider's URLs use it, against each position it fills (a host label, a path segment…).
 */
export function checkSetting(provider: Provider, name: string, value: string): void {
  const pattern = provider.connection_config[name]?.pattern;
  if (value.length > MAX_SETTING_VALUE_LENGTH) {
    throw new ServiceError(
      'invalid_connection_config',
      `connection setting '${name}' is longer than ${MAX_SETTING_VALUE_LENGTH} characters`,
    );
  }
  let ok: boolean;
  try {
    ok = matchesSettingPattern(pattern ?? DEFAULT_SETTING_PATTERN, value);
  } catch (error) {
    // Saved before patterns were checked when an integration is saved: still the integration's problem.
    throw new ServiceError(
      'invalid_provider_settings',
      `the pattern of connection setting '${name}' ${(error as Error).message}; fix provider_settings.connection_config.${name}.pattern`,
    );
  }
  if (!ok) {
    throw new ServiceError(
      'invalid_connection_config',
      `connection setting '${name}' has a value that does not match ${pattern ?? 'a host name label'}`,
    );
  }
  for (const field of URL_FIELDS) {
    const template = (provider as Partial<Record<(typeof URL_FIELDS)[number], string>>)[field];
    if (template === undefined) continue;
    for (const position of templateSettings(template).get(name) ?? []) {
      const placed = placeValue(value, position);
      if ('problem' in placed) {
        throw new ServiceError(
          'invalid_connection_config',
          `connection setting '${name}' ${placed.problem} (${field} of this provider uses it there)`,
        );
      }
    }
  }
}

/** Checks the settings a connection brings: every required one present, every value well formed. */
export function validateConnectionConfig(provider: Provider, config: Record<string, string>): void {
  const missing = Object.entries(provider.connection_config)
    .filter(([name, setting]) => !setting.optional && (config[name] === undefined || config[name] === ''))
    .map(([name]) => name);
  if (missing.length > 0) {
    throw new ServiceError(
      'missing_connection_config',
      `this provider needs the connection setting(s) ${missing.map((name) => `'${name}'`).join(', ')}`,
      { details: { missing } },
    );
  }
  checkSettings(provider, config);
}

/**
 * Checks each given value of a setting the provider declares or fills into its URLs (at most
 * MAX_SETTINGS, settingPattern.ts); other values are kept as given and checked if a URL ever uses them.
 */
export function checkSettings(provider: Provider, config: Record<string, string>): void {
  const count = Object.keys(config).length;
  if (count > MAX_CONNECTION_SETTINGS) {
    throw new ServiceError(
      'invalid_connection_config',
      `a connection has at most ${MAX_CONNECTION_SETTINGS} settings (connection_config), this one ${count}`,
    );
  }
  for (const [name, value] of Object.entries(config)) {
    if (provider.connection_config[name] || usedInUrls(provider, name)) checkSetting(provider, name, value);
  }
}

function usedInUrls(provider: Provider, name: string): boolean {
  return URL_FIELDS.some((field) => {
    const template = (provider as Partial<Record<(typeof URL_FIELDS)[number], string>>)[field];
    return template !== undefined && templateSettings(template).has(name);
  });
}

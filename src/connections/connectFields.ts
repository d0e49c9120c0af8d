/**
 * What an end user (on the hosted connect page) or an operator (in the dashboard) fills in to connect
 * an integration: the credential fields of its provider's auth mode and the connection settings it
 * needs that were not fixed in advance. One description serves both forms, and turns the submitted
 * values back into the credentials and settings the connection service stores.
 */
import { ServiceError } from '../errors.js';
import type { Provider } from './providers/catalog.js';

export interface ConnectField {
  /** `credentials.<name>` or `connection_config.<name>`: where the value goes. */
  name: string;
  label: string;
  /** `secret`: masked input; `multiline`: a text area (a private key). */
  kind: 'text' | 'secret' | 'multiline';
  required: boolean;
  description?: string | undefined;
  /** A regular expression the value must match (connection settings). */
  pattern?: string | undefined;
}

type CredentialField = Omit<ConnectField, 'name'> & { key: string };

const CREDENTIAL_FIELDS: Record<Provider['auth_mode'], CredentialField[]> = {
  OAUTH2: [],
  OAUTH1: [],
  API_KEY: [{ key: 'apiKey', label: 'API key', kind: 'secret', required: true }],
  BASIC: [
    { key: 'username', label: 'Username', kind: 'text', required: true },
    { key: 'password', label: 'Password', kind: 'secret', required: false },
  ],
  OAUTH2_CC: [
    { key: 'client_id', label: 'Client ID', kind: 'text', required: true },
    { key: 'client_secret', label: 'Client secret', kind: 'secret', required: true },
  ],
  JWT: [
    {
      key: 'client_email',
      label: 'Service account email',
      kind: 'text',
      required: true,
      description: 'client_email of the key file',
    },
    {
      key: 'private_key',
      label: 'Private key (PEM)',
      kind: 'multiline',
      required: true,
      description: 'private_key of the key file, from -----BEGIN PRIVATE KEY----- to -----END PRIVATE KEY-----',
    },
    { key: 'private_key_id', label: 'Private key id', kind: 'text', required: false },
    {
      key: 'subject',
      label: 'User to act as',
      kind: 'text',
      required: false,
      description: 'only with domain-wide delegation',
    },
  ],
  APP: [
    { key: 'app_id', label: 'App ID', kind: 'text', required: true },
    { key: 'private_key', label: 'App private key (PEM)', kind: 'multiline', required: true },
  ],
};

/** Whether the auth mode connects through the provider's own consent page (no credentials typed in). */
export function isRedirectFlow(provider: Provider): boolean {
  return provider.auth_mode === 'OAUTH2' || provider.auth_mode === 'OAUTH1';
}

/** The fields to fill in for `provider`, leaving out the settings `fixed` already holds. */
export function connectFields(provider: Provider, fixed: Record<string, string> = {}): ConnectField[] {
  const credentials = CREDENTIAL_FIELDS[provider.auth_mode].map(({ key, ...field }) => ({
    ...field,
    name: `credentials.${key}`,
  }));
  const settings = Object.entries(provider.connection_config)
    // Settings the token exchange fills in (Salesforce's instance_url) are not asked for.
    .filter(
      ([name]) =>
        fixed[name] === undefined &&
        !('token_response_metadata' in provider && provider.token_response_metadata.includes(name)),
    )
    .map(([name, setting]) => ({
      name: `connection_config.${name}`,
      label: name,
      kind: 'text' as const,
      required: !setting.optional,
      ...(setting.description === undefined ? {} : { description: setting.description }),
      ...(setting.pattern === undefined ? {} : { pattern: setting.pattern }),
    }));
  return [...credentials, ...settings];
}

/**
 * The credentials (for the modes that take them) and settings of a submitted form. Unknown and empty
 * optional fields are dropped; a missing required one is `missing_connect_field` naming its label.
 */
export function valuesOfFields(
  provider: Provider,
  fields: ConnectField[],
  submitted: Record<string, string | undefined>,
): { credentials: Record<string, string> | undefined; connectionConfig: Record<string, string> } {
  const credentials: Record<string, string> = {};
  const connectionConfig: Record<string, string> = {};
  const missing: string[] = [];
  for (const field of fields) {
    const value = submitted[field.name]?.trim() ?? '';
    if (value === '') {
      if (field.required) missing.push(field.label);
      continue;
    }
    const [target, key = ''] = field.name.split(/\.(.*)/s);
    if (target === 'credentials') credentials[key] = value;
    else connectionConfig[key] = value;
  }
  if (missing.length > 0) {
    throw new ServiceError('missing_connect_field', `Fill in: ${missing.join(', ')}.`, {
      details: { missing },
    });
  }
  if (isRedirectFlow(provider)) return { credentials: undefined, connectionConfig };
  if (provider.auth_mode === 'BASIC') credentials['password'] ??= '';
  return { credentials: { type: provider.auth_mode, ...credentials }, connectionConfig };
}

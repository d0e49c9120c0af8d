/**
 * What the rest of the service (the runtime's activities, the API) needs from connections. The
 * implementation lives beside this file; the runtime codes against this interface only.
 */
import type { ConnectionRecord, EnvironmentVariable } from '../runtime/public.js';

export interface ConnectionScope {
  environmentId: string;
  /** The integration id (provider_config_key). */
  integrationId: string;
  connectionId: string;
}

/** A request ready to send: absolute URL, credentials injected (header, query or OAuth 1 signature). */
export interface AuthorizedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  /**
   * The connection's credential values in every form they can be echoed in (redaction.ts): whatever
   * of the request or its answer is kept or shown (an error message, a failure's details) has them
   * replaced by `[redacted]`.
   */
  secrets?: string[] | undefined;
}

export interface RequestToAuthorize {
  method: string;
  /** Path (or absolute URL) of the request. */
  endpoint: string;
  /** Base URL to use instead of the provider catalog's; only a host of the provider (its base URL's, or `allowed_hosts`). */
  baseUrlOverride?: string | undefined;
  headers: Record<string, string>;
  params: Record<string, string | number>;
  /**
   * The fields of an `application/x-www-form-urlencoded` body, when the request has one: OAuth 1.0a
   * signs them (RFC 5849 section 3.4.1.3.1). Ignored by the other auth modes.
   */
  formParams?: Record<string, string> | undefined;
}

export interface ConnectionService {
  /**
   * The connection record (SPEC.md "Connection record"). The token is refreshed when it expires within
   * 15 minutes, or always with `forceRefresh`; concurrent callers share one refresh. The refresh token
   * is left out unless `refreshToken` is true.
   */
  getConnection(
    scope: ConnectionScope,
    options?: { forceRefresh?: boolean; refreshToken?: boolean },
  ): Promise<ConnectionRecord>;
  /**
   * Resolves the base URL (`baseUrlOverride`, else the provider catalog's, with connection settings
   * substituted) and injects the connection's credentials, which go to the provider's hosts only.
   * Throws a ServiceError with code `missing_base_url` when there is neither, `base_url_not_allowed`
   * for an override to another host.
   */
  authorizeRequest(scope: ConnectionScope, request: RequestToAuthorize): Promise<AuthorizedRequest>;
  getMetadata(scope: ConnectionScope): Promise<Record<string, unknown>>;
  /**
   * Every credential value of the connection in the forms it can be echoed in (redaction.ts), so that
   * an error message kept or shown for it (a run's failure, a webhook) can have them redacted. Empty
   * when the connection does not exist. Optional: a connection service without it redacts nothing.
   */
  credentialSecrets?(scope: ConnectionScope): Promise<string[]>;
  /** Replaces the whole metadata. */
  setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void>;
  /** Merges the given properties into the metadata. */
  updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void>;
}

export interface EnvironmentVariableStore {
  /** The variables of an environment, decrypted. */
  list(environmentId: string): Promise<EnvironmentVariable[]>;
}

/**
 * What the runtime needs of a connection to send a request with its credentials: declared here, by the
 * runtime, and implemented by src/connections (its ConnectionService), so that src/runtime never
 * imports src/connections (the dependency rules of .dependency-cruiser.cjs).
 */

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

/** Injects a connection's credentials into a request (src/connections/requestAuthorizer.ts). */
export interface RequestAuthorizer {
  /**
   * Resolves the base URL and injects the connection's credentials, which go to the provider's hosts
   * only (ConnectionService.authorizeRequest).
   */
  authorizeRequest(scope: ConnectionScope, request: RequestToAuthorize): Promise<AuthorizedRequest>;
}

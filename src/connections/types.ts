/**
 * What the rest of the service (the runtime's activities, the API) needs from connections. The
 * implementation lives beside this file. The runtime declares the part it needs itself
 * (src/runtime/connectionAccess.ts), so that it never imports this folder.
 */
import type { IntegrationDescription } from '../runtime/svcTypes.js';
import type { AuthorizedRequest, ConnectionScope, RequestToAuthorize } from '../runtime/connectionAccess.js';
import type { ConnectionRecord, EnvironmentVariable } from '../runtime/public.js';

export type { AuthorizedRequest, ConnectionScope, RequestToAuthorize } from '../runtime/connectionAccess.js';

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
   * an error message kept or shown for it (a run's failure, a webhook) can have them redacted.
   * Undefined when the connection does not exist, or is not the one asked about: made after
   * `existedAt`, or not the record `ids` names (the connection record's `id`, as a run read it).
   * Another connection of the same id redacts nothing of the earlier one's values.
   * Optional: a connection service without it redacts nothing.
   */
  credentialSecrets?(
    scope: ConnectionScope,
    options?: { existedAt?: Date; ids?: readonly number[] },
  ): Promise<string[] | undefined>;
  /** Replaces the whole metadata. */
  setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void>;
  /** Merges the given properties into the metadata. */
  updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void>;
  /**
   * The integration as a script's `svc.getIntegration()` sees it (with its inbound webhook URL) and its
   * provider's default pagination (`svc.paginate` merges a script's keys over it).
   */
  describeIntegration(scope: Omit<ConnectionScope, 'connectionId'>): Promise<IntegrationDescription>;
}

export interface EnvironmentVariableStore {
  /** The variables of an environment, decrypted. */
  list(environmentId: string): Promise<EnvironmentVariable[]>;
}

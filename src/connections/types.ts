/**
 * What the rest of the service (the runtime's activities, the API, the OAuth flow) needs from
 * connections. The implementation lives beside this file (connectionService.ts, the facade over its
 * parts). The runtime declares the part it needs itself (src/runtime/connectionAccess.ts), so that it
 * never imports this folder.
 */
import type { IntegrationDescription } from '../runtime/svcTypes.js';
import type { AuthorizedRequest, ConnectionScope, RequestToAuthorize } from '../runtime/connectionAccess.js';
import type { ConnectionRecord, EnvironmentVariable } from '../runtime/public.js';
import type { ConnectionStore, ConnectionSummary } from './connectionStore.js';
import type { ImportConnectionInput } from './credentials.js';

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

/**
 * Connections as the API, the OAuth flow and sync selection manage them: created from credentials,
 * listed, tagged, their metadata written, deleted; plus everything a run needs (ConnectionService).
 */
export interface ConnectionManager extends ConnectionService {
  credentialSecrets(
    scope: ConnectionScope,
    options?: { existedAt?: Date; ids?: readonly number[] },
  ): Promise<string[] | undefined>;
  /**
   * Stores existing credentials as a connection (migrating from another system, tests). An existing
   * connection of the same id gets the new credentials and settings; its metadata is kept unless given.
   */
  importConnection(input: ImportConnectionInput): Promise<ConnectionRecord>;
  /**
   * Stores credentials an end user or operator typed in (the hosted connect page): validated, and for
   * the minted kinds a first token obtained, before `claim` runs (spending the connect session); an
   * existing connection is replaced only with `replace`. Tags replace the connection's when given.
   */
  connectWith(
    input: ImportConnectionInput,
    options: { replace: boolean; claim?: () => Promise<void> },
  ): Promise<ConnectionRecord>;
  /**
   * Creates or replaces a connection's credentials, clearing any refresh error (the OAuth callback).
   * With `replace: false` an existing connection is left as it is and the call fails with
   * `connection_exists` (a connect flow whose session did not allow a reconnect).
   */
  saveConnection(...args: Parameters<ConnectionStore['save']>): Promise<void>;
  /** The store's, as it says (connectionStore.ts). */
  connectionIdsWhere: ConnectionStore['idsWhere'];
  listConnections: ConnectionStore['list'];
  setTags: ConnectionStore['setTags'];
  writeMetadataOf: ConnectionStore['writeMetadata'];
  /** The connection without credentials, with its last refresh error: what status pages show. */
  getConnectionStatus(scope: ConnectionScope): Promise<ConnectionSummary>;
  /** Deletes a connection and its credentials; false when there was none. */
  deleteConnection(scope: ConnectionScope): Promise<boolean>;
}

export interface EnvironmentVariableStore {
  /** The variables of an environment, decrypted. */
  list(environmentId: string): Promise<EnvironmentVariable[]>;
}

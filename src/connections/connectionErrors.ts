/**
 * The errors of the connection service that more than one of its parts raises, each saying which
 * connection and what to do. Pure.
 */
import type { z } from 'zod';
import { ServiceError } from '../errors.js';
import type { ConnectionScope } from '../runtime/connectionAccess.js';

/** The last failed refresh, as status and the API show it. */
export interface RefreshError {
  code: string;
  message: string;
  at: string;
  /** True when the user must reconnect; false when the provider was only unreachable. */
  permanent: boolean;
}

/** The columns of a connection's row that keep its last failed refresh. */
export interface RefreshErrorColumns {
  refresh_error_code: string | null;
  refresh_error_message: string | null;
  refresh_error_at: Date | null;
  refresh_error_permanent: boolean;
}

export function describeConnection(scope: ConnectionScope): string {
  return `connection '${scope.connectionId}' of integration '${scope.integrationId}'`;
}

/** A connect flow may not replace an existing connection unless its session said so. */
export function connectionExists(scope: ConnectionScope): ServiceError {
  return new ServiceError(
    'connection_exists',
    `${describeConnection(scope)} already exists; re-authorising it needs a connect session made with allow_reconnect`,
  );
}

export function unknownConnection(scope: ConnectionScope): ServiceError {
  return new ServiceError('unknown_connection', `${describeConnection(scope)} does not exist`);
}

export function invalidInput(
  what: 'connection' | 'connection_id' | 'tags' | 'metadata',
  error: z.ZodError,
): ServiceError {
  const problems = error.issues.map((issue) => `${issue.path.join('.') || '(value)'}: ${issue.message}`);
  return new ServiceError(`invalid_${what}`, `invalid ${what}: ${problems.join('; ')}`, {
    details: problems,
  });
}

export function modeMismatch(scope: ConnectionScope, providerMode: string, credentialsType: string): ServiceError {
  return new ServiceError(
    'credentials_type_mismatch',
    `${describeConnection(scope)} holds ${credentialsType} credentials but its provider uses ${providerMode}; reconnect or re-import it`,
  );
}

export function refreshErrorOf(row: RefreshErrorColumns): RefreshError | null {
  if (row.refresh_error_code === null || row.refresh_error_at === null) return null;
  return {
    code: row.refresh_error_code,
    message: row.refresh_error_message ?? '',
    at: row.refresh_error_at.toISOString(),
    permanent: row.refresh_error_permanent,
  };
}

/** Why a connection has no usable token: reconnect (the grant was refused), or try again later. */
export function refreshFailed(scope: ConnectionScope, row: RefreshErrorColumns): ServiceError {
  const when = row.refresh_error_at?.toISOString() ?? 'an unknown time';
  const what = row.refresh_error_message ?? row.refresh_error_code ?? 'no detail';
  if (row.refresh_error_permanent) {
    return new ServiceError(
      'connection_refresh_failed',
      `the access token of ${describeConnection(scope)} could not be refreshed (${what}, at ${when}); the provider no longer accepts this connection's grant, so the user must reconnect (run the connect flow again, or import new credentials)`,
      { details: { refresh_error: refreshErrorOf(row) } },
    );
  }
  return new ServiceError(
    'connection_refresh_unavailable',
    `the access token of ${describeConnection(scope)} could not be refreshed (${what}, at ${when}); the provider may be down, try again later`,
    { retryable: true, details: { refresh_error: refreshErrorOf(row) } },
  );
}

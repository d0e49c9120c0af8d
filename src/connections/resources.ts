/**
 * What the parts of the connection service share (the store, the token refresh, the background
 * refresher's claims; src/connections/connectionService.ts composes them): one object built once, so
 * that each part takes the same database, clock, log and hooks and none of them builds its own.
 */
import type { Pool } from '../db/pool.js';
import type { LineLog } from '../log.js';
import type { Encryptor } from './encryption.js';
import type { RefreshError } from './connectionErrors.js';
import type { IntegrationStore } from './integrationStore.js';
import type { Fetch } from './oauth2.js';
import type { ConnectionScope } from '../runtime/connectionAccess.js';

export interface ConnectionSavedEvent {
  scope: ConnectionScope;
  /** True for a new connection; false when an existing one got new credentials (a reconnect). */
  created: boolean;
}

export interface NeedsReauthEvent {
  scope: ConnectionScope;
  refreshError: RefreshError;
}

export interface ConnectionResources {
  db: Pool;
  encryptor: Encryptor;
  integrations: IntegrationStore;
  /** For token requests (the outbound request policy's fetch, or a test's). */
  fetch: Fetch;
  now: () => Date;
  /** One line per event, never with a secret in it. */
  log: LineLog;
  /** Called after a connection is created or reconnected (to start its auto-start syncs, say). */
  onConnectionSaved: ((event: ConnectionSavedEvent) => Promise<void>) | undefined;
  /**
   * Called once when a failed refresh marks a connection as needing re-authorisation (the provider
   * refused its grant): not again for later failures, until a reconnect or a successful refresh
   * clears the mark.
   */
  onNeedsReauth: ((event: NeedsReauthEvent) => Promise<void>) | undefined;
}

/**
 * The open MCP sessions of this API process, by environment (docs/api.md "Actions as tools for AI
 * agents", "Sessions"). A session exists only to carry `notifications/tools/list_changed` to an agent
 * that keeps its notification stream (GET /mcp) open; every request is authorized on its own, so a
 * session holds no authority and no state a request depends on.
 *
 * Bounds, so that no key can exhaust the process and no environment can crowd out another:
 * - at most `perEnvironment` sessions per environment: opening one more closes that environment's
 *   least recently used session (never another environment's);
 * - a session without an open notification stream closes after `idleMs` without a request;
 * - one notification stream per session (the SDK answers a second GET with 409).
 * A session is bound to the environment, integration and connection it was opened for: a request
 * of another key, or for another connection, does not find it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConnectionScope } from '../../connections/types.js';
import { ServiceError } from '../../errors.js';
import { mcpSessionsClosed, mcpSessionsOpen } from '../../metrics/index.js';

export interface McpSessionLimits {
  /** Open sessions per environment in this process. @default 100 */
  perEnvironment?: number;
  /** How long a session without a notification stream lives after its last request, in ms. @default 1,800,000 (30 min) */
  idleMs?: number;
  /** How often open sessions look for a new deployment of their environment, in ms. @default 2000 */
  pollMs?: number;
}

/** An open session (src/api/routes/mcp/mcpEndpoint.ts makes them, on the SDK's server and transport). */
export interface McpSession {
  readonly id: string;
  /** The environment, integration and connection it was opened for. */
  readonly scope: ConnectionScope;
  /** The fingerprint of the tool list its client last saw (ToolSet.fingerprint). */
  fingerprint: string;
  /** Hands one HTTP request of the session to its transport. */
  handle(req: IncomingMessage, res: ServerResponse, body?: unknown): Promise<void>;
  /** Sends notifications/tools/list_changed on its notification stream, when one is open. */
  notifyToolsChanged(): Promise<void>;
  /** Closes its transport, its streams and its server. */
  close(): Promise<void>;
}

interface Entry {
  session: McpSession;
  lastSeen: number;
  /** Notification streams (GET /mcp) open now. */
  streams: number;
}

export const DEFAULT_MCP_LIMITS: Required<McpSessionLimits> = {
  perEnvironment: 100,
  idleMs: 30 * 60_000,
  pollMs: 2000,
};

export interface McpSessionRegistry {
  readonly limits: Required<McpSessionLimits>;
  /** Registers a session; when its environment is at its limit, closes that environment's least recently used one first. */
  add(session: McpSession): void;
  /**
   * The session of this id for exactly this scope, marked as used now. Throws 404
   * `mcp_session_not_found` otherwise: closed, expired, evicted, opened on another API process, or
   * opened for another environment or connection (which it does not tell apart, so a session id says
   * nothing to another key).
   */
  find(scope: ConnectionScope, id: string): McpSession;
  /** Forgets a session (its transport closed). */
  remove(environmentId: string, id: string): void;
  /** Counts a notification stream of the session until `closed` settles. */
  holdStream(environmentId: string, id: string, closed: Promise<void>): void;
  /** The sessions of each environment that has any. */
  environments(): Map<string, McpSession[]>;
  /**
   * Called every `pollMs` while sessions are open, for each environment that has some: where the
   * registry's user tells sessions that their tool list changed.
   */
  watch(watcher: (environmentId: string, sessions: readonly McpSession[]) => Promise<void>): void;
  /** Closes sessions idle longer than `idleMs`; called by the registry's own timer. */
  sweep(now?: number): Promise<void>;
  /** Closes every session and stops the timers. */
  closeAll(): Promise<void>;
  size(): number;
}

export function createMcpSessionRegistry(
  given: McpSessionLimits = {},
  options: { now?: () => number; onError?: (error: unknown) => void } = {},
): McpSessionRegistry {
  const limits: Required<McpSessionLimits> = { ...DEFAULT_MCP_LIMITS, ...given };
  if (!(limits.perEnvironment >= 1)) throw new RangeError('perEnvironment must be at least 1');
  const now = options.now ?? (() => Date.now());
  const onError = options.onError ?? (() => undefined);
  // Per environment, in order of last use: a Map keeps insertion order, and a use re-inserts.
  const byEnvironment = new Map<string, Map<string, Entry>>();
  let watcher: ((environmentId: string, sessions: readonly McpSession[]) => Promise<void>) | undefined;
  let pollTimer: NodeJS.Timeout | undefined;
  let sweepTimer: NodeJS.Timeout | undefined;
  let polling = false;

  const closeEntry = (entry: Entry, reason: 'limit' | 'idle' | 'shutdown'): void => {
    mcpSessionsClosed.inc({ reason });
    entry.session.close().catch(onError);
  };

  const forget = (environmentId: string, id: string): Entry | undefined => {
    const sessions = byEnvironment.get(environmentId);
    const entry = sessions?.get(id);
    if (!sessions || !entry) return undefined;
    sessions.delete(id);
    if (sessions.size === 0) byEnvironment.delete(environmentId);
    mcpSessionsOpen.dec();
    if (byEnvironment.size === 0) stopTimers();
    return entry;
  };

  const poll = async (): Promise<void> => {
    if (polling || watcher === undefined) return;
    polling = true;
    try {
      for (const [environmentId, sessions] of registry.environments()) {
        await watcher(environmentId, sessions).catch(onError);
      }
    } finally {
      polling = false;
    }
  };

  const startTimers = (): void => {
    // Unreferenced: open sessions never keep a process alive that is otherwise done.
    pollTimer ??= setInterval(() => void poll(), limits.pollMs).unref();
    sweepTimer ??= setInterval(
      () => void registry.sweep().catch(onError),
      Math.max(1000, Math.min(limits.idleMs / 4, 60_000)),
    ).unref();
  };
  const stopTimers = (): void => {
    clearInterval(pollTimer);
    clearInterval(sweepTimer);
    pollTimer = undefined;
    sweepTimer = undefined;
  };

  const registry: McpSessionRegistry = {
    limits,
    add(session) {
      const { environmentId } = session.scope;
      for (;;) {
        const sessions = byEnvironment.get(environmentId);
        const [oldestId] = sessions?.keys() ?? [];
        if (sessions === undefined || sessions.size < limits.perEnvironment || oldestId === undefined) break;
        const oldest = forget(environmentId, oldestId);
        if (oldest) closeEntry(oldest, 'limit');
      }
      let sessions = byEnvironment.get(environmentId);
      if (!sessions) byEnvironment.set(environmentId, (sessions = new Map<string, Entry>()));
      sessions.set(session.id, { session, lastSeen: now(), streams: 0 });
      mcpSessionsOpen.inc();
      startTimers();
    },
    find(scope, id) {
      const sessions = byEnvironment.get(scope.environmentId);
      const entry = sessions?.get(id);
      const bound = entry?.session.scope;
      if (
        !sessions ||
        !entry ||
        bound?.integrationId !== scope.integrationId ||
        bound.connectionId !== scope.connectionId
      ) {
        throw new ServiceError(
          'mcp_session_not_found',
          'No open MCP session of this connection has this Mcp-Session-Id: it was closed, expired, or opened by another API process or for another connection. Send `initialize` again (without Mcp-Session-Id) to open a new one.',
        );
      }
      sessions.delete(id);
      sessions.set(id, entry);
      entry.lastSeen = now();
      return entry.session;
    },
    remove(environmentId, id) {
      forget(environmentId, id);
    },
    holdStream(environmentId, id, closed) {
      const entry = byEnvironment.get(environmentId)?.get(id);
      if (!entry) return;
      entry.streams += 1;
      void closed.finally(() => {
        entry.streams -= 1;
        entry.lastSeen = now();
      });
    },
    environments() {
      return new Map(
        [...byEnvironment].map(([environmentId, sessions]) => [
          environmentId,
          [...sessions.values()].map((entry) => entry.session),
        ]),
      );
    },
    watch(next) {
      watcher = next;
    },
    async sweep(at = now()) {
      for (const [environmentId, sessions] of [...byEnvironment]) {
        for (const [id, entry] of [...sessions]) {
          if (entry.streams > 0 || at - entry.lastSeen < limits.idleMs) continue;
          if (forget(environmentId, id)) closeEntry(entry, 'idle');
        }
      }
    },
    async closeAll() {
      const entries = [...byEnvironment.values()].flatMap((sessions) => [...sessions.values()]);
      for (const entry of entries) forget(entry.session.scope.environmentId, entry.session.id);
      stopTimers();
      await Promise.all(
        entries.map((entry) => {
          mcpSessionsClosed.inc({ reason: 'shutdown' });
          return entry.session.close().catch(onError);
        }),
      );
    },
    size() {
      let total = 0;
      for (const sessions of byEnvironment.values()) total += sessions.size;
      return total;
    },
  };
  return registry;
}

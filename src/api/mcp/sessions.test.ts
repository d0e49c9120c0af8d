import { describe, expect, it } from 'vitest';
import type { ConnectionScope } from '../../connections/types.js';
import { isServiceError } from '../../errors.js';
import { createMcpSessionRegistry, type McpSession } from './sessions.js';

const scope = (environmentId: string, connectionId = 'c1', integrationId = 'tracker'): ConnectionScope => ({
  environmentId,
  integrationId,
  connectionId,
});

function fakeSession(id: string, at: ConnectionScope, closed: string[]): McpSession {
  return {
    id,
    scope: at,
    fingerprint: '',
    handle: async () => undefined,
    notifyToolsChanged: async () => undefined,
    close: async () => void closed.push(id),
  };
}

const notFound = (find: () => unknown): string | undefined => {
  try {
    find();
  } catch (error) {
    return isServiceError(error) ? error.code : 'other';
  }
  return undefined;
};

describe('the MCP session registry', () => {
  it('keeps at most perEnvironment sessions per environment, closing that environment’s least recently used', async () => {
    const closed: string[] = [];
    const registry = createMcpSessionRegistry({ perEnvironment: 2 });
    registry.add(fakeSession('a1', scope('A'), closed));
    registry.add(fakeSession('a2', scope('A'), closed));
    registry.add(fakeSession('b1', scope('B'), closed));
    registry.find(scope('A'), 'a1'); // a1 used: a2 is now the least recently used
    registry.add(fakeSession('a3', scope('A'), closed));
    expect(closed).toEqual(['a2']);
    expect(
      registry
        .environments()
        .get('A')
        ?.map((session) => session.id),
    ).toEqual(['a1', 'a3']);
    expect(
      registry
        .environments()
        .get('B')
        ?.map((session) => session.id),
    ).toEqual(['b1']);
    await registry.closeAll();
    expect(registry.size()).toBe(0);
    expect(closed.sort()).toEqual(['a1', 'a2', 'a3', 'b1']);
  });

  it('finds a session only for the environment, integration and connection it was opened for', async () => {
    const registry = createMcpSessionRegistry();
    registry.add(fakeSession('s', scope('A'), []));
    expect(registry.find(scope('A'), 's').id).toBe('s');
    expect(notFound(() => registry.find(scope('B'), 's'))).toBe('mcp_session_not_found');
    expect(notFound(() => registry.find(scope('A', 'c2'), 's'))).toBe('mcp_session_not_found');
    expect(notFound(() => registry.find(scope('A', 'c1', 'crm'), 's'))).toBe('mcp_session_not_found');
    expect(notFound(() => registry.find(scope('A'), 'other'))).toBe('mcp_session_not_found');
    await registry.closeAll();
  });

  it('closes a session idle past idleMs, unless its notification stream is open', async () => {
    let now = 0;
    const closed: string[] = [];
    const registry = createMcpSessionRegistry({ idleMs: 1000 }, { now: () => now });
    registry.add(fakeSession('idle', scope('A'), closed));
    registry.add(fakeSession('streaming', scope('A'), closed));
    let endStream: () => void = () => undefined;
    registry.holdStream('A', 'streaming', new Promise<void>((resolve) => (endStream = resolve)));
    now = 999;
    await registry.sweep();
    expect(closed).toEqual([]);
    now = 1000;
    await registry.sweep();
    expect(closed).toEqual(['idle']);
    now = 5000;
    await registry.sweep();
    expect(closed).toEqual(['idle']);
    endStream();
    await new Promise((resolve) => setImmediate(resolve));
    now = 5999;
    await registry.sweep();
    expect(closed).toEqual(['idle']);
    now = 6000;
    await registry.sweep();
    expect(closed).toEqual(['idle', 'streaming']);
    expect(registry.size()).toBe(0);
  });
});

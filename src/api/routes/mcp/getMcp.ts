import { defineRoute } from '../../route.js';
import { assertConnection, scopeOf } from '../shared.js';
import { MCP_ROUTE, type McpEndpoint, SESSION_HEADERS } from './mcpEndpoint.js';

export const getMcpRoute = (mcp: McpEndpoint) =>
  defineRoute({
    ...MCP_ROUTE,
    method: 'get',
    summary: 'Model Context Protocol: the session’s notification stream',
    description:
      'An SSE stream (`text/event-stream`, send `Accept: text/event-stream`) on which the session receives `notifications/tools/list_changed` when a deploy changes its tools. One stream per session (409 for a second).',
    headers: SESSION_HEADERS.map((header) => ({ ...header, required: header.name === 'Mcp-Session-Id' })),
    responses: { 200: { description: 'The event stream, open until the client or the session closes it' } },
    handler: async ({ req, res, connection }) => {
      const scope = scopeOf(connection);
      await assertConnection(mcp.deps, scope);
      const session = mcp.sessionOf(req, scope, 'GET');
      mcp.sessions.holdStream(
        scope.environmentId,
        session.id,
        new Promise((resolve) => res.once('close', () => resolve())),
      );
      await session.handle(req, res);
      return undefined;
    },
  });

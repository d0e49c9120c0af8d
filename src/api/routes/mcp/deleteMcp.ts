import { defineRoute } from '../../route.js';
import { assertConnection, scopeOf } from '../shared.js';
import { MCP_ROUTE, type McpEndpoint, SESSION_HEADERS } from './mcpEndpoint.js';

export const deleteMcpRoute = (mcp: McpEndpoint) =>
  defineRoute({
    ...MCP_ROUTE,
    method: 'delete',
    summary: 'Model Context Protocol: close the session',
    headers: SESSION_HEADERS.map((header) => ({ ...header, required: header.name === 'Mcp-Session-Id' })),
    responses: { 200: { description: 'The session is closed' } },
    handler: async ({ req, res, connection }) => {
      const scope = scopeOf(connection);
      await assertConnection(mcp.deps, scope);
      await mcp.sessionOf(req, scope, 'DELETE').handle(req, res);
      return undefined;
    },
  });

import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { invalidParamsResponse } from '../../mcp/params.js';
import { defineRoute } from '../../route.js';
import { assertConnection, scopeOf } from '../shared.js';
import {
  MCP_ROUTE,
  type McpEndpoint,
  SESSION_HEADERS,
  ACCEPT_POST,
  mcpMessageBody,
  jsonRpcResponseSchema,
} from './mcpEndpoint.js';
import { MAX_JSON_TOKENS } from '../../jsonBody.js';

export const postMcpRoute = (mcp: McpEndpoint) =>
  defineRoute({
    ...MCP_ROUTE,
    method: 'post',
    summary: 'Model Context Protocol: the connection’s actions as tools for AI agents',
    description:
      'The Streamable HTTP transport of the Model Context Protocol (docs/api.md "Actions as tools for AI agents"). `tools/list` lists one tool per deployed action of the connection’s integration that service.yaml’s `mcp_tools` exposes; `tools/call` runs it as POST /action/trigger does. `initialize` opens a session (`Mcp-Session-Id` in the answer’s headers). Answers are JSON (`application/json`); every error is a JSON-RPC error object, with the service’s code in `error.data.code`.',
    headers: [ACCEPT_POST, ...SESSION_HEADERS],
    body: mcpMessageBody,
    // It carries the caller's own data (src/api/jsonBody.ts): as many tokens as any body may have.
    bodyTokens: MAX_JSON_TOKENS,
    responses: {
      200: { description: 'The JSON-RPC response to the request', schema: jsonRpcResponseSchema },
      202: { description: 'A notification or response was accepted' },
      404: { description: 'mcp_session_not_found, or unknown_connection (a JSON-RPC error object)' },
    },
    handler: async ({ req, res, body, connection, spend }) => {
      const scope = scopeOf(connection);
      await assertConnection(mcp.deps, scope);
      const session = req.header('mcp-session-id') === undefined ? undefined : mcp.sessionOf(req, scope, 'POST');
      // The SDK's schema of the method, over the whole message: charged as the body's validation is.
      const invalid = spend(() => invalidParamsResponse(body));
      if (invalid !== undefined) {
        // A JSON-RPC error answers the request; HTTP says the exchange itself went through (as the SDK does).
        res.status(200).json(invalid);
      } else if (session !== undefined) {
        await session.handle(req, res, body);
      } else if (isInitializeRequest(body)) {
        await mcp.openSession(scope, req, res, body);
      } else {
        await mcp.answerWithoutSession(scope, req, res, body);
      }
      return undefined;
    },
  });

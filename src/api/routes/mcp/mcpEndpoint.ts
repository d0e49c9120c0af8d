/**
 * What POST, GET and DELETE /mcp (postMcp.ts, getMcp.ts, deleteMcp.ts) share: their schemas and headers,
 * and the sessions and transports they act on. /mcp is the Model Context Protocol's Streamable HTTP transport (the official
 * TypeScript SDK's), one endpoint per environment, scoped to one connection by the `Connection-Id`
 * and `Provider-Config-Key` headers and authenticated by the environment's secret key like every
 * route. Its tools are the connection's integration's deployed actions (src/api/mcp/toolServer.ts).
 *
 * Sessions (docs/api.md "Actions as tools for AI agents"): `initialize` opens one, kept in this API
 * process (src/api/mcp/sessions.ts), so that a redeploy reaches the agent as
 * `notifications/tools/list_changed` on its notification stream (GET /mcp). A request without
 * `Mcp-Session-Id` that is not `initialize` is answered without a session (a client that does not
 * keep sessions, `curl`), since no answer depends on one. Every error is a JSON-RPC error object.
 */
import { randomBytes } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { ConnectionScope } from '../../../connections/types.js';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { createAccessLogger } from '../../logger.js';
import { createMcpSessionRegistry, type McpSession } from '../../mcp/sessions.js';
import { createToolServer, createToolSets } from '../../mcp/toolServer.js';
import type { RouteHeader } from '../../route.js';

const jsonRpcId = z.union([z.string(), z.number().int()]);

/** One JSON-RPC 2.0 message: a request, a notification, or the client's answer to a server request. */
export const mcpMessageBody = z
  .object(
    {
      jsonrpc: z.literal('2.0', { error: 'jsonrpc must be "2.0"' }),
      id: jsonRpcId.optional().describe('Absent on notifications.'),
      method: z
        .string()
        .min(1)
        .optional()
        .describe('`initialize`, `tools/list`, `tools/call`, `ping`, `notifications/initialized`, …'),
      params: z.record(z.string(), z.unknown()).optional(),
      result: z.record(z.string(), z.unknown()).optional(),
      error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
    },
    {
      error: (issue) =>
        Array.isArray(issue.input)
          ? 'JSON-RPC batches are not accepted (MCP revision 2025-06-18 removed them): send one message per request'
          : 'expected one JSON-RPC 2.0 message (an object), sent with Content-Type: application/json',
    },
  )
  .strict()
  .describe(
    'One JSON-RPC 2.0 message of the Model Context Protocol (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http).',
  );

export const SESSION_HEADERS: readonly RouteHeader[] = [
  {
    name: 'Mcp-Session-Id',
    description:
      'The session `initialize` answered with (its response header of the same name). Without it, a request other than `initialize` is answered without a session.',
  },
  {
    name: 'Mcp-Protocol-Version',
    description: 'The protocol version `initialize` agreed on, sent by clients on every later request.',
  },
];

export const ACCEPT_POST: RouteHeader = {
  name: 'Accept',
  required: true,
  description: 'Must list both `application/json` and `text/event-stream` (the transport’s rule; 406 otherwise).',
};

export const jsonRpcResponseSchema = z.object({
  jsonrpc: z.literal('2.0'),
  id: jsonRpcId.nullable(),
  result: z.record(z.string(), z.unknown()).optional(),
  error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
});

/** What the three routes of /mcp have in common. */
export const MCP_ROUTE = {
  path: '/mcp',
  tags: ['mcp'],
  auth: 'secret-key' as const,
  connectionScoped: true,
  errorFormat: 'json-rpc' as const,
};

export function createMcpEndpoint(deps: ApiDeps) {
  const logger = deps.logger ?? createAccessLogger();
  const sessions =
    deps.mcpSessions ??
    createMcpSessionRegistry(deps.mcp, {
      onError: (error) => logger.error('mcp session', { error: String(error) }),
    });
  const toolSets = createToolSets(deps.generated);

  // A redeploy that changes a session's tools (an action added, removed, described or typed anew,
  // `mcp_tools` changed) reaches its client as notifications/tools/list_changed.
  sessions.watch(async (environmentId, open) => {
    for (const session of open) {
      const { fingerprint } = await toolSets.of(environmentId, session.scope.integrationId);
      if (session.fingerprint === fingerprint) continue;
      session.fingerprint = fingerprint;
      await session.notifyToolsChanged();
    }
  });

  /** A session's server and transport; registered once `initialize` succeeded. */
  async function openSession(scope: ConnectionScope, req: Request, res: Response, body: unknown): Promise<void> {
    // Read before the transport runs, so that a failure is this request's error, not the transport's.
    const listed = await toolSets.of(scope.environmentId, scope.integrationId);
    let session: McpSession | undefined;
    const server = createToolServer({
      deps,
      scope,
      toolSets,
      logger,
      onListed: (fingerprint) => {
        if (session) session.fingerprint = fingerprint;
      },
    });
    const transport = new StreamableHTTPServerTransport({
      // 192 random bits: not guessable, though a session gives nothing without the environment's key.
      sessionIdGenerator: () => randomBytes(24).toString('base64url'),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        session = {
          id,
          scope,
          fingerprint: listed.fingerprint,
          handle: (request, response, parsed) => transport.handleRequest(request, response, parsed),
          notifyToolsChanged: () => server.sendToolListChanged(),
          close: () => server.close(),
        };
        sessions.add(session);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.remove(scope.environmentId, transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** A request without a session: a server and transport of its own, closed with the response. */
  async function answerWithoutSession(
    scope: ConnectionScope,
    req: Request,
    res: Response,
    body: unknown,
  ): Promise<void> {
    const server = createToolServer({ deps, scope, toolSets, logger });
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.once('close', () => void server.close().catch(() => undefined));
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  function sessionOf(req: Request, scope: ConnectionScope, method: string): McpSession {
    const id = req.header('mcp-session-id');
    if (id === undefined || id === '') {
      throw new ServiceError(
        'mcp_session_required',
        `${method} /mcp acts on a session: send the Mcp-Session-Id header that the answer to initialize carried.`,
      );
    }
    return sessions.find(scope, id);
  }

  return { deps, sessions, openSession, answerWithoutSession, sessionOf };
}

/** The sessions and transports the three routes of /mcp share (postMcp.ts, getMcp.ts, deleteMcp.ts). */
export type McpEndpoint = ReturnType<typeof createMcpEndpoint>;

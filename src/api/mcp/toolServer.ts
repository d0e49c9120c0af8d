/**
 * The MCP server of one connection, on the official SDK's `Server`: `initialize` (by the SDK),
 * `tools/list` and `tools/call` over the tools of src/api/mcp/tools.ts. The tools are declared from
 * the deployed service.yaml as JSON Schemas at request time, which the SDK's high-level `McpServer`
 * (tools declared once, with zod schemas) does not do; hence the lower-level `Server`.
 *
 * `tools/call` runs the action through runActionFor, the path of POST /action/trigger: the same run,
 * durability, limits, authority and redaction. The connection is the one the request's headers name
 * (and the session was opened for), never anything in the call's arguments.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { ConnectionScope } from '../../connections/types.js';
import { isServiceError } from '../../errors.js';
import type { GeneratedRouting } from '../generatedRouting.js';
import type { Logger } from '../logger.js';
import { runActionFor } from '../routes/actions/postActionTrigger.js';
import type { ApiDeps } from '../deps.js';
import { buildToolSet, inputFromArguments, structuredOutput, type ToolSet } from './tools.js';

/** The name and version the server gives in `initialize`. */
const SERVER_INFO = { name: 'integration-service', version: '1' };

// The SDK's Server builds an Ajv instance for elicitation unless given one; this server never
// elicits, so every Server shares one instead of compiling formats per session (or per request).
const unusedValidator = new AjvJsonSchemaValidator();

/** A tool set of one integration of one deployment version. */
export interface VersionedToolSet extends ToolSet {
  version: number;
}

export interface ToolSets {
  /** The tools of an integration as deployed now in the environment (version 0: nothing deployed). */
  of(environmentId: string, integrationId: string): Promise<VersionedToolSet>;
}

const MAX_CACHED_TOOL_SETS = 500;

/** Tool sets built once per deployment version and integration (routing reads the version per call). */
export function createToolSets(routing: Pick<GeneratedRouting, 'table'>): ToolSets {
  const cache = new Map<string, VersionedToolSet>();
  return {
    async of(environmentId, integrationId) {
      const table = await routing.table(environmentId);
      const version = table?.version ?? 0;
      const key = JSON.stringify([environmentId, version, integrationId]);
      const cached = cache.get(key);
      if (cached) return cached;
      const built: VersionedToolSet = {
        ...buildToolSet(table?.config ?? { integrations: [], models: [] }, integrationId),
        version,
      };
      if (cache.size >= MAX_CACHED_TOOL_SETS) cache.delete(cache.keys().next().value ?? '');
      cache.set(key, built);
      return built;
    },
  };
}

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function errorResult(body: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(body) }], isError: true };
}

export interface ToolServerOptions {
  deps: ApiDeps;
  scope: ConnectionScope;
  toolSets: ToolSets;
  logger: Logger;
  /** Called with the fingerprint of every list the server answers (what the client knows now). */
  onListed?: (fingerprint: string) => void;
}

/** An MCP server for one connection, not yet connected to a transport. */
export function createToolServer({ deps, scope, toolSets, logger, onListed }: ToolServerOptions): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: true } },
    instructions: `Each tool runs one action of integration '${scope.integrationId}' for connection '${scope.connectionId}' and returns its output. A tool result with isError holds the error as JSON: an ActionError's payload, the problems of invalid arguments (nothing was run), or why the run failed.`,
    jsonSchemaValidator: unusedValidator,
  });

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const set = await toolSets.of(scope.environmentId, scope.integrationId);
    onListed?.(set.fingerprint);
    return {
      tools: set.tools.map(({ name, description, inputSchema, outputSchema }) => ({
        name,
        description,
        inputSchema,
        ...(outputSchema === undefined ? {} : { outputSchema }),
      })),
    };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    const set = await toolSets.of(scope.environmentId, scope.integrationId);
    const tool = set.byName.get(name);
    if (!tool) {
      const names = set.tools.map((candidate) => candidate.name);
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown tool '${name}': ${names.length > 0 ? `the tools of this connection are ${names.join(', ')}` : 'this connection has no tools (its integration exposes no deployed action)'}. tools/list lists them.`,
      );
    }
    const parsed = inputFromArguments(tool, args, set.models);
    if (!parsed.ok) {
      const lines = parsed.problems.map((problem) => `${problem.path}: ${problem.message}`);
      return errorResult({
        error: {
          code: 'invalid_arguments',
          message: `Invalid arguments for tool '${name}', so nothing was run: ${lines.join('; ')}.`,
          errors: parsed.problems,
        },
      });
    }
    let outcome;
    try {
      outcome = await runActionFor(deps, scope, name, parsed.input);
    } catch (error) {
      // The run failed (its code and message, redacted), or it could not start (the action was
      // removed since the list, the database is down): a result the agent can read and act on.
      if (isServiceError(error)) {
        return errorResult({
          error: {
            code: error.code,
            message: error.message,
            ...(error.retryable ? { retryable: true } : {}),
            ...(error.details === undefined ? {} : { details: error.details }),
          },
        });
      }
      logger.error('mcp tools/call failed', {
        environment: scope.environmentId,
        integration: scope.integrationId,
        tool: name,
        error: error instanceof Error ? error.message : String(error),
      });
      throw new McpError(ErrorCode.InternalError, 'The server failed to run this tool; the failure is logged.');
    }
    if (!outcome.ok) return errorResult(outcome.failure);
    const output = outcome.output ?? null;
    if (tool.outputSchema === undefined) return { content: [{ type: 'text', text: JSON.stringify(output) }] };
    const structured = structuredOutput(tool, output);
    const verdict = set.checkOutput(tool, structured);
    if (!verdict.valid || !isJsonObject(structured)) {
      return errorResult({
        error: {
          code: 'action_output_invalid',
          message: `Action '${name}' ran and finished, but its output does not match the tool's outputSchema (${verdict.valid ? 'not an object' : verdict.message}); the output is in \`output\`. Do not run the tool again to get it.`,
          output,
        },
      });
    }
    return { content: [{ type: 'text', text: JSON.stringify(output) }], structuredContent: structured };
  });

  return server;
}

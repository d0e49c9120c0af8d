/**
 * The params of the requests POST /mcp serves, checked before the SDK sees them. The SDK's `Server`
 * parses a request's params with its zod schema and answers a failure as -32603 (Internal error) with
 * the raw zod issues as the message; JSON-RPC 2.0 says invalid params are -32602, and an agent (or its
 * developer) needs to read which param is wrong. Methods the server does not serve are left to the SDK
 * (-32601, Method not found).
 */
import {
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const SERVED = new Map<string, { safeParse(value: unknown): { success: boolean; error?: { issues: Issue[] } } }>([
  ['initialize', InitializeRequestSchema],
  ['ping', PingRequestSchema],
  ['tools/list', ListToolsRequestSchema],
  ['tools/call', CallToolRequestSchema],
]);

interface Issue {
  path: readonly PropertyKey[];
  message: string;
}

/** `params.arguments`, `params.clientInfo.name`: a path as the request spells it. */
function pathOf(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (out, key) => (typeof key === 'number' ? `${out}[${key}]` : out === '' ? String(key) : `${out}.${String(key)}`),
    '',
  );
}

export interface JsonRpcErrorResponse {
  jsonrpc: '2.0';
  id: string | number;
  error: { code: number; message: string; data: { errors: { path: string; message: string }[] } };
}

/**
 * The JSON-RPC error response for a request (a message with an `id` and a `method`) of a method the
 * server serves whose params do not fit that method; undefined for anything else.
 */
/** Problems an invalid-params answer lists at most. */
const MAX_LISTED_ISSUES = 100;

export function invalidParamsResponse(message: unknown): JsonRpcErrorResponse | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const { id, method } = message as { id?: unknown; method?: unknown };
  if ((typeof id !== 'string' && typeof id !== 'number') || typeof method !== 'string') return undefined;
  const schema = SERVED.get(method);
  if (schema === undefined) return undefined;
  const parsed = schema.safeParse(message);
  if (parsed.success || parsed.error === undefined) return undefined;
  // The first problems, and how many there were (an array of 199,000 bad items made a 36 MB answer).
  const issues = parsed.error.issues;
  const errors = issues
    .slice(0, MAX_LISTED_ISSUES)
    .map((issue) => ({ path: pathOf(issue.path), message: issue.message }));
  const more =
    issues.length > errors.length ? `; and ${issues.length - errors.length} more (${issues.length} in all)` : '';
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: ErrorCode.InvalidParams,
      message: `Invalid params of ${method}: ${errors.map((problem) => `${problem.path || 'the request'}: ${problem.message}`).join('; ')}${more}`,
      data: { errors },
    },
  };
}

/**
 * How an endpoint is declared: method, path, zod schemas for what it accepts and what it answers, and
 * a handler. The same declaration validates requests, documents the route in /openapi.json and types
 * the handler, so the three cannot drift apart.
 */
import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { ConnectionScope } from '../connections/types.js';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The environment a request authenticated as. */
export interface AuthenticatedEnvironment {
  id: string;
  name: string;
}

export interface RouteContext<Q, B, P> {
  req: Request;
  res: Response;
  /** Set for routes with `auth: 'secret-key'`; empty for `admin-key` and `none` routes. */
  environment: AuthenticatedEnvironment;
  query: Q;
  body: B;
  params: P;
  /** Set for `connectionScoped` routes, from the `Connection-Id` and `Provider-Config-Key` headers. */
  connection: ConnectionScope | undefined;
  requestId: string;
  /**
   * Runs synchronous work the request's body makes the handler do (a compile, a check, a serialization)
   * and charges the time it takes to the caller's rate budget, as the body's parse and validation are
   * (src/api/jsonBody.ts): the event loop it holds is every environment's.
   */
  spend: <T>(work: () => T) => T;
}

export interface RouteHeader {
  name: string;
  description: string;
  required?: boolean;
}

export interface RouteResponse {
  description: string;
  schema?: z.ZodType;
}

export interface RouteDefinition<Q = unknown, B = unknown, P = unknown> {
  method: HttpMethod;
  /** Express path, `:name` for parameters. */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  /**
   * `secret-key`: `Authorization: Bearer <environment secret key>`; `admin-key`: `Authorization: Bearer
   * <SERVICE_ADMIN_KEY>` (managing environments, docs/api.md "Environments"); `none`: public (health,
   * OAuth callback, webhooks).
   */
  auth: 'secret-key' | 'admin-key' | 'none';
  /** Requires the `Connection-Id` and `Provider-Config-Key` headers. */
  connectionScoped?: boolean;
  /**
   * `json-rpc`: every error of the route, from authentication and the body parser on, is answered as a
   * JSON-RPC 2.0 error object with the same HTTP status (POST /mcp speaks the Model Context Protocol,
   * whose clients read only that). Default: the `{ error: { code, message } }` envelope.
   */
  errorFormat?: 'json-rpc';
  /** Other request headers the route reads, for the documentation (the handler reads them itself). */
  headers?: readonly RouteHeader[];
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /**
   * The most structural JSON tokens its body may have (commas, colons, opening brackets outside strings;
   * src/api/jsonBody.ts), refused unparsed past it. Default DEFAULT_BODY_TOKENS (10,000); a route whose
   * body carries data of the caller's (an action's input, metadata, a deployment) takes more, up to
   * MAX_JSON_TOKENS.
   */
  bodyTokens?: number;
  params?: z.ZodType<P>;
  responses: Record<number, RouteResponse>;
  /**
   * Returns the JSON body of a 200 answer, or `undefined` after answering through `ctx.res` itself.
   * Throws ServiceError for anything else.
   */
  handler(ctx: RouteContext<Q, B, P>): Promise<unknown>;
}

/** Declares a route with its types inferred from its schemas. */
export function defineRoute<Q = Record<string, never>, B = undefined, P = Record<string, never>>(
  route: RouteDefinition<Q, B, P>,
): RouteDefinition<Q, B, P> {
  return route;
}

// Routes of different schemas live in one list; the handler types are checked at definition.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteDefinition<any, any, any>;

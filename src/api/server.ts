/**
 * The Express application of the REST API, without `listen` (the caller owns the socket, so tests run
 * it on an ephemeral loopback port). Every route is declared with `defineRoute`; this module adds what
 * every route shares: request ids, access logs without secrets, body limits, authentication by
 * environment secret key, per-key rate limiting, validation and one error envelope.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { isDatabaseUnavailable } from '../db/pool.js';
import { ServiceError, isServiceError } from '../errors.js';
import { httpRequestDuration } from '../metrics/index.js';
import type { AnyRoute, AuthenticatedEnvironment, RouteContext } from './route.js';
import { bodyCharge, DEFAULT_BODY_TOKENS, MAX_JSON_TOKENS, utf8MediaType, weighJsonBody } from './jsonBody.js';
import { createRateLimiter, type RateLimitOptions } from './rateLimit.js';
import { createAccessLogger, type Logger } from './logger.js';

export interface CreateServerOptions {
  routes: readonly AnyRoute[];
  /** Resolves a presented secret key to its environment; undefined when no environment has that key. */
  authenticate(secretKey: string): Promise<AuthenticatedEnvironment | undefined>;
  /**
   * The service admin key (SERVICE_ADMIN_KEY): the only key the `admin-key` routes (managing
   * environments) accept. Unset: those routes answer 403 `admin_key_not_configured`.
   */
  adminKey?: string | undefined;
  /** Answers requests no declared route matched (the generated endpoints of the deployment); falls through to 404 when it returns false. */
  fallback?: (
    req: Request,
    res: Response,
    environment: AuthenticatedEnvironment,
    requestId: string,
    /** Parses the JSON body into `req.body`, charged to the caller (call it only when the body is needed). */
    readBody: () => Promise<void>,
  ) => Promise<boolean>;
  /** Largest JSON body accepted. @default '5mb' */
  bodyLimit?: string;
  rateLimit?: RateLimitOptions;
  logger?: Logger;
  /**
   * Express handlers mounted after the declared routes and before the fallback (the OAuth connect and
   * callback router, which answers browsers with HTML rather than the JSON envelope).
   */
  mount?: readonly express.RequestHandler[];
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function createServer(options: CreateServerOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // No answer of this API is revalidated by its ETag (records pages move on by cursor, actions run
  // again): Express would hash every body for one (issue 31: a SHA-1 of each page of records).
  app.set('etag', false);
  app.set('query parser', 'extended');
  const logger = options.logger ?? createAccessLogger();
  const limiter = createRateLimiter(options.rateLimit);

  app.use((req, res, next) => {
    const presented = req.header('x-request-id');
    const requestId = presented && REQUEST_ID.test(presented) ? presented : randomUUID();
    res.locals['requestId'] = requestId;
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      httpRequestDuration.observe({ method: req.method, route: routeLabel(req, res), status: res.statusCode }, seconds);
      logger.info('request', {
        request_id: requestId,
        method: req.method,
        // The path only: query strings can carry OAuth codes and states.
        path: req.path,
        status: res.statusCode,
        duration_ms: Number((process.hrtime.bigint() - started) / 1_000_000n),
        environment: (res.locals['environment'] as AuthenticatedEnvironment | undefined)?.name,
      });
    });
    next();
  });
  // Routes that answer errors as JSON-RPC say so before anything can fail (the
  // checks below, the body parser), so that those errors are answered in their format too.
  for (const route of options.routes) {
    if (route.errorFormat !== 'json-rpc') continue;
    app[route.method](route.path, (_req, res, next) => {
      res.locals[ERROR_FORMAT] = 'json-rpc';
      next();
    });
  }
  // Postgres cannot store U+0000 in text, and no name, id or query value of this API needs it: refuse
  // it once here, for the path, the query and the headers, instead of failing deep in a query.
  app.use((req, _res, next) => {
    const headerValues = Object.values(req.headers).flat();
    if (/%00/.test(req.url) || req.url.includes('\u0000') || headerValues.some((value) => value?.includes('\u0000'))) {
      next(
        new ServiceError(
          'invalid_request',
          'NUL characters (U+0000) are not allowed in paths, query strings or headers.',
        ),
      );
      return;
    }
    // Malformed percent-encoding (a `%` without two hex digits, bytes that are not UTF-8, an encoded
    // lone surrogate) cannot name anything: 400 for every route, before any of them decodes it.
    try {
      decodeURIComponent(req.url);
    } catch {
      next(
        new ServiceError(
          'invalid_request',
          'The URL has a malformed percent-encoding: each % must start an escape of two hex digits, and the escaped bytes must be UTF-8.',
        ),
      );
      return;
    }
    next();
  });
  const bodyLimit = options.bodyLimit ?? '5mb';
  // Once for the app: the routes that read bytes (readBodyBytes) find it through the request.
  app.locals[BODY_LIMIT] = parseBodyLimit(bodyLimit);
  // JSON bodies are parsed only once their caller is known and counted (readJsonBody): an
  // unauthenticated request, or one to no route, is never parsed.
  const jsonParser = express.json({
    limit: bodyLimit,
    type: JSON_TYPES,
    // Weighed before it is parsed (src/api/jsonBody.ts); the bytes as sent are kept for what must see
    // them unchanged: webhook signatures, the proxy.
    verify: (req, res, buffer) => {
      (req as Request & { rawBody?: Buffer }).rawBody = buffer;
      const locals = (res as Response).locals;
      try {
        // The body is here: its work begins now, not when its headers came (see refuseWhileOwing).
        refuseWhileOwing(res as Response);
        weighJsonBody(buffer, locals[BODY_TOKENS] as number);
      } catch (error) {
        // The parser wraps what its hook throws; the refusal itself is kept here and thrown as it is.
        locals[BODY_REFUSED] = error;
        throw new Error('body refused before parsing');
      }
      locals[PARSE_STARTED] = performance.now();
    },
  });

  /**
   * Parses the request's JSON body (once) into `req.body`, refusing one of more than `mostTokens`
   * structural tokens unparsed. Returns the milliseconds the parse took, for the caller to charge with
   * the body's validation (chargeBody); a parse that fails is charged here.
   */
  async function readJsonBody(req: Request, res: Response, mostTokens: number): Promise<number> {
    if (res.locals[BODY_READ] === true) return 0;
    res.locals[BODY_READ] = true;
    if (req.is(JSON_TYPES)) req.headers['content-type'] = utf8MediaType(req.header('content-type'));
    res.locals[BODY_TOKENS] = mostTokens;
    return new Promise<number>((resolve, reject) => {
      jsonParser(req, res, (error?: Error) => {
        // The parse, done or failed, ran between the hook and here, in one turn of the loop.
        const started = res.locals[PARSE_STARTED] as number | undefined;
        const ms = started === undefined ? 0 : performance.now() - started;
        // Both are errors: a ServiceError of weighJsonBody, or the parser's own.
        const failure = (res.locals[BODY_REFUSED] as Error | undefined) ?? error;
        if (failure === undefined) {
          resolve(ms);
          return;
        }
        chargeBody(res, ms);
        reject(failure);
      });
    });
  }

  /**
   * Charges `ms` of the loop spent on a request's body to the rate bucket it was counted in; `included`:
   * less what the request's own count covers (once per request: its parse and validation).
   */
  function chargeBody(res: Response, ms: number, included = true): void {
    const bucket = res.locals[RATE_BUCKET] as string | undefined;
    if (bucket !== undefined) limiter.charge(bucket, bodyCharge(ms, included));
  }

  for (const route of options.routes) {
    app[route.method](route.path, (req, res, next) => {
      handle(route, req, res).catch(next);
    });
  }

  async function handle(route: AnyRoute, req: Request, res: Response): Promise<void> {
    const requestId = res.locals['requestId'] as string;
    if (route.auth === 'admin-key') await authenticateAdmin(req, res);
    const environment = route.auth === 'secret-key' ? await authenticateRequest(req, res) : anonymous;
    // A route without a body schema reads its body itself, if at all (the proxy and webhooks as bytes).
    const parseMs =
      route.body !== undefined && route.auth !== 'none'
        ? await readJsonBody(req, res, route.bodyTokens ?? DEFAULT_BODY_TOKENS)
        : 0;
    const problems: ValidationProblem[] = [];
    const validating = performance.now();
    const ctx: RouteContext<unknown, unknown, unknown> = {
      req,
      res,
      environment,
      requestId,
      params: parse(route.params, req.params, 'path', problems),
      query: parse(route.query, req.query, 'query', problems),
      body: parse(route.body, req.body, 'body', problems),
      connection: undefined,
      spend: (work) => {
        refuseWhileOwing(res);
        const started = performance.now();
        try {
          return work();
        } finally {
          chargeBody(res, performance.now() - started, false);
        }
      },
    };
    // Validation runs on the shared loop too, and refused values cost the most (an issue each).
    chargeBody(res, parseMs + performance.now() - validating);
    if (problems.length > 0) throw invalidRequest(problems);
    if (route.connectionScoped) ctx.connection = connectionHeaders(req, environment);
    const result = await route.handler(ctx);
    if (result !== undefined && !res.headersSent) res.status(200).json(result);
  }

  // Compared as digests of equal length, so the time taken tells nothing of the key.
  const adminDigest = options.adminKey ? createHash('sha256').update(options.adminKey, 'utf8').digest() : undefined;

  /**
   * The admin key manages environments and nothing else: it is not an environment key, so it opens no
   * environment's data, and no environment's key opens these routes.
   */
  async function authenticateAdmin(req: Request, res: Response): Promise<void> {
    const presented = bearerOf(req, 'service admin key');
    if (!adminDigest) {
      throw new ServiceError(
        'admin_key_not_configured',
        'Managing environments through the API is off: set SERVICE_ADMIN_KEY on the API server (docs/api.md "Environments").',
      );
    }
    const digest = createHash('sha256').update(presented, 'utf8').digest();
    if (!timingSafeEqual(digest, adminDigest)) {
      const environment = await options.authenticate(presented);
      throw environment
        ? new ServiceError(
            'admin_key_required',
            'This route manages environments and needs the service admin key (SERVICE_ADMIN_KEY); an environment’s secret key manages only its own environment.',
          )
        : new ServiceError('invalid_admin_key', 'This is not the service admin key (SERVICE_ADMIN_KEY).');
    }
    // Environment ids hold no NUL (src/connections/environmentStore.ts): this bucket is the admin key's own.
    takeToken('\u0000admin', res);
  }

  function bearerOf(req: Request, what: string): string {
    const header = req.header('authorization');
    if (!header) {
      throw new ServiceError('missing_authorization', `Send the header \`Authorization: Bearer <${what}>\`.`);
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) {
      throw new ServiceError('invalid_authorization', `The Authorization header must be \`Bearer <${what}>\`.`);
    }
    return match[1];
  }

  async function authenticateRequest(req: Request, res: Response): Promise<AuthenticatedEnvironment> {
    const environment = await options.authenticate(bearerOf(req, 'environment secret key'));
    if (!environment) {
      throw new ServiceError(
        'invalid_secret_key',
        'No environment has this secret key. Check the key in your environment settings.',
      );
    }
    takeToken(environment.id, res);
    res.locals['environment'] = environment;
    return environment;
  }

  /** One request of the key's rate budget; 429 with Retry-After when it is spent. */
  function takeToken(bucket: string, res: Response): void {
    res.locals[RATE_BUCKET] = bucket;
    const verdict = limiter.take(bucket);
    if (!verdict.allowed) throw rateLimited(res, verdict.retryAfterSeconds);
  }

  /**
   * Refuses a request's body work while its key is in debt: its token was taken when it arrived, and
   * requests the key sent side by side would otherwise each do their work before any charge lands.
   * Checked once, as the request's first body work begins (its body parsed, or a route's `spend`), so
   * that its own charges never refuse it.
   */
  function refuseWhileOwing(res: Response): void {
    if (res.locals[DEBT_CHECKED] === true) return;
    res.locals[DEBT_CHECKED] = true;
    const bucket = res.locals[RATE_BUCKET] as string | undefined;
    const owing = bucket === undefined ? undefined : limiter.owing(bucket);
    if (owing) throw rateLimited(res, owing.retryAfterSeconds);
  }

  function rateLimited(res: Response, retryAfterSeconds: number): ServiceError {
    res.setHeader('Retry-After', String(retryAfterSeconds));
    return new ServiceError('rate_limited', `Too many requests for this key; retry after ${retryAfterSeconds} s.`, {
      retryable: true,
    });
  }

  for (const handler of options.mount ?? []) app.use(handler);

  app.use((req, res, next) => {
    if (!options.fallback) {
      next();
      return;
    }
    const run = async (): Promise<void> => {
      const environment = await authenticateRequest(req, res);
      const answered = await options.fallback?.(req, res, environment, res.locals['requestId'] as string, async () =>
        chargeBody(res, await readJsonBody(req, res, MAX_JSON_TOKENS)),
      );
      if (!answered) next();
    };
    run().catch(next);
  });

  app.use((req, _res, next) => {
    next(
      new ServiceError('route_not_found', `No route ${req.method} ${req.path}. See GET /openapi.json for the routes.`),
    );
  });

  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const failure = toServiceError(error);
    if (failure.status >= 500) {
      logger.error('request failed', {
        request_id: res.locals['requestId'] as string,
        code: failure.code,
        error: error instanceof Error ? error.message : String(error),
      });
    }
    if (res.headersSent) return;
    if (failure.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(failure.retryAfterSeconds));
    res
      .status(failure.status)
      .json(res.locals[ERROR_FORMAT] === 'json-rpc' ? jsonRpcErrorBody(failure) : errorBody(failure));
  });

  return app;
}

/**
 * The route of a request as a metrics label: the template that matched (`/connections/:connection_id`),
 * a generated endpoint's template, or the mount point of a static folder; never the raw path, whose
 * ids would make a series per connection.
 */
export function routeLabel(req: Request, res: Response): string {
  const template = res.locals[ROUTE_TEMPLATE] as string | undefined;
  if (template !== undefined) return template;
  const route: unknown = (req as { route?: unknown }).route;
  const path: unknown = typeof route === 'object' && route !== null ? (route as { path?: unknown }).path : undefined;
  if (typeof path === 'string') return `${req.baseUrl}${path}`;
  return req.baseUrl ? `${req.baseUrl}/*` : 'unmatched';
}

/** Where a handler that is no Express route (a generated endpoint) names its template for routeLabel. */
export const ROUTE_TEMPLATE = 'routeTemplate';

/** The server's body limit in bytes, for a route that reads its body unparsed (readBodyBytes). */
export function bodyLimitOf(req: Request): number {
  const limit = req.app.locals[BODY_LIMIT] as number | undefined;
  if (limit === undefined) throw new Error('bodyLimitOf: the request did not come through createServer');
  return limit;
}

/** `'64kb'`, `'5mb'`, `'1024'`: bytes as Express's body parser reads its limit (units of 1,024). */
export function parseBodyLimit(limit: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(limit);
  if (!match)
    throw new ServiceError(
      'invalid_settings',
      `body limit ${JSON.stringify(limit)} is not a size such as '5mb' or '64kb'`,
    );
  const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(match[2] ?? 'b').toLowerCase() as 'b'];
  return Math.floor(Number(match[1]) * unit);
}

/** The request body as received, when it was JSON (kept by the body parser). */
export function rawBodyOf(req: Request): Buffer | undefined {
  return (req as Request & { rawBody?: Buffer }).rawBody;
}

const anonymous: AuthenticatedEnvironment = { id: '', name: '' };

/** Where the server's body limit in bytes is kept (app.locals), for bodyLimitOf. */
const BODY_LIMIT = 'bodyLimitBytes';
/** Where the rate bucket charged for a request is kept, for its body's cost. */
const RATE_BUCKET = 'rateBucket';
/** Whether the request's key was checked for debt before its body work (refuseWhileOwing). */
const DEBT_CHECKED = 'debtChecked';
/**
 * res.locals of a request's JSON body: whether it was read, the most tokens its route takes, why it was
 * refused before parsing, and when its parse began.
 */
const BODY_READ = 'bodyRead';
const BODY_TOKENS = 'bodyTokens';
const BODY_REFUSED = 'bodyRefused';
const PARSE_STARTED = 'parseStarted';
/** The content types read as JSON. */
export const JSON_TYPES = ['application/json', 'application/*+json'];

/** Where a route that answers errors as JSON-RPC marks its response (see RouteDefinition.errorFormat). */
const ERROR_FORMAT = 'errorFormat';

/** JSON-RPC 2.0 error codes of the service's codes: the spec's own where one fits, -32000 (server error) else. */
const JSON_RPC_CODES: Partial<Record<ServiceError['code'], number>> = {
  invalid_json: -32700,
  invalid_request: -32600,
  payload_too_large: -32600,
  missing_connection_headers: -32600,
  // The SDK's own code for an unknown session.
  mcp_session_not_found: -32001,
  internal_error: -32603,
};

/**
 * A failure as a JSON-RPC 2.0 error response (`id: null`: the request's id may not have been read).
 * `data` carries the service's own code, status and details, as the envelope would.
 */
export function jsonRpcErrorBody(failure: ServiceError): {
  jsonrpc: '2.0';
  id: null;
  error: { code: number; message: string; data: { code: string; status: number; errors?: object[] } };
} {
  return {
    jsonrpc: '2.0',
    id: null,
    error: {
      code: JSON_RPC_CODES[failure.code] ?? -32000,
      message: failure.message,
      data: {
        code: failure.code,
        status: failure.status,
        ...(failure.details === undefined ? {} : { errors: errorList(failure.details) }),
      },
    },
  };
}

/**
 * `{ error: { code, message, errors? } }`, the body of every error the API answers. `errors` is always a
 * list of objects, as the de-facto envelope has it: details that are one object become a list of it, and
 * plain values become `{ message }`.
 */
export function errorBody(failure: ServiceError): { error: { code: string; message: string; errors?: object[] } } {
  return {
    error: {
      code: failure.code,
      message: failure.message,
      ...(failure.details === undefined ? {} : { errors: errorList(failure.details) }),
    },
  };
}

function errorList(details: unknown): object[] {
  const items = Array.isArray(details) ? (details as unknown[]) : [details];
  return items.map((item) => (typeof item === 'object' && item !== null ? item : { message: String(item) }));
}

export interface ValidationProblem {
  path: string;
  code: string;
  message: string;
}

/** Parses one part of the request, collecting its problems so that all parts are reported at once. */
export function parse<T>(
  schema: z.ZodType<T> | undefined,
  value: unknown,
  where: 'query' | 'body' | 'path',
  problems: ValidationProblem[],
): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value ?? (where === 'body' ? undefined : {}));
  if (result.success) return result.data;
  for (const issue of result.error.issues) {
    problems.push({ path: [where, ...issue.path.map(String)].join('.'), code: issue.code, message: issue.message });
  }
  return undefined as T;
}

/** Problems an invalid_request answer lists at most (the message says how many there were). */
export const MAX_LISTED_PROBLEMS = 100;

export function invalidRequest(problems: ValidationProblem[]): ServiceError {
  const first = problems[0];
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : '';
  const listed = problems.length > MAX_LISTED_PROBLEMS ? `; the first ${MAX_LISTED_PROBLEMS} are listed` : '';
  return new ServiceError(
    'invalid_request',
    `Invalid request${first ? `: ${first.path}: ${first.message}` : ''}${more}${listed}`,
    {
      details: problems.slice(0, MAX_LISTED_PROBLEMS),
    },
  );
}

export function connectionHeaders(req: Request, environment: AuthenticatedEnvironment) {
  const connectionId = req.header('connection-id');
  const integrationId = req.header('provider-config-key');
  if (!connectionId || !integrationId) {
    throw new ServiceError(
      'missing_connection_headers',
      'This route acts for one connection: send the headers `Connection-Id` and `Provider-Config-Key`.',
    );
  }
  return { environmentId: environment.id, integrationId, connectionId };
}

/** Translates anything thrown into the taxonomy; unknown errors become a 500 without internals. */
export function toServiceError(error: unknown): ServiceError {
  if (isServiceError(error)) return error;
  if (typeof error === 'object' && error !== null && 'type' in error) {
    const type = error.type;
    const status = (error as { status?: unknown }).status;
    if (type === 'entity.too.large') {
      return new ServiceError('payload_too_large', 'The request body is larger than the limit of this server.');
    }
    if (type === 'entity.parse.failed') {
      return new ServiceError('invalid_json', 'The request body is not valid JSON.');
    }
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return new ServiceError('invalid_request', 'The request could not be read.', { status });
    }
  }
  if (isDatabaseUnavailable(error)) {
    return new ServiceError(
      'database_unreachable',
      'The service’s database cannot be reached right now; try again in a few seconds.',
      { retryable: true },
    );
  }
  if (error instanceof URIError) {
    return new ServiceError('invalid_request', 'The URL has a malformed percent-encoding.');
  }
  // Postgres refuses U+0000 in text (22021) and in jsonb (22P05): a body value carried one (paths,
  // queries and headers are refused before any route).
  const sqlState = (error as { code?: unknown } | null)?.code;
  if (sqlState === '22021' || sqlState === '22P05') {
    return new ServiceError(
      'invalid_request',
      'A value of the request contains a NUL character (U+0000), which cannot be stored; nothing was changed by the statement that refused it.',
    );
  }
  if (error instanceof z.ZodError) {
    return new ServiceError('invalid_request', 'The request is invalid.', { details: error.issues });
  }
  return new ServiceError(
    'internal_error',
    'The server failed to answer this request; it is logged with its request id.',
  );
}

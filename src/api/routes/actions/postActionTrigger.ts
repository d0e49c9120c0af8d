import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ConnectionScope } from '../../../connections/types.js';
import { ERROR_CODES, isServiceError, RelayedError, ServiceError } from '../../../errors.js';
import { actionDuration } from '../../../metrics/index.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute, type RouteContext } from '../../route.js';
import { rootActionId } from '../../../temporal/runAuthority.js';
import { assertConnection, redactorFor, scopeOf } from '../shared.js';
import { MAX_JSON_TOKENS } from '../../jsonBody.js';

// The default of ACTION_CONCURRENCY_PER_ENVIRONMENT (src/settings.ts), for an API built without it.
const DEFAULT_ACTION_CONCURRENCY = 25;
// An action runs for 5 minutes at most (src/temporal/syncControl.ts): its slot lapses a minute after.
const ACTION_SLOT_TTL_MS = 6 * 60_000;
// Actions are short: a slot frees within seconds, usually.
const TOO_MANY_RETRY_AFTER_SECONDS = 1;

/** HTTP status of an action whose script threw ActionError: the request was understood, the action refused it. */
export const ACTION_FAILURE_STATUS = ERROR_CODES.action_script_failure.status;

export const actionTriggerBody = z
  .object({
    action_name: z.string().min(1),
    input: z.unknown().optional().describe('The input of the action (its input model).'),
  })
  .strict();

export const actionFailureSchema = z.object({
  error_type: z.literal('action_script_failure'),
  payload: z.unknown().describe('The object the script gave to ActionError.'),
  error: z
    .object({ code: z.literal('action_script_failure'), message: z.string(), payload: z.unknown() })
    .describe('The same failure in the error envelope, as the de-facto API also answers it.'),
});

/** What a run of an action came to: its output, or the body of its ActionError (redacted). */
export type ActionRunResult =
  { ok: true; output: unknown } | { ok: false; failure: z.infer<typeof actionFailureSchema> };

/** How deep an action's input may nest objects and lists (docs/api.md "Routes", POST /action/trigger). */
export const MAX_INPUT_DEPTH = 200;

/** Whether a JSON value nests objects and lists more than `limit` deep; iterative, for values too deep to recurse. */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (typeof next.value !== 'object' || next.value === null) continue;
    if (next.depth >= limit) return true;
    const children: unknown[] = Array.isArray(next.value) ? next.value : Object.values(next.value);
    for (const child of children) pending.push({ value: child, depth: next.depth + 1 });
  }
  return false;
}

/**
 * Runs a deployed action for one connection and waits for it: the one path of POST /action/trigger,
 * the generated action endpoints and the tools of POST /mcp (same run, same durability, limits and
 * authority). Fails with 404 `unknown_connection` or `action_not_found` before any run starts; a run
 * that fails other than by ActionError throws its code, its message and details redacted of the
 * connection's credentials, as is an ActionError's payload.
 */
export async function runActionFor(
  deps: ApiDeps,
  scope: ConnectionScope,
  actionName: string,
  input: unknown,
): Promise<ActionRunResult> {
  await assertConnection(deps, scope);
  if (nestedDeeperThan(input, MAX_INPUT_DEPTH)) {
    // Temporal's payload converter fails on such a value ("Unable to convert … to payload"), which
    // answered 500: refused here, before a run, as the bad input it is.
    throw new ServiceError(
      'invalid_request',
      `The input of action '${actionName}' is nested deeper than ${MAX_INPUT_DEPTH} levels of objects and lists; nothing was run. Send a flatter input.`,
    );
  }
  const definition = await deps.deployments.actionDefinition(scope.environmentId, scope.integrationId, actionName);
  let outcome;
  const started = process.hrtime.bigint();
  const observe = (result: 'success' | 'action_error' | 'failed'): void => {
    actionDuration.observe(
      { integration: scope.integrationId, action: actionName, outcome: result },
      Number(process.hrtime.bigint() - started) / 1e9,
    );
  };
  // One of the environment's action slots for as long as the action runs (shared by every API process).
  const workflowId = rootActionId({ ...definition, connectionId: scope.connectionId }, randomUUID());
  const limit = deps.actionConcurrency ?? DEFAULT_ACTION_CONCURRENCY;
  if (
    deps.runSlots &&
    !(await deps.runSlots.take({
      environmentId: scope.environmentId,
      kind: 'action',
      runId: workflowId,
      limit,
      ttlMs: ACTION_SLOT_TTL_MS,
    }))
  ) {
    throw new ServiceError(
      'too_many_runs',
      `the environment has ${limit} actions running, as many as it may at once (ACTION_CONCURRENCY_PER_ENVIRONMENT); retry in ${TOO_MANY_RETRY_AFTER_SECONDS} s`,
      { retryable: true, retryAfterSeconds: TOO_MANY_RETRY_AFTER_SECONDS },
    );
  }
  try {
    outcome = await deps.syncs.runAction({ definition, connectionId: scope.connectionId, input }, { workflowId });
    observe(outcome.ok ? 'success' : 'action_error');
  } catch (error) {
    observe('failed');
    if (!isServiceError(error)) throw error;
    // The run's failure message may repeat a credential (a script's own message, say): never shown, never logged.
    const redact = await redactorFor(deps, scope);
    throw new RelayedError(error.code, redact.text(error.message), {
      status: error.status,
      retryable: error.retryable,
      ...(error.details === undefined ? {} : { details: redact.value(error.details) }),
    });
  } finally {
    await deps.runSlots?.release(workflowId).catch(() => undefined);
  }
  if (outcome.ok) return { ok: true, output: outcome.output };
  const failure: z.infer<typeof actionFailureSchema> = {
    ...outcome.body,
    error: {
      code: 'action_script_failure',
      message: `action '${actionName}' refused: its script threw ActionError (see payload)`,
      payload: outcome.body.payload,
    },
  };
  // The payload is the script's: it may repeat a credential of the connection.
  return { ok: false, failure: (await redactorFor(deps, scope)).value(failure) };
}

/**
 * Runs a deployed action and answers its output (200) or the ActionError body (422). Shared by
 * POST /action/trigger and the generated action endpoints.
 */
export async function triggerAction(
  deps: ApiDeps,
  res: RouteContext<unknown, unknown, unknown>['res'],
  scope: ConnectionScope,
  actionName: string,
  input: unknown,
): Promise<undefined> {
  const result = await runActionFor(deps, scope, actionName, input);
  if (result.ok) res.status(200).json(result.output ?? null);
  else res.status(ACTION_FAILURE_STATUS).json(result.failure);
  return undefined;
}

export const postActionTriggerRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/action/trigger',
    summary: 'Run an action for one connection and return its output',
    description: `Waits for the action to finish. When the script throws ActionError the answer is ${ACTION_FAILURE_STATUS} with \`{ error_type: "action_script_failure", payload, error: { code: "action_script_failure", message, payload } }\`; other failures are errors in the envelope (404 action_not_found for an action that is not deployed or was removed). \`X-Async: true\` is refused (400 async_actions_unsupported).`,
    tags: ['actions'],
    auth: 'secret-key',
    connectionScoped: true,
    headers: [{ name: 'X-Async', description: 'Only `false`: `true` is refused (400 async_actions_unsupported).' }],
    body: actionTriggerBody,
    // It carries the caller's own data (src/api/jsonBody.ts): as many tokens as any body may have.
    bodyTokens: MAX_JSON_TOKENS,
    responses: {
      200: { description: 'The output of the action' },
      [ACTION_FAILURE_STATUS]: { description: 'The script threw ActionError', schema: actionFailureSchema },
    },
    handler: async ({ body, req, res, connection }) => {
      // The de-facto client's asynchronous trigger expects `{ id, statusUrl }` to poll; answering with
      // the output instead would break it, so it is refused rather than ignored.
      if (/^(true|1)$/i.test(req.header('x-async') ?? '')) {
        throw new ServiceError(
          'async_actions_unsupported',
          'X-Async: actions run synchronously here; send the request without X-Async and read the output from the answer',
        );
      }
      return triggerAction(deps, res, scopeOf(connection), body.action_name, body.input);
    },
  });

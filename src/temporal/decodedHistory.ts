/**
 * The history of one run (its sync entity's execution, a `runSync` or a `runAction`) with every payload decoded through
 * the service's codecs (src/runtime/payloadStorage.ts: the claim check, then the encryption, the
 * reverse of their encoding order): inputs, results, local activity markers, failures'
 * encoded attributes, step summaries. What `service replay` replays (src/cli/replay.ts) without
 * the service's encryption key or database. Only the environment a run belongs to may read it: its
 * workflow id names it (src/temporal/runAuthority.ts syncRunId, rootActionId).
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import {
  decode,
  visit,
  walkGetWorkflowExecutionHistoryResponse,
} from '@temporalio/common/lib/internal-non-workflow/index.js';
// CommonJS without named exports that Node's ESM loader sees: the default import is the module.
import proto from '@temporalio/proto';
import { ServiceError } from '../errors.js';
import { redactValue, secretForms } from '../runtime/redaction.js';

/**
 * The workflow types whose histories a script author may replay: a sync run is an execution of its
 * sync entity (issue 31), or a `runSync` of its own (entities before that); an action run is a `runAction`.
 */
export const REPLAYABLE_TYPES = ['manageSync', 'runSync', 'runAction'] as const;

/**
 * The execution a run id names: `<entity id>:run:<Temporal run id>` is that execution of the entity
 * (issue 31); any other id, or one that names no such execution, is a workflow id of its own.
 */
export async function runExecution(
  client: Client,
  runId: string,
): Promise<{ handle: ReturnType<Client['workflow']['getHandle']>; workflowId: string }> {
  // Temporal's run ids are UUIDs; anything else is not an execution's (and Temporal refuses to look it up).
  const inline = /^(sync:.+):run:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i.exec(runId);
  if (inline) {
    const handle = client.workflow.getHandle(inline[1]!, inline[2]);
    try {
      if ((await handle.describe()).type === 'manageSync') return { handle, workflowId: inline[1]! };
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
  }
  return { handle: client.workflow.getHandle(runId), workflowId: runId };
}

/** A sync run's id (`sync:<env>:…:run:<unique>`) or an action run's (`action:<env>:…`) of the environment. */
export function isRunOfEnvironment(runId: string, environmentId: string): boolean {
  if (environmentId.includes(':')) return false;
  return (
    (runId.startsWith(`sync:${environmentId}:`) && /:run:[^:]+$/.test(runId)) ||
    runId.startsWith(`action:${environmentId}:`)
  );
}

export interface DecodedRunHistory {
  runId: string;
  /** The workflow id of the execution: the run id, or its sync entity's id (replay needs it). */
  workflowId: string;
  workflowType: string;
  /** Temporal's execution status: COMPLETED, FAILED, RUNNING, TERMINATED, … */
  status: string;
  /** The history as protobuf's JSON object form (bytes in base64, 64-bit numbers and enums as strings), payloads decoded. */
  history: Record<string, unknown>;
  /**
   * True when every payload was replaced by WITHHELD: the run's connection is gone, so the credentials
   * its payloads may hold can no longer be told apart (redactorFor answered undefined).
   */
  payloadsWithheld: boolean;
}

/** What each payload of a withheld history holds instead of its value. */
export const WITHHELD = "[withheld: the run's connection was deleted, and its credentials can no longer be redacted]";

function notFound(runId: string): ServiceError {
  return new ServiceError('unknown_run', `no run '${runId}' in this environment`);
}

/**
 * Fetches and decodes the history of a run of `environmentId`. A run of another environment, an id of
 * another shape, and an execution that is not a run are all `unknown_run` (404): which ids exist
 * elsewhere is not told.
 */
export async function fetchDecodedRunHistory(
  client: Client,
  environmentId: string,
  runId: string,
  /**
   * What to apply to every decoded JSON value, given the run's connection (read from the run's own
   * input) and when the run started: the API redacts that connection's credentials with it. Undefined
   * when that connection is gone: every payload is withheld then.
   */
  redactorFor?: (run: {
    integrationId: string;
    connectionId: string;
    startedAt: Date;
    /** The `id` of each connection record of this connection the run read (svc.getConnection). */
    recordIds: number[];
  }) => Promise<((value: unknown) => unknown) | undefined>,
): Promise<DecodedRunHistory> {
  if (!isRunOfEnvironment(runId, environmentId)) throw notFound(runId);
  const { handle, workflowId } = await runExecution(client, runId);
  let description;
  try {
    description = await handle.describe();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) throw notFound(runId);
    throw error;
  }
  if (!(REPLAYABLE_TYPES as readonly string[]).includes(description.type)) throw notFound(runId);
  const history = await handle.fetchHistory();
  const codecs = client.options.loadedDataConverter.payloadCodecs;
  await visit({ history }, walkGetWorkflowExecutionHistoryResponse, {
    transformPayload: async (payload) => (await decode(codecs, [payload]))[0] ?? payload,
    transformPayloads: (payloads) => decode(codecs, payloads),
    skipHeaders: true,
    skipSearchAttributes: true,
  });
  const input = jsonOf(history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]);
  const definition = (input as { definition?: { environmentId?: unknown; integrationId?: unknown } } | undefined)
    ?.definition;
  const connectionId = (input as { connectionId?: unknown } | undefined)?.connectionId;
  // The run's own input names its environment too: a run that says otherwise is not shown.
  if (definition?.environmentId !== environmentId) throw notFound(runId);
  let payloadsWithheld = false;
  if (redactorFor) {
    // Credentials the run itself read (svc.getConnection's results) are redacted too: a token
    // refreshed or a key replaced since is no longer among the connection's current values.
    const read = await connectionsReadBy(history);
    const redact =
      typeof definition.integrationId === 'string' && typeof connectionId === 'string'
        ? await redactorFor({
            integrationId: definition.integrationId,
            connectionId,
            startedAt: description.startTime,
            recordIds: read.records.filter((record) => record.connectionId === connectionId).map((record) => record.id),
          })
        : undefined;
    let rewrite: (payload: Payload) => Payload;
    if (redact === undefined) {
      payloadsWithheld = true;
      const withheld: Payload = {
        metadata: { encoding: encoder.encode('json/plain') },
        data: encoder.encode(JSON.stringify(WITHHELD)),
      };
      rewrite = () => withheld;
    } else {
      const seen = read.secrets;
      rewrite = (payload) => {
        const value = jsonOf(payload);
        return value === undefined
          ? payload
          : { ...payload, data: encoder.encode(JSON.stringify(redactValue(redact(value), seen))) };
      };
    }
    await visit({ history }, walkGetWorkflowExecutionHistoryResponse, {
      transformPayload: (payload) => Promise.resolve(rewrite(payload)),
      transformPayloads: (payloads) => Promise.resolve(payloads.map(rewrite)),
      skipHeaders: true,
      skipSearchAttributes: true,
    });
  }
  return {
    runId,
    workflowId,
    workflowType: description.type,
    status: description.status.name,
    history: historyToObject(history),
    payloadsWithheld,
  };
}

/** The fields of a connection record's `credentials` (and of its `raw` token answer) that hold secrets. */
const SECRET_FIELDS = new Set([
  'access_token',
  'refresh_token',
  'id_token',
  'token',
  'apiKey',
  'api_key',
  'password',
  'client_secret',
  'private_key',
  'oauth_token',
  'oauth_token_secret',
]);

/**
 * What the history's decoded payloads hold of connection records: every secret of every `credentials`
 * object, in every spelling, and the `id` and `connection_id` of each record around one.
 */
async function connectionsReadBy(
  history: proto.temporal.api.history.v1.IHistory,
): Promise<{ secrets: string[]; records: { id: number; connectionId: string }[] }> {
  const values: string[] = [];
  const records: { id: number; connectionId: string }[] = [];
  const collect = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(collect);
      return;
    }
    if (!node || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    const credentials = record['credentials'];
    if (credentials && typeof credentials === 'object' && !Array.isArray(credentials)) {
      if (typeof record['id'] === 'number' && typeof record['connection_id'] === 'string') {
        records.push({ id: record['id'], connectionId: record['connection_id'] });
      }
      const fields = credentials as Record<string, unknown>;
      for (const source of [fields, fields['raw']]) {
        if (!source || typeof source !== 'object') continue;
        for (const [name, value] of Object.entries(source as Record<string, unknown>)) {
          if (SECRET_FIELDS.has(name) && typeof value === 'string') values.push(value);
        }
      }
      if (typeof fields['username'] === 'string' && typeof fields['password'] === 'string') {
        values.push(`${fields['username']}:${fields['password']}`);
      }
    }
    Object.values(record).forEach(collect);
  };
  await visit({ history }, walkGetWorkflowExecutionHistoryResponse, {
    transformPayload: (payload) => {
      collect(jsonOf(payload));
      return Promise.resolve(payload);
    },
    transformPayloads: (payloads) => {
      for (const payload of payloads) collect(jsonOf(payload));
      return Promise.resolve(payloads);
    },
    skipHeaders: true,
    skipSearchAttributes: true,
  });
  return { secrets: secretForms(values), records };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The value of a `json/plain` payload; undefined for any other. */
export function jsonOf(payload: Payload | null | undefined): unknown {
  const encoding = payload?.metadata?.['encoding'];
  if (!payload?.data || !encoding || decoder.decode(encoding) !== 'json/plain') return undefined;
  return JSON.parse(decoder.decode(payload.data)) as unknown;
}

/**
 * The JSON form of a history, read back by historyFromObject. Not the SDK's historyToJSON: in this
 * install it fails with "type must be a Type" (@temporalio/common and @temporalio/proto each carry a
 * copy of protobufjs 8; see src/runtime/payloadStorage.ts), so the generated message's own
 * toObject is used.
 */
export function historyToObject(history: proto.temporal.api.history.v1.IHistory): Record<string, unknown> {
  const message = proto.temporal.api.history.v1.History.fromObject(history);
  return proto.temporal.api.history.v1.History.toObject(message, { bytes: String, longs: String, enums: String });
}

/** The history of historyToObject's JSON form. */
export function historyFromObject(value: unknown): proto.temporal.api.history.v1.History {
  return proto.temporal.api.history.v1.History.fromObject(value as Record<string, unknown>);
}

/**
 * The second wall (docs/architecture.md "Threat model", "What a workflow may send"): the commands a
 * workflow task completion carries to Temporal, checked in the worker's main thread before the SDK
 * sends them.
 *
 * A script that got hold of every workflow-side function could otherwise address any execution of the
 * namespace by id: start a child with another environment's running action's id and the reuse policy
 * TERMINATE_IF_RUNNING (Temporal terminates the victim), signal another environment's sync entity
 * (pause, trigger, reconfigure with its own bundle), or request another execution's cancellation.
 * Signals and cancellations pass through no activity, so the run authority (runAuthority.ts) never
 * sees them. A script runs in a V8 context of a workflow thread; the completion leaves that thread as
 * data, and the main thread decides here from the sending execution's facts (its type, id, parent and
 * namespace, which Temporal gave the worker when it began the execution: `info`), never from anything
 * the script chose.
 *
 * Allowed, exactly what the service's workflows send (workflows/*.ts):
 *
 * | sender                                    | child starts                                                                 | signals, cancellations |
 * | ----------------------------------------- | ---------------------------------------------------------------------------- | ---------------------- |
 * | `manageSync` (parentless, `sync:…`)        | `runSync` `<own id>:run:<x>`; `deliverWebhook` `<own id>:run:<x>:webhook` (abandoned); `runAction` `action:<uuid>` (a script run inside the entity) | none |
 * | `runSync`, `runAction`                    | `runAction` `action:<uuid>` (svc.triggerAction)                              | none                   |
 * | `applyDeployment` (parentless, `deploy:<env>`) | none                                                                    | `reconfigure` to `sync:<env>:…` |
 * | any other                                 | none                                                                         | none                   |
 *
 * Every child: the sender's namespace, no id reuse policy (Temporal's default, which never terminates
 * a running execution), no cron schedule, the sender's task queue (or its action queue, for an action).
 * A continue-as-new keeps the sender's type and task queue. Cancelling one's own child (by its
 * sequence number: Temporal checks it is the sender's child), timers, activities, markers, queries and
 * the workflow's own end pass unchecked. A Nexus operation, a signal to a child by id, a request to
 * cancel any execution by id: refused for every sender (the service sends none).
 *
 * A refusal replaces the completion's commands by one FailWorkflowExecution with a `scope_denied`
 * application failure (non-retryable): the offending command never reaches Temporal, the run ends
 * FAILED with a code its caller reads, and the decision is a function of the workflow's own commands
 * and facts, so a replay of the same history makes it again (see the doc for why not a termination).
 */
import { actionTaskQueue } from '../../workflows/taskQueues.js';

/** What the worker knows of the sending execution (the SDK's WorkflowInfo; read before any workflow code ran). */
export interface SenderFacts {
  workflowId: string;
  workflowType: string;
  namespace: string;
  taskQueue: string;
  parent?: { workflowId: string } | undefined;
}

/** The fields of Core's workflow commands (coresdk.workflow_commands) this policy reads. */
interface NamespacedExecution {
  namespace?: string | null | undefined;
  workflowId?: string | null | undefined;
  runId?: string | null | undefined;
}

export interface PolicyCommand {
  startChildWorkflowExecution?: {
    namespace?: string | null | undefined;
    workflowId?: string | null | undefined;
    workflowType?: string | null | undefined;
    taskQueue?: string | null | undefined;
    parentClosePolicy?: number | null | undefined;
    workflowIdReusePolicy?: number | null | undefined;
    cronSchedule?: string | null | undefined;
  } | null;
  signalExternalWorkflowExecution?: {
    workflowExecution?: NamespacedExecution | null;
    childWorkflowId?: string | null | undefined;
    signalName?: string | null | undefined;
  } | null;
  requestCancelExternalWorkflowExecution?: { workflowExecution?: NamespacedExecution | null } | null;
  scheduleNexusOperation?: unknown;
  continueAsNewWorkflowExecution?: { workflowType?: string | null | undefined; taskQueue?: string | null } | null;
}

/**
 * Every field of Core's WorkflowCommand (coresdk.workflow_commands, SDK 1.24): the two annotations and
 * the variants. The variants this policy reads are checked below; the others act on the sender itself
 * (its timers, activities, markers, search attributes, end) or on its own child by sequence number.
 */
const KNOWN_FIELDS = new Set([
  'userMetadata',
  'eventGroupMarkers',
  'startTimer',
  'scheduleActivity',
  'respondToQuery',
  'requestCancelActivity',
  'cancelTimer',
  'completeWorkflowExecution',
  'failWorkflowExecution',
  'continueAsNewWorkflowExecution',
  'cancelWorkflowExecution',
  'setPatchMarker',
  'startChildWorkflowExecution',
  'cancelChildWorkflowExecution',
  'requestCancelExternalWorkflowExecution',
  'signalExternalWorkflowExecution',
  'cancelSignalWorkflow',
  'scheduleLocalActivity',
  'requestCancelLocalActivity',
  'upsertWorkflowSearchAttributes',
  'modifyWorkflowProperties',
  'updateResponse',
  'scheduleNexusOperation',
  'requestCancelNexusOperation',
]);

/** The stable code of a refused command (src/errors.ts). */
export const COMMAND_REFUSED_CODE = 'scope_denied';

/** Core's enum values (temporal.api.enums.v1). 0 is "unspecified": Temporal's default. */
const PARENT_CLOSE_ABANDON = 2;

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const NESTED_ACTION_ID = new RegExp(`^action:${UUID}$`);
const DEPLOY_ID = /^deploy:([^:]+)$/;

/**
 * Is this a sync entity's id, `sync:<env>:<integration>:<connection>:<sync>` (runAuthority.ts's shape:
 * the environment and the sync hold no colon)? Without a regular expression: a deploy wave checks one
 * per signal, and `.+:.+:` backtracks.
 */
function isEntityId(id: string): boolean {
  if (!id.startsWith('sync:')) return false;
  const environmentEnd = id.indexOf(':', 5);
  const syncStart = id.lastIndexOf(':') + 1;
  // Between the environment and the sync: an integration and a connection, neither empty.
  const middle = id.indexOf(':', environmentEnd + 1);
  return environmentEnd > 5 && syncStart < id.length && middle > environmentEnd + 1 && middle < syncStart - 2;
}

const unset = (value: unknown): boolean => value === undefined || value === null || value === 0 || value === '';

/**
 * Why this completion's commands may not be sent, or undefined when every one is allowed. A plain loop
 * over the commands; only a child start or a signal reads an id.
 */
export function refusedCommand(sender: SenderFacts, commands: readonly PolicyCommand[]): string | undefined {
  for (const command of commands) {
    // Fail closed: a command of a kind this policy does not know (a newer SDK's) is not sent unread.
    for (const key in command) {
      if (!KNOWN_FIELDS.has(key) && (command as Record<string, unknown>)[key] != null) {
        return `${sender.workflowType} ${sender.workflowId} sent a command the worker does not know (${key}): not sent`;
      }
    }
    const child = command.startChildWorkflowExecution;
    if (child) {
      const refusal = refusedChild(sender, child);
      if (refusal !== undefined) return refusal;
      continue;
    }
    const signal = command.signalExternalWorkflowExecution;
    if (signal) {
      const refusal = refusedSignal(sender, signal);
      if (refusal !== undefined) return refusal;
      continue;
    }
    const cancel = command.requestCancelExternalWorkflowExecution;
    if (cancel) {
      return `${sender.workflowType} ${sender.workflowId} may not request the cancellation of ${cancel.workflowExecution?.workflowId ?? 'an execution'}: the service's workflows cancel only their own children`;
    }
    if (command.scheduleNexusOperation) {
      return `${sender.workflowType} ${sender.workflowId} may not start a Nexus operation`;
    }
    const next = command.continueAsNewWorkflowExecution;
    if (next) {
      if (!unset(next.workflowType) && next.workflowType !== sender.workflowType) {
        return `${sender.workflowType} ${sender.workflowId} may not continue as a ${next.workflowType}`;
      }
      if (!unset(next.taskQueue) && next.taskQueue !== sender.taskQueue) {
        return `${sender.workflowType} ${sender.workflowId} may not continue on task queue ${next.taskQueue}`;
      }
    }
  }
  return undefined;
}

function refusedChild(
  sender: SenderFacts,
  child: NonNullable<PolicyCommand['startChildWorkflowExecution']>,
): string | undefined {
  const id = child.workflowId ?? '';
  const type = child.workflowType ?? '';
  // Written only for a refusal: the allowed path allocates no message.
  const what = () => `${sender.workflowType} ${sender.workflowId} may not start ${type || 'a workflow'} ${id}`;
  if (!unset(child.namespace) && child.namespace !== sender.namespace)
    return `${what()} in namespace ${child.namespace}`;
  if (!unset(child.workflowIdReusePolicy)) {
    return `${what()} with an id reuse policy (${child.workflowIdReusePolicy}): the service's children use Temporal's default, which never ends a running execution`;
  }
  if (!unset(child.cronSchedule)) return `${what()} with a cron schedule`;
  const own = sender.workflowId;
  const entity = sender.workflowType === 'manageSync' && !sender.parent && isEntityId(own);
  let shape = false;
  let abandons = false;
  if (type === 'runAction' && (entity || sender.workflowType === 'runSync' || sender.workflowType === 'runAction')) {
    shape = NESTED_ACTION_ID.test(id);
  } else if (type === 'runSync' && entity) {
    const rest = id.startsWith(`${own}:run:`) ? id.slice(own.length + 5) : ':';
    shape = rest.length > 0 && !rest.includes(':');
  } else if (type === 'deliverWebhook' && entity) {
    const rest = id.startsWith(`${own}:run:`) && id.endsWith(':webhook') ? id.slice(own.length + 5, -8) : ':';
    shape = rest.length > 0 && !rest.includes(':');
    abandons = true;
  }
  if (!shape) return `${what()}: not a child its type starts`;
  // A sync run's nested action goes to the action queue (workflows/svc.ts); anything else stays on the sender's.
  const queue = child.taskQueue;
  if (
    !unset(queue) &&
    queue !== sender.taskQueue &&
    !(type === 'runAction' && queue === actionTaskQueue(sender.taskQueue))
  ) {
    return `${what()} on task queue ${queue}`;
  }
  if (!unset(child.parentClosePolicy) && !(abandons && child.parentClosePolicy === PARENT_CLOSE_ABANDON)) {
    return `${what()} with parent close policy ${child.parentClosePolicy}`;
  }
  return undefined;
}

function refusedSignal(
  sender: SenderFacts,
  signal: NonNullable<PolicyCommand['signalExternalWorkflowExecution']>,
): string | undefined {
  const target = signal.workflowExecution;
  const id = target?.workflowId ?? '';
  // Only a deploy's apply signals, and only `reconfigure` to the sync entities of its own environment.
  const environment =
    sender.workflowType === 'applyDeployment' && !sender.parent ? DEPLOY_ID.exec(sender.workflowId)?.[1] : undefined;
  if (
    environment !== undefined &&
    target &&
    (unset(target.namespace) || target.namespace === sender.namespace) &&
    signal.signalName === 'reconfigure' &&
    id.startsWith(`sync:${environment}:`) &&
    isEntityId(id)
  ) {
    return undefined;
  }
  const to = target
    ? `${id}${unset(target.namespace) ? '' : ` in namespace ${target.namespace}`}`
    : (signal.childWorkflowId ?? 'an execution');
  return `${sender.workflowType} ${sender.workflowId} may not signal ${signal.signalName ?? ''} to ${to}`;
}

/** The FailWorkflowExecution command that ends the sender's run instead of the refused commands. */
export function refusalCommand(message: string): object {
  return {
    failWorkflowExecution: {
      failure: {
        message,
        source: 'TypeScriptSDK',
        applicationFailureInfo: { type: COMMAND_REFUSED_CODE, nonRetryable: true },
      },
    },
  };
}

/**
 * Why this completion may not be sent as it is, or undefined. A failed completion (a failed workflow
 * task) carries no command.
 */
export function refusedCompletion(sender: SenderFacts, completion: unknown): string | undefined {
  // Fail closed: what the SDK's workflow hands the worker is a decoded completion, successful or
  // failed (its Worker encodes it afterwards); anything else would pass unread.
  const { successful, failed } = (completion ?? {}) as {
    successful?: { commands?: PolicyCommand[] | null } | null;
    failed?: object | null;
  };
  if (successful == null) {
    return failed != null
      ? undefined
      : `${sender.workflowType} ${sender.workflowId}: a completion the worker cannot read`;
  }
  const commands = successful.commands;
  if (commands != null && !Array.isArray(commands)) {
    return `${sender.workflowType} ${sender.workflowId}: commands the worker cannot read`;
  }
  return commands && commands.length > 0 ? refusedCommand(sender, commands) : undefined;
}

/** The completion with its commands replaced by the refusal, every other field kept. */
export function refusingCompletion<C>(completion: C, message: string): C {
  const successful = (completion as { successful?: object | null }).successful;
  return { ...completion, successful: { ...successful, commands: [refusalCommand(message)] } };
}

/** The SDK's workflow info fields the wrapper reads. */
interface PolicedWorkflowInfo {
  workflowId: string;
  workflowType: string;
  namespace: string;
  taskQueue: string;
  parent?: { workflowId: string } | undefined;
}

/**
 * A Worker's workflow creator whose workflows' completions are checked here (a refused one is sent as `refusingCompletion`) (the SDK's
 * `WorkflowCreator` and `Workflow`, as src/temporal/lanes.ts drives them). `onRefusal` hears of each
 * refusal (the worker logs it).
 */
export function policingCommands<
  O extends { info: PolicedWorkflowInfo },
  W extends { activate(activation: never): Promise<unknown> },
>(
  creator: { createWorkflow(options: O): Promise<W>; destroy(): Promise<void> },
  onRefusal: (sender: SenderFacts, message: string) => void = () => undefined,
): { createWorkflow(options: O): Promise<W>; destroy(): Promise<void> } {
  return {
    createWorkflow: async (options: O): Promise<W> => {
      // Copied before the workflow exists: no code of the workflow's can have touched what Temporal gave.
      const { workflowId, workflowType, namespace, taskQueue, parent } = options.info;
      const sender: SenderFacts = {
        workflowId,
        workflowType,
        namespace,
        taskQueue,
        parent: parent ? { workflowId: parent.workflowId } : undefined,
      };
      const workflow = await creator.createWorkflow(options);
      const activate = workflow.activate.bind(workflow) as (activation: unknown) => Promise<unknown>;
      return Object.assign(workflow, {
        activate: async (activation: unknown) => {
          const completion = await activate(activation);
          const refusal = refusedCompletion(sender, completion);
          if (refusal === undefined) return completion;
          onRefusal(sender, refusal);
          return refusingCompletion(completion, refusal);
        },
      });
    },
    destroy: () => creator.destroy(),
  };
}

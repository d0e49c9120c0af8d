import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Encryptor } from '../src/connections/encryption.js';
import type { ConnectionScope } from '../src/connections/types.js';
import type { Pool } from '../src/db/pool.js';
import { recordHealthCheck, type HealthCheckRow } from '../src/health.js';
import { syncRunsStarted } from '../src/metrics/index.js';
import type { SyncScope } from '../src/records/types.js';
import { createRunHistory } from '../src/runtime/runHistory.js';
import { createRunAuthorities } from '../src/temporal/runAuthority.js';
import { createDeployActivities, type DeployActivityDeps } from './deploy.js';
import { createRuntimeActivities, type BegunRun, type RunCommit, type RuntimeDeps } from './runtime.js';
import { createSyncRunActivities } from './syncRuns.js';
import { createWebhookActivities } from './webhooks.js';
import { createWebhookDeliveryStore } from '../src/webhooks/deliveries.js';
import { createWebhookSettingsStore } from '../src/webhooks/settings.js';

export type { RuntimeDeps, ActionResolver } from './runtime.js';

export interface ActivityDeps {
  db: Pool;
  /**
   * What the script runtime's activities need (records cache, connections, script bundles, logs).
   * Without it the worker serves the health check only, and sync and action runs fail to schedule.
   */
  runtime?: (Omit<RuntimeDeps, 'db'> & { encryptor: Encryptor; deploy?: DeployActivityDeps | undefined }) | undefined;
}

/** The longest token a health check writes (the callers send a uuid or a short name). */
const HEALTH_TOKEN_MAX = 200;

function createHealthActivities({ db }: { db: Pool }) {
  return {
    /**
     * Writes a row and reads it back: the worker's proof that Postgres is there. Only for the
     * `checkHealth` workflow, whose type Temporal gives (a script's run that schedules it by name wrote
     * rows of its choosing into a table no environment owns: test/runtime/commandAttacks.test.ts).
     */
    recordHealthCheck: (token: string): Promise<HealthCheckRow> => {
      const caller = Context.current().info.workflowType;
      if (caller !== 'checkHealth') {
        throw ApplicationFailure.nonRetryable(
          `recordHealthCheck is the checkHealth workflow's, not ${caller ?? 'an unknown caller'}'s`,
          'scope_denied',
        );
      }
      if (typeof token !== 'string' || token.length > HEALTH_TOKEN_MAX) {
        throw ApplicationFailure.nonRetryable(
          `a health check token is a string of at most ${HEALTH_TOKEN_MAX} characters`,
          'invalid_request',
        );
      }
      return recordHealthCheck(db, token);
    },
  };
}

/**
 * The runtime activities, with `beginRun` (each sync run's first step: it takes the run's fencing
 * token) counting the run as started in the metrics, once it succeeded (a failed attempt counts
 * nothing). A worker crash between the step and its record in the history may count a run twice (the
 * step runs again).
 */
function countingRunStarts<
  T extends {
    beginRun(
      input: SyncScope & { runId: string },
      commit?: RunCommit,
      scriptHash?: string,
    ): Promise<BegunRun | undefined>;
  },
>(activities: T): T {
  return {
    ...activities,
    async beginRun(
      input: SyncScope & { runId: string },
      commit?: RunCommit,
      scriptHash?: string,
    ): Promise<BegunRun | undefined> {
      const committed = await activities.beginRun(input, commit, scriptHash);
      syncRunsStarted.inc({ integration: input.integrationId, sync: input.syncName });
      return committed;
    },
  };
}

/**
 * The activity map of the worker. Dependencies come in, so tests build the same map over their own
 * database (samples-typescript `activities-dependency-injection`).
 */
export function createActivities({ db, runtime }: ActivityDeps) {
  // One cache of verified callers for every activity of the worker (src/temporal/runAuthority.ts).
  const authorities = runtime ? (runtime.authorities ?? createRunAuthorities({ client: runtime.temporal })) : undefined;
  const connections = runtime?.connections;
  const secretsOf = async (scope: ConnectionScope): Promise<string[]> =>
    (await connections?.credentialSecrets?.(scope).catch(() => undefined)) ?? [];
  const webhookDeliveries = runtime
    ? createWebhookDeliveryStore({ db, settings: createWebhookSettingsStore({ db, encryptor: runtime.encryptor }) })
    : undefined;
  return {
    ...createHealthActivities({ db }),
    ...(runtime && authorities
      ? {
          ...countingRunStarts(createRuntimeActivities({ db, ...runtime, authorities })),
          // What the sync entity does after each run: the run history and the outbound webhooks.
          ...createSyncRunActivities({
            runHistory: createRunHistory({ db }),
            authorities,
            secretsOf,
            inboundQueue: runtime.inboundQueue,
            runSlots: runtime.runSlots,
            recordDeliveries: (event, key) => webhookDeliveries!.record(event, key),
          }),
          ...createWebhookActivities({ db, encryptor: runtime.encryptor, authorities, secretsOf }),
          // A deploy's apply (workflows/applyDeployment.ts).
          ...(runtime.deploy ? createDeployActivities({ ...runtime.deploy, authorities }) : {}),
        }
      : {}),
  };
}

export type Activities = ReturnType<typeof createHealthActivities> & ReturnType<typeof createRuntimeActivities>;

import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { syncEntityId } from './runAuthority.js';

/**
 * The only module that knows how the service reaches Temporal: address, namespace, task queues and
 * workflow ids. Everything else asks here.
 */
export interface TemporalSettings {
  address: string;
  namespace: string;
  /** Task queue of the service's workflows and activities. */
  taskQueue: string;
}

export const DEFAULT_TASK_QUEUE = 'integration-service';

export async function connectClient(
  settings: TemporalSettings,
): Promise<{ client: Client; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address: settings.address, connectTimeout: 5000 });
  const client = new Client({ connection, namespace: settings.namespace });
  return { client, close: () => connection.close() };
}

export async function connectWorker(settings: TemporalSettings): Promise<NativeConnection> {
  return NativeConnection.connect({ address: settings.address });
}

/** Workflow ids are business keys, so a second start of the same thing is refused by Temporal itself. */
export const workflowIds = {
  healthCheck: (token: string): string => `health:${token}`,
};

/** The sync entity workflow of one sync of one connection (ARCHITECTURE.md "The durable execution model"). */
export function syncWorkflowId(scope: {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
}): string {
  return syncEntityId(scope);
}

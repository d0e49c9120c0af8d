import { z } from 'zod';
import { MIN_RUNS_MS } from '../../../config/types.js';
import { MAX_RUNS_TEXT, MIN_RUNS_TEXT, parseRuns, RUNS_FORMS } from '../../../config/runs.js';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { selectSyncs } from '../../../syncs/selection.js';

export const syncFrequencyBody = z
  .object({
    provider_config_key: z.string().min(1),
    connection_id: z.string().min(1),
    sync_name: z.string().min(1),
    frequency: z
      .string()
      .min(1)
      .max(100)
      .nullable()
      .describe(
        `How often this sync runs for this connection, in the notation of \`runs\` (${RUNS_FORMS}), at least every ${MIN_RUNS_TEXT}, at most every ${MAX_RUNS_TEXT}; null goes back to the integration's \`runs\`.`,
      ),
  })
  .strict();

export const syncFrequencySchema = z.object({
  frequency: z.string().describe('The frequency the sync now runs at for this connection.'),
  frequency_ms: z.number(),
  overridden: z.boolean().describe('True when it is the connection’s own; false when it is `runs` of service.yaml.'),
});

export const putSyncConnectionFrequencyRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'put',
    path: '/sync/update-connection-frequency',
    summary: 'Set (or clear) how often one sync runs for one connection, overriding `runs`',
    description:
      'The sync’s next run moves to its last finish plus the new frequency (at once when that has passed); other connections keep theirs. The override survives redeploys, even of a changed `runs`, and goes with the connection.',
    tags: ['syncs'],
    auth: 'secret-key',
    body: syncFrequencyBody,
    responses: {
      200: { description: 'The frequency in force', schema: syncFrequencySchema },
      400: { description: '`invalid_frequency`' },
      404: { description: '`unknown_connection`, `unknown_sync`' },
    },
    handler: async ({ body, environment }) => {
      const { definitions } = await selectSyncs(deps, environment.id, {
        provider_config_key: body.provider_config_key,
        connection_id: body.connection_id,
        syncs: [body.sync_name],
      });
      const definition = definitions[0]!;
      let value: { frequency: string; frequencyMs: number } | null = null;
      if (body.frequency !== null) {
        const parsed = parseRuns(body.frequency);
        if (!parsed.ok) {
          throw new ServiceError(
            'invalid_frequency',
            parsed.reason === 'below_minimum'
              ? `body.frequency ${JSON.stringify(body.frequency)} is more often than the minimum of every ${MIN_RUNS_TEXT} (${MIN_RUNS_MS} ms)`
              : parsed.reason === 'above_maximum'
                ? `body.frequency ${JSON.stringify(body.frequency)} is longer than the maximum of every ${MAX_RUNS_TEXT}`
                : `body.frequency ${JSON.stringify(body.frequency)} is not a frequency: use ${RUNS_FORMS}`,
          );
        }
        value = { frequency: body.frequency.trim(), frequencyMs: parsed.ms };
      }
      const ref = { ...definition, connectionId: body.connection_id };
      await deps.syncFrequencies.set(ref, value);
      // Hands the entity its definition with the override applied (or started, when it had none yet).
      await deps.syncs.ensureSync(definition, body.connection_id);
      const runs = await runsText(deps, environment.id, body.provider_config_key, body.sync_name);
      return value
        ? { frequency: value.frequency, frequency_ms: value.frequencyMs, overridden: true }
        : { frequency: runs, frequency_ms: definition.runsMs, overridden: false };
    },
  });

/** `runs` of the deployed service.yaml for a sync, as written there. */
export async function runsText(
  deps: ApiDeps,
  environmentId: string,
  integrationId: string,
  syncName: string,
): Promise<string> {
  const deployment = await deps.deployments.current(environmentId);
  return (
    deployment?.config.integrations
      .find((integration) => integration.id === integrationId)
      ?.syncs.find((sync) => sync.name === syncName)?.runs ?? ''
  );
}

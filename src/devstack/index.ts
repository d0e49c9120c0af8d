import { startPostgres, type PostgresServer, type StartPostgresOptions } from './postgres.js';
import { isFree } from './process.js';
import { startTemporal, type StartTemporalOptions, type TemporalServer } from './temporal.js';

export { DevStackError } from './process.js';
export type { PostgresServer } from './postgres.js';
export type { TemporalServer } from './temporal.js';

export interface Stack {
  temporal: TemporalServer;
  postgres: PostgresServer;
  stop(): Promise<void>;
}

export interface StartStackOptions {
  /** Folder for state that survives a restart (Temporal's SQLite file, the Postgres cluster); scratch when omitted. */
  dataDir?: string | undefined;
  /** Tests and benchmarks: durability off for speed. */
  ephemeral?: boolean;
  ui?: boolean;
  /** gRPC port of the dev server to use when free (the Web UI is on this + 1000); any free port otherwise. */
  temporalPort?: number;
  database?: string;
  env?: NodeJS.ProcessEnv;
  /** TLS and API key for the Temporal server at TEMPORAL_ADDRESS. */
  temporalConnection?: StartTemporalOptions['connection'];
}

/**
 * The dev stack used by tests, benchmarks and the local start command alike: Temporal and Postgres,
 * each taken from the environment (TEMPORAL_ADDRESS, DATABASE_URL) or started here. Both start at
 * once; if one fails, the other is stopped again.
 */
export async function startStack(options: StartStackOptions = {}): Promise<Stack> {
  const temporalOptions: StartTemporalOptions = {
    dbFile: options.dataDir ? `${options.dataDir}/temporal.sqlite` : undefined,
    ui: options.ui ?? false,
    // The preferred port is kept when free; otherwise the dev server's ports are all chosen (and
    // chosen again when one is taken before the server binds it).
    ...(options.temporalPort && (await isFree(options.temporalPort)) ? { port: options.temporalPort } : {}),
    ...(options.env ? { env: options.env } : {}),
    ...(options.temporalConnection ? { connection: options.temporalConnection } : {}),
  };
  const postgresOptions: StartPostgresOptions = {
    dataDir: options.dataDir ? `${options.dataDir}/postgres` : undefined,
    ephemeral: options.ephemeral ?? false,
    ...(options.database ? { database: options.database } : {}),
    ...(options.env ? { env: options.env } : {}),
  };
  const [temporal, postgres] = await Promise.allSettled([
    startTemporal(temporalOptions),
    startPostgres(postgresOptions),
  ]);
  if (temporal.status === 'rejected' || postgres.status === 'rejected') {
    if (temporal.status === 'fulfilled') await temporal.value.stop();
    if (postgres.status === 'fulfilled') await postgres.value.stop();
    const failed = temporal.status === 'rejected' ? temporal : (postgres as PromiseRejectedResult);
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }
  return {
    temporal: temporal.value,
    postgres: postgres.value,
    stop: async () => {
      await Promise.allSettled([temporal.value.stop(), postgres.value.stop()]);
    },
  };
}

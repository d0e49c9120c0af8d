/**
 * What the environments routes share (create, list, rename, delete, rotate a secret key: a file
 * each, beside this one), their view of an environment and its schemas. These routes take the
 * service admin key (SERVICE_ADMIN_KEY), never an environment's secret key: environments are isolated
 * from each other, so what acts on several of them needs an authority above any one of them
 * (docs/api.md "Environments"). The admin key in turn opens no environment's data: every other route
 * refuses it.
 */
import { z } from 'zod';
import type { Environment } from '../../../connections/environmentStore.js';

export const environmentSchema = z.object({
  id: z.string().describe('Stable id: in workflow ids and records; never changes.'),
  name: z.string().describe('Lower-case letters, digits, `_` and `-`; in inbound webhook URLs.'),
  public_key: z.string().describe('Names the environment in connect links; not a secret.'),
  created_at: z.string(),
});
export type EnvironmentView = z.infer<typeof environmentSchema>;

export const createEnvironmentBody = z
  .object({ name: z.string().min(1).max(63).describe('Lower-case letters, digits, `_` and `-`, at most 63.') })
  .strict();
export const renameEnvironmentBody = createEnvironmentBody;

export const environmentIdParams = z.object({ id: z.string().min(1).max(64) }).strict();

export const environmentWithKeySchema = z.object({
  environment: environmentSchema,
  secret_key: z.string().describe('The secret key: shown this once, stored only as a SHA-256 hash.'),
});

export const environmentView = (environment: Environment): EnvironmentView => ({
  id: environment.id,
  name: environment.name,
  public_key: environment.publicKey,
  created_at: environment.createdAt,
});

/** What every environments route shares: the admin key, not an environment's. */
export const ADMIN_ROUTE = {
  tags: ['environments'],
  auth: 'admin-key' as const,
};

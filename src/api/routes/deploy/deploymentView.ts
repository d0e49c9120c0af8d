/**
 * What the routes of the version history of deploys share, used by `service deploy --redeploy` and the
 * dashboard: list (getDeployments.ts), one version with the deployed source of every script
 * (getDeployment.ts), its request (getDeploymentRequest.ts), and re-deploying it
 * (postDeploymentRedeploy.ts). (Preview and apply are postDeployPreview.ts and postDeploy.ts.)
 */
import { z } from 'zod';

export const planSchema = z.object({
  version: z.number().int(),
  previousVersion: z.number().int().nullable(),
  destructive: z.boolean(),
  changes: z.array(
    z.object({
      change: z.record(z.string(), z.unknown()),
      description: z.string(),
      destructive: z.boolean(),
      connections: z.number().int(),
      recordsErased: z.number().int(),
    }),
  ),
});

export const deploymentSummarySchema = z.object({
  version: z.number().int(),
  status: z.enum(['applying', 'active', 'superseded']),
  createdAt: z.string(),
  activatedAt: z.string().nullable(),
  redeployOf: z.number().int().nullable(),
});

/** A version is a Postgres integer: a larger number names no version (404), not an overflow (500). */
export const deploymentVersionParams = z
  .object({ version: z.coerce.number().int().min(1).max(2_147_483_647) })
  .strict();

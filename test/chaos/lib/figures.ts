/**
 * Figures of a chaos part: printed, and written as JSON to CHAOS_RESULTS_DIR when the one-command
 * runner (test/chaos/run.ts) set it, which turns them into the figures section of docs/reliability.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export type Figures = Record<string, string | number | boolean>;

/** CHAOS_FULL=1 selects the full sizes; CI runs the short ones. */
export const FULL = process.env['CHAOS_FULL'] === '1';

export function size(short: number, full: number): number {
  return FULL ? full : short;
}

export function recordFigures(part: string, figures: Figures): void {
  process.stdout.write(`[chaos:${part}] ${JSON.stringify(figures)}\n`);
  const dir = process.env['CHAOS_RESULTS_DIR'];
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `${part}.json`),
    JSON.stringify({ part, full: FULL, at: new Date().toISOString(), figures }, null, 2),
  );
}

/**
 * Command-line flags of a benchmark: `--name N` for each name given, every value a positive integer.
 * @example const { records, reads } = positiveIntegerFlags({ records: 1_000_000, reads: 2000 });
 */
import { parseArgs } from 'node:util';

export function positiveIntegerFlags<T extends Record<string, number>>(
  defaults: T,
  argv: string[] = process.argv.slice(2),
): { [K in keyof T]: number } {
  const options = Object.fromEntries(
    Object.entries(defaults).map(([name, value]) => [name, { type: 'string' as const, default: String(value) }]),
  );
  const { values } = parseArgs({ args: argv, options, strict: true });
  const parsed: Record<string, number> = {};
  for (const name of Object.keys(defaults)) {
    const raw = values[name];
    const n = Number(raw);
    if (typeof raw !== 'string' || !/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
      throw new Error(`--${name} must be a positive integer, got ${String(raw)}`);
    }
    parsed[name] = n;
  }
  return parsed as { [K in keyof T]: number };
}

/**
 * Captures every line the test process writes (process.stdout/stderr and console) from the moment a
 * test file calls `useLogScan()`, and after the file checks that no secret it was told about appears.
 */
import { expect } from 'vitest';
import { deferCleanup } from '../../kit/cleanup.js';

export function useLogScan() {
  const written: string[] = [];
  const secrets = new Set<string>();
  const originals = {
    stdout: process.stdout.write.bind(process.stdout),
    stderr: process.stderr.write.bind(process.stderr),
  };
  const capture =
    (original: typeof process.stdout.write) =>
    (chunk: unknown, ...rest: unknown[]): boolean => {
      written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
      return (original as (...args: unknown[]) => boolean)(chunk, ...rest);
    };
  process.stdout.write = capture(originals.stdout);
  process.stderr.write = capture(originals.stderr);
  // Vitest routes console.* through its own streams, not process.stdout: wrap those too.
  const methods = ['log', 'info', 'warn', 'error', 'debug'] as const;
  const consoleOriginals = methods.map((name) => console[name].bind(console));
  methods.forEach((name, index) => {
    const original = consoleOriginals[index]!;
    console[name] = (...args: unknown[]) => {
      written.push(args.map((arg) => (typeof arg === 'string' ? arg : JSON.stringify(arg))).join(' '));
      original(...args);
    };
  });

  deferCleanup(() => {
    process.stdout.write = originals.stdout;
    process.stderr.write = originals.stderr;
    methods.forEach((name, index) => (console[name] = consoleOriginals[index]!));
    const text = written.join('\n');
    const leaked = [...secrets].filter((secret) => text.includes(secret));
    expect(leaked.map((secret) => `${secret.slice(0, 4)}…`)).toEqual([]);
  });

  return {
    /** Remembers values that must never appear in a log line. */
    secret(...values: string[]): void {
      for (const value of values) if (value.length >= 6) secrets.add(value);
    },
    /** Everything written so far, to check the capture sees the service's log lines at all. */
    lines(): string[] {
      return written.join('').split('\n');
    },
    secretCount(): number {
      return secrets.size;
    },
  };
}

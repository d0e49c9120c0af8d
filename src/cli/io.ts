/** Where a CLI command writes and what it runs in: runCli's sink (src/cli/main.ts), passed to every command. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  cwd: string;
  env: Record<string, string | undefined>;
  /** A person at a terminal can answer questions (deploy's confirmation). */
  interactive?: boolean;
}

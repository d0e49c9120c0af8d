/** JSON-lines logs of the API. Callers pass fields explicitly; nothing logs headers or bodies. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export function createAccessLogger(write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  const emit = (level: string, message: string, fields: Record<string, unknown> = {}): void => {
    if (process.env['SERVICE_LOG_LEVEL'] === 'silent') return;
    write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
  };
  return {
    info: (message, fields) => emit('info', message, fields),
    error: (message, fields) => emit('error', message, fields),
  };
}

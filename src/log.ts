/**
 * The service's log: one pino logger per process, JSON lines on stdout (one object a line: `time`,
 * `level`, `message`, `component` and the fields of the event), readable lines instead when stdout is
 * a terminal. The API's access log, the background jobs, the database pool and the Temporal runtime
 * (src/temporal/logger.ts) all write through it, at the level of SERVICE_LOG_LEVEL.
 *
 * What is logged is chosen so that no secret reaches it (credentials are redacted by value where they
 * are read, and a script's errors never reach the worker's log: src/temporal/logger.ts). The field
 * names below are redacted as well, as a second line of defence against an object logged whole.
 */
import { pino, stdSerializers, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/** The values of SERVICE_LOG_LEVEL, most verbose first; `silent` writes nothing. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

/** What stands in a log line for the value of a redacted field (the service's by-value marker, too). */
export const LOG_CENSOR = '[redacted]';

/** Field names whose values are secrets wherever they appear in a logged object (top level or one down). */
const SECRET_FIELDS = [
  'authorization',
  'cookie',
  'password',
  'secret',
  'secretKey',
  'secret_key',
  'client_secret',
  'clientSecret',
  'access_token',
  'accessToken',
  'refresh_token',
  'refreshToken',
  'id_token',
  'apiKey',
  'api_key',
  'privateKey',
  'private_key',
  'credentials',
];

/** Request headers that carry credentials (in `headers`, `req.headers`, `request.headers`, `response.headers`). */
const SECRET_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'];

/**
 * pino `redact` paths: each secret field at the top level, and the secret headers. Exact paths only:
 * pino's wildcard paths (`*.password`) cost about 15 µs a path on every line (measured: 36 of them
 * took an access-log line from 11 µs to 330–600 µs), so the fields one level down are found by
 * `redactNested` instead.
 */
export const REDACTED_PATHS: readonly string[] = [
  ...SECRET_FIELDS,
  ...['req', 'request', 'response'].flatMap((parent) =>
    SECRET_HEADERS.map((header) => `${parent}.headers["${header}"]`),
  ),
];

const SECRET_FIELD_NAMES: ReadonlySet<string> = new Set([...SECRET_FIELDS, ...SECRET_HEADERS]);

/**
 * A logged object with the secret fields of its object fields censored (`{ connection: { client_secret } }`,
 * `{ headers: { authorization } }`), as a copy; the object itself when there are none.
 */
function redactNested(object: Record<string, unknown>): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(object)) {
    const value = object[key];
    if (value === null || typeof value !== 'object' || Array.isArray(value) || ArrayBuffer.isView(value)) continue;
    if (value instanceof Error) continue; // the error serializer writes its class, message and stack
    let censored: Record<string, unknown> | undefined;
    for (const name of Object.keys(value)) {
      if (SECRET_FIELD_NAMES.has(name)) (censored ??= { ...(value as Record<string, unknown>) })[name] = LOG_CENSOR;
    }
    if (censored) (copy ??= { ...object })[key] = censored;
  }
  return copy ?? object;
}

export interface CreateLoggerOptions {
  /** @default 'info' */
  level?: LogLevelName;
  /** Where lines go: the process's stdout (the default) or stderr (a command whose stdout is its answer), or a stream. */
  destination?: 'stdout' | 'stderr' | DestinationStream;
}

/** A logger of the service's shape: JSON lines with an ISO `time`, a `level` name and a `message`. */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      messageKey: 'message',
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: redactNested },
      serializers: { err: stdSerializers.err, error: stdSerializers.err },
      redact: { paths: [...REDACTED_PATHS], censor: LOG_CENSOR },
    },
    typeof options.destination === 'object' ? options.destination : processStream(options.destination ?? 'stdout'),
  );
}

/**
 * The process's stream, looked up at each write (so that whoever replaces `process.stdout.write`, as
 * the tests that scan output for secrets do, sees these lines too); a terminal gets readable lines.
 */
function processStream(name: 'stdout' | 'stderr'): DestinationStream {
  return {
    write: (line: string) => {
      const stream = process[name];
      stream.write(stream.isTTY ? readable(line) : line);
    },
  };
}

const LEVEL_LABELS: Record<string, string> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO ', warn: 'WARN ' };

/** A JSON log line as a terminal shows it: `12:00:00.000 WARN  [component] message key=value …`. */
export function readable(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const { time, level, message, component, pid: _pid, hostname: _hostname, ...fields } = entry;
  const clock = typeof time === 'string' ? time.slice(11, 23) : '';
  const label = LEVEL_LABELS[String(level)] ?? String(level).toUpperCase();
  const where = typeof component === 'string' ? ` [${component}]` : '';
  const stacks: string[] = [];
  const rest = Object.entries(fields)
    .map(([key, value]) => {
      const stack = (value as { stack?: unknown } | null)?.stack;
      if (typeof stack === 'string') stacks.push(stack);
      else if (typeof value === 'string') return `${key}=${value}`;
      return `${key}=${JSON.stringify(typeof stack === 'string' ? (value as { message?: unknown }).message : value)}`;
    })
    .join(' ');
  return `${clock} ${label}${where} ${typeof message === 'string' ? message : JSON.stringify(message ?? '')}${rest ? ` ${rest}` : ''}\n${stacks.map((stack) => `${stack}\n`).join('')}`;
}

let processDestination: 'stdout' | 'stderr' = 'stdout';
const processStreams = { stdout: processStream('stdout'), stderr: processStream('stderr') };

/**
 * The process's logger. Its level is SERVICE_LOG_LEVEL once src/main.ts has read the settings
 * (`log.level = settings.SERVICE_LOG_LEVEL`); `info` before. Modules log through it with a
 * `component` field rather than through child loggers, which would keep the level they were made with.
 */
export const log: Logger = createLogger({
  destination: { write: (line: string) => processStreams[processDestination].write(line) },
});

/** Sends the process's log to stderr instead of stdout: for the `service` command, whose stdout is its answer. */
export function setLogDestination(name: 'stdout' | 'stderr'): void {
  processDestination = name;
}

/** A log function of one line, for the modules that take `log?: (line) => void` (tests pass their own). */
export type LineLog = (line: string, level?: 'debug' | 'info' | 'warn' | 'error') => void;

/** Lines of `component` into the process's logger, at `level` unless the caller says otherwise. */
export function lineLog(component: string, level: 'debug' | 'info' | 'warn' | 'error' = 'warn'): LineLog {
  return (line, at = level) => log[at]({ component }, line);
}

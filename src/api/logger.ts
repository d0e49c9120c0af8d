/**
 * The API's access and error log. Callers pass fields explicitly; nothing logs headers or bodies. By
 * default its lines go to the service's logger (src/log.ts) with `component: "api"`; tests pass their
 * own to read what was logged.
 */
import { log as serviceLog, type Logger as PinoLogger } from '../log.js';

export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export function createAccessLogger(target: PinoLogger = serviceLog): Logger {
  return {
    info: (message, fields) => target.info({ component: 'api', ...fields }, message),
    error: (message, fields) => target.error({ component: 'api', ...fields }, message),
  };
}

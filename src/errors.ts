/**
 * One error taxonomy for the whole service. Every error a user can see has a stable snake_case
 * `code`; each boundary translates it: activities into `ApplicationFailure({ type: code })`, the API
 * into `{ error: { code, message } }` with `status`, the CLI into a one-line message.
 */
export class ServiceError extends Error {
  override readonly name: string = 'ServiceError';
  /** Stable, snake_case; part of the public interface. */
  readonly code: string;
  /** HTTP status the API answers with. */
  readonly status: number;
  /** Extra structured detail for the caller (validation problems, say); never secrets. */
  readonly details: unknown;
  /** False when trying again cannot help (bad input, missing configuration). */
  readonly retryable: boolean;

  constructor(
    code: string,
    message: string,
    options: { status?: number; details?: unknown; retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = options.status ?? 500;
    this.details = options.details;
    this.retryable = options.retryable ?? false;
  }
}

export const isServiceError = (error: unknown): error is ServiceError => error instanceof ServiceError;

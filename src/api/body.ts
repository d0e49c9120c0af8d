import type { Request } from 'express';
import { ServiceError } from '../errors.js';
import { rawBodyOf } from './server.js';

/**
 * The request body as bytes: what the JSON parser kept, or the stream read whole (a body of another
 * type), refused past the limit.
 */
export async function readBodyBytes(req: Request, limitBytes: number): Promise<Buffer> {
  const parsed = rawBodyOf(req);
  if (parsed !== undefined) return parsed;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) {
      throw new ServiceError('payload_too_large', 'The request body is larger than the limit of this server.');
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

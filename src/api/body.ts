import type { Request } from 'express';
import { ServiceError } from '../errors.js';
import { bodyLimitOf, rawBodyOf } from './server.js';

/**
 * The request body as bytes, unparsed: what the JSON parser kept, or the stream read whole, refused
 * past the server's body limit.
 */
export async function readBodyBytes(req: Request): Promise<Buffer> {
  const parsed = rawBodyOf(req);
  if (parsed !== undefined) return parsed;
  const limitBytes = bodyLimitOf(req);
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
